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
from collections.abc import Mapping
from concurrent.futures import CancelledError, Future, InvalidStateError
from concurrent.futures._base import PENDING as _FUTURE_PENDING
from contextlib import suppress
from operator import attrgetter
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Protocol, TypeVar, cast

from . import _threads
from ._expiry import mark_expired, raise_if_expired

if TYPE_CHECKING:
    from datetime import datetime

    from ._lanes import LaneState
    from ._recurring import Recurrence
    from ._retry import Retry
    from ._scheduler import Scheduler

# Waiting states first: a task in one of them is queued and may still be claimed.
PENDING = 0  # in the pending heap, not due yet
INTAKE = 1  # due, in the intake on its way to the ready heap
THROTTLED = 2  # due, held back by its lane's limits, in the lane's own heap
READY = 3  # in the ready heap, due, waiting for a worker
STARTED = 4
COMPLETED = 5
FAILED = 6
CANCELLED = 7
EXPIRED = 8
VOID = 9  # never counted: a run that ended with its series, or a submit taken back
STATES = 10

NO_KWARGS: Mapping[str, Any] = MappingProxyType({})

T = TypeVar("T")


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
    # Set if its task expired: (deadline, name), what Expired says (see _expiry).
    _expired: tuple[datetime, str] | None = None

    if OWN_FUTURE_INIT:
        # Most futures never get a done-callback: a list each would be one more object per
        # waiting task for the cyclic GC to walk (and 56 bytes). Until add_done_callback()
        # makes one, Future's _invoke_callbacks finds this empty tuple.
        _done_callbacks: Any = _NO_CALLBACKS

        def __init__(self, owner: weakref.ref[Scheduler]) -> None:
            self._condition = FutureLock()  # type: ignore[assignment]  # see FutureLock
            self._state = _FUTURE_PENDING
            self._result: T | None = None
            self._exception: BaseException | None = None
            self._waiters: list[Any] = []
            self._owner = owner
    else:

        def __init__(self, owner: weakref.ref[Scheduler]) -> None:
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

    # An expired task's future raises Expired, a CancelledError that names the deadline.
    # Each lets go of the future as Future's own do: a task's exception raised here holds
    # this frame in its traceback, and the future holds the exception.
    def result(self, timeout: float | None = None) -> T:
        try:
            return super().result(timeout)
        except CancelledError:
            raise_if_expired(self)
            raise
        finally:
            del self

    def exception(self, timeout: float | None = None) -> BaseException | None:
        try:
            return super().exception(timeout)
        except CancelledError:
            raise_if_expired(self)
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
    """An entry of the pending heap: a task waiting to be due, or a task's deadline."""

    __slots__ = ()
    _when: float
    _seq: int

    def __lt__(self, other: TimerEntry) -> bool:
        return self._when < other._when or (self._when == other._when and self._seq < other._seq)

    def live(self) -> bool:
        raise NotImplementedError


class Task(TimerEntry):
    """One call to run, with what the scheduler needs to order it.

    Its future tells it when it is done, as a done-callback registered first would: that is
    the only way to learn that ``Future.cancel()`` succeeded, so that the cancellation can be
    completed at once.
    """

    # Kept small: a delayed task costs no more memory than ThreadPoolExecutor's work item.
    # (An object's memory is a multiple of 16 bytes: a ninth slot would cost 16.)
    __slots__ = (
        "_priority",
        "_seq",
        "_when",
        "args",
        "fn",
        "future",
        "kwargs",
        "state",
    )
    _deadline: float | None = None
    _expiry: Expiry | None = None
    recurrence: Recurrence | None = None  # set on the tasks of a recurring series
    lane: LaneState | None = None  # set on the tasks of a lane
    # Set on the tasks tried again after a failure (see _retry): what the scheduler asks
    # "again, and when?", and which attempt runs or waits.
    retry: Retry | None = None
    attempt = 1

    def __init__(
        self,
        scheduler: Scheduler,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        future: OwnFuture[Any],
        priority: int,
        due: float,
    ) -> None:
        self.fn = fn
        self.args = args
        self.kwargs = kwargs or NO_KWARGS
        self.future = future
        future._task = self  # told when the future is done (see OwnFuture._invoke_callbacks)
        self._priority = priority
        self._when = due
        self._seq = scheduler.next_seq()
        self.state = PENDING

    # What a policy reads (``TaskInfo``), read-only.
    priority = property(attrgetter("_priority"))
    due = property(attrgetter("_when"))
    deadline = property(attrgetter("_deadline"))
    seq = property(attrgetter("_seq"))

    @property
    def scheduler(self) -> Scheduler:
        """Its executor's scheduler, while the task holds its future (see hand_over): the
        threads that run or wait for the task hold the scheduler meanwhile."""
        return cast("Scheduler", self.future._owner())

    def live(self) -> bool:
        return self.state == PENDING

    def replacement(self, cls: type[Task] | None = None) -> Task:
        """A copy of this waiting task, of class ``cls`` (default its own), to queue in its
        place: how ``reschedule()`` changes a task's due time, priority or deadline.

        A task in the pending heap is its own entry there, ordered by its due time: that
        time must not change while it sits in the heap. So the task is not changed; the
        copy is queued, and the original, claimed VOID, becomes a dead entry wherever it
        stands (see Scheduler.reschedule). It is also how a plain ``Task``, which has no
        slot for a deadline (so that a task without one stays as small as
        ``ThreadPoolExecutor``'s work item), gets one: its copy is an ``ExpiringTask``.
        """
        new = object.__new__(cls or type(self))
        for name in _slots(type(self)):
            setattr(new, name, getattr(self, name))
        return new

    def __call__(self, future: Future[Any]) -> None:
        # Only the user's cancel() completes a future whose task is still waiting; every
        # other completion happens after a claim, which moved the task out of those states.
        if self.state <= READY:
            scheduler = cast("OwnFuture[Any]", future)._owner()
            if scheduler is not None:  # else gone with its threads: nothing waits for it
                scheduler.future_done(self, future.cancelled())

    def run(self, tally: Tally) -> None:
        """Run in a worker, after the claim, counting how it ended in the worker's ``tally``.

        The count comes before the future completes: whoever sees the future done and
        then reads ``stats()`` finds the task counted.
        """
        future, fn, args, kwargs = self.hand_over()
        if not future.set_running_or_notify_cancel():
            tally[CANCELLED] += 1  # cancelled between the claim and this line
            return
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            tally[FAILED] += 1
            future.set_exception(exc)
            # The traceback holds this frame, and the future holds the traceback.
            del future
            return
        tally[COMPLETED] += 1
        future.set_result(result)

    def abandon(self) -> None:
        """Report the claimed task's future cancelled, waking ``wait()`` and ``as_completed()``."""
        if self.state == EXPIRED:
            clock = self.scheduler.clock
            deadline = cast(float, self._deadline) + clock.wall() - clock.now()
            mark_expired(self.future, self.fn, deadline)
        future = self.hand_over()[0]
        try:
            future.cancel()
        finally:  # even if a callback raised SystemExit: cancel() set the state first
            future.set_running_or_notify_cancel()

    def fail(self, exc: BaseException) -> None:
        """Fail the claimed task's future without running it."""
        fail(self.hand_over()[0], exc)

    def hand_over(self) -> tuple[Future[Any], Callable[..., Any], tuple[Any, ...], Any]:
        """Give up everything the claimed task holds. Its future holds the task (as
        ``_task``): were the task to keep the future, each would be a reference cycle
        that only the garbage collector frees, and the call's arguments would live as long
        as the future."""
        held = (self.future, self.fn, self.args, self.kwargs)
        del self.future, self.fn, self.args, self.kwargs
        return held

    def let_go(self) -> tuple[Callable[..., Any], tuple[Any, ...], Any]:
        """Give up the call, which no run needs any more: the caller drops it when no lock
        is held, as dropping may run a ``__del__``."""
        held = (self.fn, self.args, self.kwargs)
        del self.fn, self.args, self.kwargs
        return held

    def __repr__(self) -> str:
        name = getattr(getattr(self, "fn", None), "__qualname__", "(handed over)")
        return f"<Task {self._seq} {name} state={self.state}>"


_SLOTS: dict[type[Task], tuple[str, ...]] = {}


def _slots(cls: type[Task]) -> tuple[str, ...]:
    """The slots of a task class, its bases' included (see Task.replacement)."""
    names = _SLOTS.get(cls)
    if names is None:
        found: list[str] = []
        for klass in cls.__mro__:
            slots = klass.__dict__.get("__slots__", ())
            found.extend((slots,) if isinstance(slots, str) else slots)
        names = _SLOTS[cls] = tuple(found)
    return names


def fail(future: Future[Any], exc: BaseException) -> None:
    """Fail a future that its owner has not set running, unless the user cancelled it
    first: then report that cancellation instead."""
    try:
        future.set_exception(exc)
    except InvalidStateError:
        future.set_running_or_notify_cancel()


class ExpiringTask(Task):
    """A task with a start deadline, which has its own entry in the pending heap."""

    __slots__ = ("_deadline", "_expiry")

    # Positional parameters all the way down: on the path of every lane task, where
    # ``*args`` and keywords through two levels cost a microsecond per submit.
    def __init__(
        self,
        scheduler: Scheduler,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        future: OwnFuture[Any],
        priority: int,
        due: float,
        deadline: float | None,
    ) -> None:
        super().__init__(scheduler, fn, args, kwargs, future, priority, due)
        self._deadline = deadline
        self._expiry = None if deadline is None else Expiry(self, deadline)


class LaneTask(ExpiringTask):
    """A task of a lane, with or without a start deadline."""

    __slots__ = ("lane",)

    def __init__(
        self,
        scheduler: Scheduler,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        future: OwnFuture[Any],
        priority: int,
        due: float,
        deadline: float | None,
        lane: LaneState | None,
    ) -> None:
        super().__init__(scheduler, fn, args, kwargs, future, priority, due, deadline)
        self.lane: LaneState | None = lane


class Expiry(TimerEntry):
    """The deadline of an ``ExpiringTask``, ordered in the pending heap by that time.

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
