"""Tasks and their states.

A task is claimed exactly once, under the scheduler's lock, by whoever moves it out of the
waiting states: a worker that starts it, the user's ``cancel()``, its deadline, a shutdown
with ``cancel_futures``, or a broken pool. That claim is the single step that decides every
race; the claimer alone then completes the future, outside the lock.
"""

from __future__ import annotations

import _thread
import time
import weakref
from collections import deque
from collections.abc import Iterable, Mapping
from concurrent.futures import CancelledError, Future, InvalidStateError
from concurrent.futures._base import PENDING as _FUTURE_PENDING
from contextlib import suppress
from operator import attrgetter
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Protocol, TypeVar, cast

from . import _threads
from ._expiry import mark_expired, raise_reason
from ._gate import Bounded

if TYPE_CHECKING:
    from contextvars import Context

    from ._clock import WallTime
    from ._effects import Effects
    from ._waiting import HeldBy

# Waiting states first: a task in one of them is queued and may still be claimed.
BLOCKED = 0  # waiting for its upstreams, in no heap (see _dependencies)
PENDING = 1  # in the pending heap, not due yet
INTAKE = 2  # due, in the intake on its way to the ready heap
THROTTLED = 3  # due, held back by its lane's limits, in the lane's own heap
READY = 4  # in the ready heap, due, waiting for a worker
STARTED = 5
COMPLETED = 6
FAILED = 7
CANCELLED = 8
EXPIRED = 9
VOID = 10  # counted nowhere: a new task, a submit taken back, a run that ended a series
SKIPPED = 11  # a run of a calendar series later than its misfire grace: not made
STATES = 12
# The waiting states: in a forked child, every task in one is the parent's.
WAITING = (BLOCKED, PENDING, INTAKE, THROTTLED, READY)

NO_KWARGS: Mapping[str, Any] = MappingProxyType({})

T = TypeVar("T")
R = TypeVar("R")


# How a run makes its call: here, or in a backend (see _backend.Backend.call).
Call = Callable[["OwnFuture[Any]", Callable[..., Any], tuple[Any, ...], Any], Any]


class Owner(Protocol):
    """The scheduler, as its tasks and their futures reach it."""

    def now(self) -> float: ...
    def wall(self) -> float: ...
    def future_done(self, task: Task, cancelled: bool) -> None: ...
    def try_again(self, task: Task, exc: BaseException) -> bool: ...
    def run_ended(self, task: Task) -> None: ...
    def break_pool(self, exc: BaseException) -> None: ...


class Tally(Protocol):
    """Where a run counts how it ended (``tally[COMPLETED] += 1``): a worker's own list,
    or for a lane's task one that also tells the lane (see ``_lanes.LaneTally``)."""

    def __getitem__(self, state: int, /) -> int: ...
    def __setitem__(self, state: int, count: int, /) -> None: ...


class FutureLock(_thread.RLock):  # type: ignore[misc]  # final in typeshed only
    """The lock and condition of a task's future: what ``Future`` asks of its
    ``_condition`` (``with``, ``acquire()``, ``release()``, ``wait()``, ``notify_all()``),
    and the rest of what a ``threading.Condition`` answers (``wait_for()``, ``notify()``),
    for code that waits on a future's ``_condition`` itself, at a fraction of its cost.

    A ``Condition`` is eight objects the cyclic GC tracks (itself, its lock, the lock's five
    bound methods, a deque) and 1,350 of a pending future's 1,580 bytes on 3.12, made for
    every task though only a ``result()`` that has to block ever waits on it. This is one
    object: being the reentrant lock itself, ``with`` costs no Python call, and the list of
    sleepers is made by the first ``wait()``."""

    __slots__ = ("_sleepers",)

    def __init__(self) -> None:
        self._sleepers: list[_thread.LockType] | None = None

    def wait(self, timeout: float | None = None) -> bool:
        # Called with the lock held, as Condition.wait is. Each waiter sleeps on a lock of
        # its own, taken before the future's lock is let go: a notify_all() that comes
        # between the release and the sleep still wakes it. _release_save and
        # _acquire_restore are RLock's private methods, the ones Condition itself uses to
        # let go of a lock held more than once: a last resort, checked by a test.
        sleeper = _thread.allocate_lock()
        sleeper.acquire()
        if self._sleepers is None:
            self._sleepers = []
        self._sleepers.append(sleeper)
        owner = self._release_save()  # type: ignore[attr-defined]
        woken = False
        try:
            if timeout is None:
                woken = sleeper.acquire()
            elif timeout > 0:  # as Condition: any other timeout, NaN too, only polls
                woken = sleeper.acquire(True, timeout)
            else:
                woken = sleeper.acquire(False)
            return woken
        finally:
            self._acquire_restore(owner)  # type: ignore[attr-defined]
            if not woken:
                # Timed out or interrupted; a notify_all() may have removed it meanwhile.
                with suppress(ValueError):
                    self._sleepers.remove(sleeper)

    def wait_for(self, predicate: Callable[[], T], timeout: float | None = None) -> T:
        # As Condition.wait_for: code that waits on a future's _condition may call it.
        end = None if timeout is None else time.monotonic() + timeout
        result = predicate()
        while not result:
            left = None
            if end is not None:
                left = end - time.monotonic()
                if left <= 0:
                    break
            self.wait(left)
            result = predicate()
        return result

    def notify(self, n: int = 1) -> None:
        sleepers = self._sleepers
        if sleepers:
            woken = sleepers[:n]
            del sleepers[:n]
            for sleeper in woken:
                sleeper.release()

    def notify_all(self) -> None:
        sleepers = self._sleepers
        if sleepers:
            for sleeper in sleepers:
                sleeper.release()
            sleepers.clear()


# What Future.__init__ sets, the same since Python 3.2; OwnFuture sets them itself, to give
# the future a FutureLock and no list of done-callbacks until one is added, only while a
# new Future has exactly these (else it keeps Future's own __init__ and Condition: slower,
# never wrong). Tests check, on every supported Python, that the probe holds, that Future
# asks no more of _condition, and that it appends to _done_callbacks only under it.
_FUTURE_FIELDS = frozenset(
    ("_condition", "_state", "_result", "_exception", "_waiters", "_done_callbacks")
)
OWN_FUTURE_INIT = frozenset(vars(Future())) == _FUTURE_FIELDS
_NO_CALLBACKS: tuple[()] = ()


class OwnFuture(Future[T]):
    """The future of a task. The done-callbacks that ``cancel()`` and
    ``add_done_callback()`` run in the caller's thread know that they run for the executor,
    as those that its threads run do: so ``shutdown(wait=True)`` called from one does not
    wait for the work it is part of.

    A task reaches its scheduler through its future, with no slot of its own for it (see
    Task), and the future through a weak reference, shared by the executor's futures: a
    finished future that the user keeps must not keep the executor's threads, heaps and
    ``initargs`` alive. Its threads hold the scheduler while any task waits or runs."""

    # The task that stands for this future, which reschedule() replaces by a copy (see
    # Task.replacement). It holds the task as a done-callback would.
    _task: Task | None = None
    # Set if its task was cancelled for a reason of the executor's (its deadline, an
    # upstream that failed): what result() and exception() raise then (see _expiry).
    _reason: Callable[[], CancelledError] | None = None
    # The _token.CancelToken of its task's run, once asked for or given a time limit
    # (typed Any here: _token imports this module).
    _token: Any = None
    # Set if its task is observed or timed: its Timings, filled in as it moves (see _events).
    _timings: object = None

    if OWN_FUTURE_INIT:
        # Most futures never get a done-callback: a list each would be one more object per
        # waiting task for the cyclic GC to walk (and 56 bytes). Until add_done_callback()
        # makes one, Future's _invoke_callbacks finds this empty tuple.
        _done_callbacks: Any = _NO_CALLBACKS

        def __init__(self, owner: weakref.ref[Owner]) -> None:
            self._condition = FutureLock()  # type: ignore[assignment]  # see FutureLock
            self._state = _FUTURE_PENDING
            self._result: T | None = None
            self._exception: BaseException | None = None
            self._waiters: list[Any] = []
            self._owner = owner
    else:

        def __init__(self, owner: weakref.ref[Owner]) -> None:
            super().__init__()
            self._owner = owner

    def _replace_task(self, new: Task) -> bool:
        """Make ``new`` the task of this future, in its task's place; False, changing
        nothing, if the future is done already.

        Under the future's own lock, so that ``cancel()`` either comes first (the future
        is done, and the task it tells is the one replaced) or after (and tells ``new``):
        never does a cancellation reach a task that no longer stands for the future."""
        with self._condition:
            if self.done():  # reentrant: _condition holds an RLock
                return False
            self._task = new
        return True

    def _hand_off(self, submit: Callable[[], Future[T]]) -> Future[T] | None:
        """Give the call to a backend (``submit`` does), or None if this future was
        cancelled first. This one stays pending through the call (a series', a retry's):
        cancelling it stops what follows, not the call in progress (see RemoteFuture)."""
        return submit()

    def _cancelled_there(self) -> None:
        """The backend cancelled the call handed off: its CancelledError is the outcome of
        this call (of a series' run, of a retry's attempt), not this future's own."""

    def _invoke_callbacks(self) -> None:
        # What a done-callback registered first would do, without a callback per task:
        # its task learns that the future is done (which matters only for a cancel(), the
        # one completion that no claim came before), then the user's callbacks run. This
        # overrides a private method of Future, called by cancel(), set_result() and
        # set_exception() from Python 3.2 to this day, as the cheapest way to learn that
        # cancel() succeeded: add_done_callback() costs a lock and a list per task.
        task = self._task
        if task is not None:
            try:
                task(self)
            except Exception:
                # As Future reports a callback that raised, and goes on to the next.
                _threads.LOGGER.exception("exception calling callback for %r", self)
        # Future's own loop only if a user callback is registered (its private list: one
        # call less per task). add_done_callback() appends under the future's condition
        # before the state changes, or runs the callback itself once done: never missed.
        if self._done_callbacks:
            super()._invoke_callbacks()  # type: ignore[misc]

    # An expired task's future raises Expired, a CancelledError that names the deadline (a
    # dependent of a failed upstream's, DependencyFailed: see _reason).
    # Each lets go of the future as Future's own do: a task's exception raised here holds
    # this frame in its traceback, and the future holds the exception.
    def result(self, timeout: float | None = None) -> T:
        try:
            return super().result(timeout)
        except CancelledError:
            raise_reason(self)
            raise
        finally:
            del self

    def exception(self, timeout: float | None = None) -> BaseException | None:
        try:
            return super().exception(timeout)
        except CancelledError:
            raise_reason(self)
            raise
        finally:
            del self

    def cancel(self) -> bool:
        with _threads.acting_for(self._owner()):
            return super().cancel()

    def add_done_callback(self, fn: Callable[[Future[T]], object]) -> None:
        # Under the future's lock, which Future appends under too: two threads adding a
        # first callback at once make one list between them.
        with self._condition:
            if self._done_callbacks is _NO_CALLBACKS:
                self._done_callbacks = []
        with _threads.acting_for(self._owner()):
            super().add_done_callback(fn)

    def __repr__(self) -> str:
        # As ThreadPoolExecutor's futures read, in logs too ("exception calling callback
        # for <Future at ...>"): which class of ours made it is no one's concern.
        text = super().__repr__()
        return "<Future" + text[len(type(self).__name__) + 1 :]


class TimerEntry:
    """An entry of the pending heap: a task waiting to be due, or an alarm at its time."""

    __slots__ = ()
    _when: float
    _seq: int

    def __lt__(self, other: TimerEntry) -> bool:
        return self._when < other._when or (self._when == other._when and self._seq < other._seq)

    def live(self) -> bool:
        raise NotImplementedError


class Alarm(TimerEntry):
    """A timer that is not a task: what the promoter does when its time comes."""

    __slots__ = ()

    def fire(self, core: Core, now: float, effects: Effects) -> None:
        raise NotImplementedError

    def drop(self) -> None:
        """The scheduler winds down: this alarm will never fire. Let go of what it holds."""


class Core(Protocol):
    """What an extension's hooks ask of the scheduler, under its lock (see ``Hooks``)."""

    def now(self) -> float: ...
    def next_seq(self) -> int: ...
    def move(self, task: Task, state: int, effects: Effects, was: int | None = None) -> None: ...
    def make_ready(
        self, entry: tuple[Any, ...], effects: Effects, was: int | None, wake: bool
    ) -> None: ...
    def holding(self, holder: Holder, holds: bool) -> None: ...
    def set_alarm(self, alarm: Alarm, effects: Effects) -> None: ...
    def alarm_died(self) -> None: ...
    def locked(self, step: Callable[[Effects], R]) -> R: ...
    def post(self, step: Callable[[Effects], object], flush: bool = True) -> None: ...
    @property
    def later(self) -> deque[Callable[[Effects], object]]:
        """Where a step posted without ``flush`` waits (see ``post``): appended to directly
        on the hot path of a lane's run end."""

    def count_posted(self, effects: Effects) -> None: ...
    @property
    def workers(self) -> Workers:
        """The worker pool: whether any worker is idle (``workers.idle``)."""

    @property
    def wall_time(self) -> WallTime:
        """Where wall-clock times fall on the scheduler's clock, and how many tasks wait
        for one (see ``_clock.WallTime``)."""

    def standing(self, lane: Lane, entry: tuple[Any, ...], steps: int) -> tuple[Any, ...]:
        """Where ``entry``, a throttled task of ``lane``, would stand among the ready ones
        were it given room, after ``steps`` more of the lane's tasks started (see _fair)."""

    def outranks(self, entry: tuple[Any, ...], other: tuple[Any, ...]) -> bool:
        """Whether the workers would take ``entry`` before ``other`` whatever their shares
        (see _fair): by the policy's key, or with fair share on, by rank."""


class Workers(Protocol):
    idle: list[Any]  # the parked workers' locks: empty while every worker is busy
    threads: list[Any]  # the workers' threads
    max_workers: int


class Holder(Protocol):
    """Holds tasks back from the workers (a lane, its throttled ones; the executor's
    ``_dependencies.Blocked``, those waiting for upstreams): the scheduler lists them with
    the waiting tasks (see ``Core.holding``)."""

    @property
    def throttled(self) -> Iterable[tuple[Any, ...]]:
        """The entries of the tasks it holds (``entry[-1]`` is the task)."""

    def held_back(self, now: float) -> int:
        """How many of its READY tasks cannot start now (see ``_lane_engine``)."""

    def holding(self, now: float) -> tuple[Any, HeldBy, float] | None:
        """Which limit of which lane (its own, or one it sits in) holds its throttled
        tasks back, and until when."""


class Lane(Bounded, Protocol):
    """A task's lane, as the scheduler sees it (see ``_lane_engine.LaneState``): its name and
    its gate, as admission sees them (``_gate.Bounded``), and these."""

    closed: bool  # by its shutdown: it takes no more tasks
    timed: bool  # it has limits in time, which need the promoter
    weight: float | None  # its share of the workers (see _fair)
    share: Any  # its due tasks once fair share is on: a _fair.Share, or None
    survive_failures: bool  # its series go on after a failed run
    solo: bool  # in no lane and with none inside it (see _lane_engine)
    held: int  # its tasks throttled, and those of the lanes inside it
    given: dict[Task, tuple[Any, ...]]  # its READY tasks given room, and its inner lanes'

    def arrive(
        self, entry: tuple[Any, ...], core: Core, effects: Effects, was: int | None, wake: bool
    ) -> None:
        """One of its tasks is due: READY or throttled (see _lane_engine)."""

    def start(self, task: Task, entry: tuple[Any, ...], core: Core, effects: Effects) -> int:
        """A worker took one of its READY tasks: STARTED, or THROTTLED (see _lane_engine)."""


class Blocker(Protocol):
    """What holds a task back until other futures are done (``_dependencies.Upstreams``)."""

    def hold(self, task: Task, core: Core, effects: Effects, was: int | None) -> bool:
        """Queued: move the task BLOCKED and return True if it still waits for upstreams."""

    def waiting_for(self) -> tuple[Future[Any], ...]:
        """The upstreams not done yet, under the scheduler's lock."""


class Hooks(Protocol):
    """A task's extension: what a feature adds to it (a start deadline, a lane, a retry
    policy, a recurrence), as the one object the task carries (``Task.ext``). The scheduler
    calls its hooks at the task's transitions, under its lock; a plain task has none, and
    pays one attribute test for it. A task whose one feature is its lane has its lane for
    extension (``_lanes.LaneState``); any other has an ``_extension.Extension``."""

    # A lane's task with no other feature: it may be queued through the intake, without
    # the lock (the others need the promoter), and its extension is its lane; or answers
    # for its lane as its lane would (``closed``, ``timed``, ``gate``: an observed task's,
    # see ``_extension.Observed``).
    lock_free: bool

    @property
    def deadline(self) -> float | None: ...
    @property
    def lane(self) -> Lane | None: ...
    @property
    def recurrence(self) -> object | None:
        """A series': its task runs again (see _recurring)."""

    @property
    def retry(self) -> object | None:
        """A retry policy: a failed attempt is tried again (see _retry)."""

    @property
    def error(self) -> BaseException | None:
        """A retry's last exception, while it waits."""

    @property
    def wall_due(self) -> float | None:
        """The wall-clock time it waits for, if its due time is one (see ``WallTime``)."""

    @property
    def upstreams(self) -> Blocker | None:
        """The futures it waits for before it may be queued (see _dependencies)."""

    def check_open(self) -> None:
        """Raise ``RuntimeError`` if the task's lane takes no more tasks."""

    def start(self, task: Task, entry: tuple[Any, ...], core: Core, effects: Effects) -> int:
        """A worker took the task from the ready heap: the state to claim it into (STARTED,
        or EXPIRED or FAILED if late), or THROTTLED, held in its lane (a lane's task not
        given room as it came due: see ``_lane_engine``)."""

    def moved(self, task: Task, was: int, state: int, core: Core, effects: Effects) -> None:
        """The task moved from ``was`` to ``state`` (see ``Scheduler.move``)."""

    def counted(self, state: int) -> None:
        """A series ended in ``state`` while its run went on: counted, its state unchanged."""

    def copy(self, task: Task) -> Hooks:
        """This extension for ``task``, a copy queued in its task's place (see reschedule)."""

    def run(self, task: Task, tally: Tally, call: Call | None, core: Core) -> bool | None:
        """Run the claimed task in a worker (see ``run``). True: the worker's thread left
        the pool while the call overran its time limit (see ``_runtime``), and exits."""


class MoreHooks(Hooks, Protocol):
    """The hooks that only an ``_extension.Extension`` answers: of a task with a deadline,
    a retry policy or a recurrence (each caller knows that its task has one)."""

    def late(self) -> int:
        """The state of the task claimed because its deadline passed (see ``Task.abandon``)."""

    def again_in(
        self, task: Task, exc: BaseException, now: float, effects: Effects
    ) -> float | None:
        """An attempt raised ``exc``: in how long to try again, or None."""

    def begin(self, wall: float) -> bool:
        """A run of a series is about to start, at wall-clock time ``wall``: False if it is
        to be skipped (a calendar run later than its misfire grace). Outside the lock, in
        the worker: it may ask the series' schedule, user code, which may raise."""

    def skipped(self, task: Task, wall: float) -> None:
        """``begin(wall)`` said False: log the skipped run (outside the lock, in the
        worker, before the run is counted: whoever sees it counted finds the line)."""

    def look_ahead(self) -> None:
        """A run of a series is over: outside the lock, in the worker, ask its schedule
        (user code, which may raise) what ``next_due`` will need."""

    def next_due(self, core: Core) -> float | None:
        """A run of a series ended: when the next one is due; None if there is none (a
        calendar schedule that ended)."""

    def let_go(self) -> None:
        """The task is done: let go of what it holds for it (a retry's last exception,
        whose traceback holds the call's arguments)."""


class Task(TimerEntry):
    """One call to run, with what the scheduler needs to order it.

    Its future tells it when it is done, as a done-callback registered first would: that is
    the only way to learn that ``Future.cancel()`` succeeded, so that the cancellation can be
    completed at once.
    """

    # Kept small: a delayed task costs little more memory than ThreadPoolExecutor's work
    # item. (An object's memory is a multiple of 16 bytes: the ninth slot, context, costs 16.)
    __slots__ = (
        "_priority",
        "_seq",
        "_when",
        "args",
        "context",
        "fn",
        "future",
        "kwargs",
        "state",
    )
    # Set on tasks with a deadline, a lane, a retry policy or a recurrence (see Extended).
    ext: Hooks | None = None

    def __init__(
        self,
        seq: int,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        future: OwnFuture[Any],
        priority: int,
        due: float,
        context: Context | None,
    ) -> None:
        self.fn = fn
        self.args = args
        self.kwargs = kwargs or NO_KWARGS
        self.future = future
        future._task = self  # told when the future is done (see OwnFuture._invoke_callbacks)
        self._priority = priority
        self._when = due
        self._seq = seq
        self.state = VOID  # counted nowhere until it is queued
        # The submitter's contextvars, copied at submit: its call runs in them (see run);
        # None if the executor was made with inherit_context=False.
        self.context = context

    # What a policy reads (``TaskInfo``), read-only.
    priority = property(attrgetter("_priority"))
    due = property(attrgetter("_when"))
    seq = property(attrgetter("_seq"))

    @property
    def deadline(self) -> float | None:
        ext = self.ext
        return None if ext is None else ext.deadline

    def live(self) -> bool:
        return self.state == PENDING

    def replacement(self) -> Task:
        """A copy of this waiting task, to queue in its place: how ``reschedule()`` changes
        a task's due time, priority or deadline.

        A task in the pending heap is its own entry there, ordered by its due time: that
        time must not change while it sits in the heap. So the task is not changed; the
        copy is queued, and the original, claimed VOID, becomes a dead entry wherever it
        stands (see ``_control.reschedule``). A plain ``Task`` has no slot for an
        extension, so that a task without one stays as small as ``ThreadPoolExecutor``'s
        work item: its copy is an ``Extended``, to take a deadline.
        """
        new = object.__new__(Extended)
        for name in Task.__slots__:
            setattr(new, name, getattr(self, name))
        new.state = VOID  # counted nowhere until it is queued
        ext = self.ext
        new.ext = None if ext is None else ext.copy(new)
        return new

    def __call__(self, future: Future[Any]) -> None:
        # The future is done. A one-shot task's future is completed by whoever claimed the
        # task, but for the user's cancel() while it waits: then the scheduler claims it.
        # A series' future is done when the series ends (cancelled, or failed by a run).
        own: OwnFuture[Any] = future  # type: ignore[assignment]
        ext = self.ext
        series = ext is not None and ext.recurrence is not None
        if series:
            # Its task, which holds the future, must not be held by it: each would keep
            # the other, a reference cycle that only the cyclic GC frees.
            own._task = None
        # VOID: a copy queued in its task's place, not yet queued (see reschedule).
        if series or self.state <= READY or self.state == VOID:
            owner = own._owner()
            if owner is not None:  # else gone with its threads: nothing waits for it
                owner.future_done(self, future.cancelled())
        if series and future.cancelled():
            # No one sets a series future running, so no one else reports its cancellation.
            future.set_running_or_notify_cancel()

    def abandon(self) -> None:
        """Complete the future of a task claimed other than to start (a cancellation, a
        deadline, a shutdown), waking ``wait()`` and ``as_completed()``."""
        ext = self.ext
        if ext is not None:
            if ext.recurrence is not None:
                self.future.cancel()  # the future tells the series, which reports it
                return
            if self.state == FAILED and ext.error is not None:
                # A retry that did not start by its deadline: the last attempt's exception
                # stands (see Extension.late).
                self.fail(ext.error)
                return
            if self.state == EXPIRED:
                owner = self.future._owner()
                wall = 0.0 if owner is None else owner.wall() - owner.now()
                mark_expired(self.future, self.fn, ext.lane, wall + ext.deadline)  # type: ignore[operator]
        future = self.hand_over()[0]
        try:
            future.cancel()
        finally:  # even if a callback raised SystemExit: cancel() set the state first
            future.set_running_or_notify_cancel()

    def end_series(self) -> None:
        """The series' calendar has no run left: its future's result is None."""
        with suppress(InvalidStateError):  # cancelled first: that stands
            self.future.set_result(None)

    def fail(self, exc: BaseException) -> None:
        """Fail the claimed task's future without running it (a series': the series)."""
        if self.ext is not None and self.ext.recurrence is not None:
            # Cancelled first: that stands, and the series has reported it.
            with suppress(InvalidStateError):
                self.future.set_exception(exc)
            return
        fail(self.hand_over()[0], exc)

    def hand_over(
        self,
    ) -> tuple[Future[Any], Callable[..., Any], tuple[Any, ...], Any, Context | None]:
        """Give up everything the claimed task holds. Its future holds the task (as
        ``_task``): were the task to keep the future, each would be a reference cycle
        that only the garbage collector frees, and the call's arguments (and the values of
        its context, a request's, say) would live as long as the future."""
        held = (self.future, self.fn, self.args, self.kwargs, self.context)
        del self.future, self.fn, self.args, self.kwargs, self.context
        ext = self.ext
        if ext is not None and ext.error is not None:
            cast(MoreHooks, ext).let_go()
        return held

    def let_go(self) -> tuple[Callable[..., Any], tuple[Any, ...], Any, Context | None]:
        """Give up the call and its context, which no run needs any more: the caller drops
        them when no lock is held, as dropping may run a ``__del__``."""
        held = (self.fn, self.args, self.kwargs, self.context)
        del self.fn, self.args, self.kwargs, self.context
        return held

    def __repr__(self) -> str:
        name = getattr(getattr(self, "fn", None), "__qualname__", "(handed over)")
        return f"<Task {self._seq} {name} state={self.state}>"


class Extended(Task):
    """A task with an extension (see ``Hooks``): the one subclass, for its one slot."""

    __slots__ = ("ext",)


class Expiry(Alarm):
    """The start deadline of a task, ordered in the pending heap by that time.

    It lets go of its task when the task is claimed: a finished task, and its result, must
    not live on until its deadline.
    """

    __slots__ = ("_seq", "_when", "task")

    def __init__(self, task: Task, deadline: float) -> None:
        self._when = deadline
        self._seq = task._seq
        self.task: Task | None = task

    def live(self) -> bool:
        return self.task is not None

    def drop(self) -> None:
        self.task = None

    def fire(self, core: Core, now: float, effects: Effects) -> None:
        task = self.task
        if task is not None:
            core.move(task, cast(MoreHooks, task.ext).late(), effects)  # it has a deadline
            effects.later.append(task.abandon)


def fail(future: Future[Any], exc: BaseException) -> None:
    """Fail a future that its owner has not set running, unless the user cancelled it
    first: then report that cancellation instead."""
    try:
        future.set_exception(exc)
    except InvalidStateError:
        future.set_running_or_notify_cancel()
