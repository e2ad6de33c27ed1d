"""The scheduler: one lock, two heaps, and the one transition of every task.

::

    add() ──► pending heap (by due time) ──promote──► ready heap (by policy key) ──► take()
        └──────────── already due ──────────────────────┘

One lock guards both heaps, the counts and every state change, so each claim (start,
cancel, expiry, drop) is one atomic step. ``move()`` is the one writer of a task's state,
the counts, the waiting gate and its extension's (a lane's counts and gate, its deadline's
alarm); a task's features (a deadline, a lane, a retry policy, a recurrence) are its
extension's hooks, called there (see ``_task.Hooks``). A locked section only changes
state: what must happen because of it (futures to complete, which runs their callbacks; a
thread to start; the promoter to wake; user objects to let go of, which may run their
``__del__``) is collected in an ``Effects`` and applied once the lock is released (see
``_effects``).

A task submitted due reaches the ready heap through the *intake*, a deque that submitters
append to without the lock (deque appends and pops are thread-safe, on free-threaded
builds too: see docs/design.md), and that a worker drains under it. A submitter that took
the lock would convoy with the workers: under the GIL, a thread preempted while it holds the
lock makes every other thread that wants it sleep, and each of those then waits again for
the GIL. A task that becomes due under the lock goes straight to the ready heap.

The "ready heap" is a heap and a deque that ``take()`` merges: a task that comes after
every one in the deque by the policy's order joins the deque (O(1)), any other the heap.

Some callers cannot know who holds the lock: they ``post()`` a step (see ``_posting``).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import threading
import time
import weakref
from collections import deque
from heapq import heapify, heappop, heappush
from typing import TYPE_CHECKING, Any, Callable, TypeVar, cast

from . import _threads
from ._clock import WallTime
from ._closing import Closing, fail_fresh, fresh
from ._effects import Effects
from ._fair import Fair
from ._gate import Gate, admit
from ._policies import Policy, key_function
from ._posting import Posting
from ._promoter import Promoter
from ._promotion import Promotion
from ._task import (
    CANCELLED,
    FAILED,
    INTAKE,
    PENDING,
    READY,
    STARTED,
    STATES,
    THROTTLED,
    VOID,
    Alarm,
    Holder,
    Lane,
    Task,
    TimerEntry,
)

if TYPE_CHECKING:
    from ._clock import Clock
    from ._workers import WorkerPool

R = TypeVar("R")


class Scheduler(Promotion, Closing, Posting):
    # A heuristic on CPython's internals, named as such: an instance keeps its attributes
    # in its fast layout only while they are fewer than 30 (SHARED_KEYS_MAX_SIZE); with a
    # 30th, each ``self.x`` of the hot path is a dict lookup, 2% of a plain task's
    # instructions (callgrind, 3.11). So this holds 29: what is seldom read is a method
    # (wall()) or lives in a helper object (the clock, in wall_time).
    def __init__(
        self, clock: Clock, policy: Policy, workers: WorkerPool, gate: Gate | None
    ) -> None:
        self._key = key_function(policy)
        self.now = clock.now
        self.workers = workers
        self.lock = threading.Lock()
        self.next_seq = itertools.count().__next__
        self.intake: deque[tuple[Any, ...]] = deque()  # (*policy key, seq, task)
        # The ready tasks that came in order (see the module docstring; _push_ready), as
        # plain submits and delayed tasks coming due in turn do: a FIFO-like workload never
        # pays a heap pop, which touches log n entries scattered in memory (0.9 us at 100k).
        self.in_order: deque[tuple[Any, ...]] = deque()
        self.ready: list[tuple[Any, ...]] = []
        # Once a lane has a weight, the ready tasks in shares, in place of the two above
        # (see _fair): until then nothing of fair share costs the ready heap a test.
        self.fair: Fair | None = None
        self.timers: list[TimerEntry] = []  # tasks by due time, alarms by theirs
        self._alarms = 0  # live alarms among the timers
        self.counts = [0] * STATES
        self.series: set[Task] = set()  # tasks of live recurring series
        self.holders: set[Holder] = set()  # where throttled tasks wait (their lanes)
        self._posted: deque[Callable[[Effects], object]] = deque()  # see post()
        self.later: deque[Callable[[Effects], object]] = deque()  # likewise, not flushed
        self.closed: str | None = None  # why submit() now raises
        self.broken: BaseException | None = None  # why nothing can run any more
        self.shutdown_requested: str | None = None  # by the GC finalizer: see request_shutdown
        self.drained = threading.Event()  # set once closed with nothing left to start
        self.retries = 0  # retries queued so far: see try_again()
        self.forked = False  # in a child forked from this executor's process: its tasks
        # are the parent's (see after_fork_in_child)
        # By a shutdown that cancels waiting tasks: a failed attempt is not tried again.
        self.cancelled_all = False
        self.promoter = Promoter(self, f"{workers.name_prefix}_promoter")
        # Where a submit waits while max_waiting tasks wait (see _gate.admit).
        self.gate = gate
        # Those of the lanes with max_waiting: shutdown wakes the submits waiting there.
        self._lane_gates: weakref.WeakSet[Gate] = weakref.WeakSet()
        # Whether any gate counts tasks, the executor's or a lane's: one test on the plain path.
        self.gated = gate is not None
        # With a ManualClock, nothing is due until a test advances it.
        self.manual_time = clock.attach(self)
        # The clock, and the tasks that wait for a wall-clock time, kept on time when the
        # wall clock steps.
        self.wall_time = WallTime(clock, self.manual_time)

    def wall(self) -> float:
        return self.wall_time.clock.wall()

    # -- the transition ----------------------------------------------------------------------

    def move(self, task: Task, state: int, effects: Effects, was: int | None = None) -> None:
        """Move a task into ``state``, under the lock: the one writer of its state, the
        counts, the waiting gate and (through its extension's hooks) its lane's counts and
        its deadline. ``was``: the state to count it out of, if not its own (VOID: counted
        nowhere, as a new task or the next run of a series, whose last run its worker
        counted). The intake's lock-free entry is the one other writer (see add())."""
        if was is None:
            was = task.state
        counts = self.counts
        counts[was] -= 1  # counts[VOID] is scratch: never read
        counts[state] += 1
        task.state = state
        gate = self.gate
        if gate is not None and (was <= READY) is not (state <= READY):
            gate.count(state <= READY)
        ext = task.ext
        if ext is not None:
            ext.moved(task, was, state, self, effects)

    def claim(self, task: Task, state: int, effects: Effects) -> None:
        """Take a waiting task out of the queue for good, into ``state``. Every race between
        start, cancel, expiry and shutdown is decided by which claim comes first."""
        was = task.state
        self.move(task, state, effects)
        if was == PENDING:
            self._timer_died()

    def alarm_died(self) -> None:
        self._alarms -= 1
        self._timer_died()

    def _timer_died(self) -> None:
        # An entry of the pending heap died: compacting when at least half are dead costs
        # O(1) per claim, amortised, and the promoter never wakes for a dead entry.
        timers = self.timers
        if len(timers) > 2 * (self.counts[PENDING] + self._alarms):
            timers[:] = [entry for entry in timers if entry.live()]
            heapify(timers)

    # -- intake ------------------------------------------------------------------------------

    def add(self, task: Task, due_now: bool, admitted: bool = False) -> None:
        """Queue a new task, already due or not. If this raises (the executor takes no more
        work, no thread could start, a policy raised ``KeyboardInterrupt``), nothing of the
        task stays queued or counted. With ``max_waiting``, the executor's or its lane's,
        wait for room first, unless ``admitted`` (see ``_gate.admit``)."""
        if self.gated and not admitted:  # the one test of the plain path
            admit(self, task, None if task.ext is None else task.ext.lane, due_now)
            return
        key = None
        if due_now:
            try:
                key = self._key(task)
            except Exception as exc:  # a broken policy fails this task, not the executor
                self._fail_new(task, exc)
                return
        ext = task.ext
        if self.closed is not None:
            self.check_open()
        workers = self.workers
        if key is not None and (ext is None or ext.lock_free):
            # The common case: no lock (see the module docstring). A task with a deadline,
            # a retry policy or a recurrence takes it: it needs the promoter. Here its
            # extension, if any, is its lane (see Hooks.lock_free).
            lane: Lane | None = ext  # type: ignore[assignment]
            if lane is not None:
                if lane.closed:
                    ext.check_open()  # type: ignore[union-attr]  # raises
                if lane.timed and not self.manual_time:
                    self.promoter.start()  # a window or cooldown may need a timer
            task.state = INTAKE
            if self.gated:  # counted before the intake counts it: never fewer
                self._count_gated(lane)
            self.intake.append((*key, task._seq, task))
            # After the append: a worker that finds the intake empty registers as idle
            # first and looks again (see take()), so one of the two always sees the other.
            if workers.idle:
                workers.wake_one()
            elif len(workers.threads) < workers.max_workers:
                # After the append too, as ThreadPoolExecutor starts its threads: the new
                # worker finds the task at once, not after a park and a wake-up (a third
                # of a cold pool's first start).
                self._start_worker_for(task)
            # After the append too: shutdown, and a lane's, close before they look at the
            # intake for the last time, so either that look finds this task or this check
            # finds it closed (then the task is taken back, unless a worker started it).
            if (self.closed is not None or (lane is not None and lane.closed)) and (
                self._take_back(task)
            ):
                # Shutdown won the race: raise as if it had come first.
                self.check_open()
                ext.check_open()  # type: ignore[union-attr]  # not closed: so the lane is
            return
        if (not workers.idle if due_now else not workers.threads) and (
            len(workers.threads) < workers.max_workers
        ):
            # Before the task is queued: if no worker can start and none runs, this raises
            # with nothing to take back. A delayed task needs one worker, started now:
            # Python 3.12+ starts no thread at interpreter exit, when it may become due.
            workers.start_worker(self)
        if not self.manual_time:
            self.promoter.start()  # likewise
        self._add_locked(task, key)

    def _start_worker_for(self, task: Task) -> None:
        """add(): a worker for a task just put in the intake. If none can start and none
        runs, the task is taken back (no worker could have started it) and this raises."""
        try:
            self.workers.start_worker(self)
        except BaseException:
            self._take_back(task)
            raise

    def _add_locked(self, task: Task, key: Any) -> None:
        """add(), for a task not due, or one that needs the promoter: under the lock."""
        effects = Effects()
        self.lock.acquire()
        try:
            self.check_open()
            if task.ext is not None:
                task.ext.check_open()
            self.queue(task, key, effects)
            # A thread that submits in a loop holds the GIL for the switch interval (5 ms)
            # at a time: a task that comes due meanwhile would wait that long for the
            # promoter to run, and as long again for the worker that it wakes. So this
            # submit makes ready what is due itself, then lets the workers it woke run.
            # Only that: an expiry or a broken key would complete someone else's future,
            # running its callbacks in this thread (see _promote).
            timers = self.timers
            woke = bool(timers) and timers[0]._when <= self.now() and self._promote(effects, True)
        finally:
            self._release()
        self._apply(effects)
        if woke:
            time.sleep(0)  # the one portable way to hand the GIL over

    def _count_gated(self, lane: Lane | None) -> None:
        """A task to the intake counts in its gates' waiting tasks (the rest: see
        ``LaneState.moved``)."""
        if self.gate is not None:
            self.gate.waiting.append(None)
        if lane is not None and lane.gate is not None:
            lane.gate.waiting.append(None)

    def check_accepts(self, task: Task) -> None:
        """Raise if the executor, or the task's lane, takes no more tasks: a submit blocked
        when shutdown begins raises."""
        self.check_open()
        if task.ext is not None:
            task.ext.check_open()

    def _fail_new(self, task: Task, exc: Exception) -> None:
        """add() of a task whose policy key raised: it fails, not the executor."""
        self.locked(functools.partial(self._count_failed_new, task))
        with _threads.acting_for(self):
            task.fail(exc)

    def _count_failed_new(self, task: Task, effects: Effects) -> None:
        self.check_open()
        if task.ext is not None:  # a closed lane refuses it, as if its key were fine
            task.ext.check_open()
        self.move(task, FAILED, effects)

    def check_open(self) -> None:
        if self.closed is not None:
            if self.broken is not None:
                raise fresh(self.broken)
            raise RuntimeError(self.closed)

    def _take_back(self, task: Task) -> bool:
        """Withdraw a task that shutdown's (or its lane's) last look at the intake may have
        missed. False if it stays accepted: a worker started it already (then shutdown waits
        for it), or the pool broke (then it fails as every waiting task did, as in
        ``ThreadPoolExecutor``, whose initializer may fail while the first task is queued)."""
        return self.locked(functools.partial(self._withdraw, task))

    def _withdraw(self, task: Task, effects: Effects) -> bool:
        # VOID: a drain took it back already, its lane being closed (see drain_intake).
        taken_back = task.state <= READY or task.state == VOID
        if task.state <= READY:
            if self.broken is not None:
                self.claim(task, FAILED, effects)
                effects.later.append(functools.partial(fail_fresh, task, self.broken))
                taken_back = False
            else:
                self.claim(task, VOID, effects)
            self.discarded(effects)
        return taken_back

    def queue(self, task: Task, key: Any, effects: Effects, was: int | None = None) -> None:
        """Queue a task under the lock: to the workers if it is due, else to wait. ``was``:
        as in ``move()``, for a task that is not new."""
        ext = task.ext
        if ext is not None:
            if ext.recurrence is not None:
                self.series.add(task)
            upstreams = ext.upstreams
            if upstreams is not None and upstreams.hold(task, self, effects, was):
                return  # in no heap until its upstreams are done (see _dependencies)
            if ext.wall_due is not None:
                # Placed here, under the lock, after a look for a step of the wall clock:
                # placed by an offset that a step made stale, it could start early, and
                # the look that places every waiting task anew would not see it.
                if self.wall_time.stepped():
                    self._place_anew()
                task._when = self.wall_time.place(ext.wall_due)
        # The due time was computed from a time read before the lock: a ManualClock may have
        # been advanced past it since, and that advance() did not see this task.
        if key is None and task._when <= self.now():
            key = self._key_or_error(task)
        if isinstance(key, BaseException):
            # A new wait that fails at once (a series' run stays counted as started).
            self.move(task, FAILED, effects, was)
            effects.later.append(functools.partial(task.fail, key))
        elif key is None:
            self.move(task, PENDING, effects, was)
            self._push_timer(task, effects)
        else:
            self._make_due(task, (*key, task._seq, task), effects, was)

    def _make_due(
        self, task: Task, entry: tuple[Any, ...], effects: Effects, was: int | None = None
    ) -> None:
        """A task is due: to the ready heap, and a worker for it; a lane's, as its lane
        says (see _lane_engine)."""
        ext = task.ext
        lane = None if ext is None else ext.lane
        if lane is None:
            self.make_ready(entry, effects, was, True)
        else:
            lane.arrive(entry, self, effects, was, True)

    def make_ready(
        self, entry: tuple[Any, ...], effects: Effects, was: int | None, wake: bool
    ) -> None:
        """To the ready heap; ``wake``: and a worker for it (not if the caller is one)."""
        self.move(entry[-1], READY, effects, was)
        self._push_ready(entry)
        if wake:
            self._worker_for(effects)

    def share_fairly(self, by_time: bool = False) -> None:
        """A lane has a weight (or the executor shares busy time, ``by_time``, from its
        start): from now on the ready tasks wait in shares (see _fair), the ones already
        ready too. Under the lock, or before any thread runs."""
        if self.fair is None:
            self.fair = fair = Fair(by_time)
            for entry in (*self.in_order, *self.ready):
                if entry[-1].state == READY:
                    fair.push(entry)
            # In place: a worker parked in take() holds both.
            self.in_order.clear()
            self.ready.clear()

    def standing(self, lane: Lane, entry: tuple[Any, ...], steps: int) -> tuple[Any, ...]:
        return (entry,) if self.fair is None else self.fair.standing(lane, entry, steps)

    def outranks(self, entry: tuple[Any, ...], other: tuple[Any, ...]) -> bool:
        if self.fair is None:
            return entry < other
        return bool(Fair.rank(entry) < Fair.rank(other))

    def holding(self, holder: Holder, holds: bool) -> None:
        """``holder`` (a lane) is busy now, or idle: its throttled tasks are waiting tasks
        (see waiting_tasks()), and its ready ones may be held back (see _control.stats)."""
        if holds:
            self.holders.add(holder)
        else:
            self.holders.discard(holder)

    def drain_intake(self, effects: Effects, closing: object = None) -> None:
        """Move the intake's tasks to the ready heap (a lane's, as its lane says).
        ``closing``: a lane closed just now, whose tasks in the intake are still its own."""
        intake, counts = self.intake, self.counts
        push = self._push_in_order if self.fair is None else self.fair.push
        while intake:
            entry = intake.popleft()
            task: Task = entry[-1]
            if task.state != INTAKE:
                counts[INTAKE] += 1  # claimed in the intake: its claim counted it out
                continue
            lane: Lane | None = task.ext  # type: ignore[assignment]  # see add()
            if lane is None:
                # move(task, READY), inlined on the hot path: from the intake's length
                # into READY, both waiting states, so neither the gate nor a hook moves.
                task.state = READY
                counts[READY] += 1
                push(entry)
                continue
            counts[INTAKE] += 1  # out of the intake's length, into the counts (see add())
            # Its extension's lane: the lane itself, or an observed task's (see Hooks).
            own: Lane | None = lane.lane  # type: ignore[attr-defined]
            if lane.closed and own is not closing:
                # Submitted after its lane's shutdown drained the intake, so it saw the
                # lane closed after the append: its submit is taken back and raises (see
                # add()). It must not start meanwhile: the lane's shutdown(wait=True)
                # did not wait for it.
                self.move(task, VOID, effects)
                continue
            if own is None or (own.solo and not own.held and not own.given):
                # A lane alone, none of its tasks throttled or holding room: its room is
                # taken as a worker takes the task (see _lane_engine), so to the ready heap.
                self.move(task, READY, effects)
                push(entry)
            else:  # no worker woken: the submit woke one (see add())
                own.arrive(entry, self, effects, None, False)

    def _push_ready(self, entry: tuple[Any, ...]) -> None:
        if self.fair is not None:
            self.fair.push(entry)
        else:
            self._push_in_order(entry)

    def _push_in_order(self, entry: tuple[Any, ...]) -> None:
        in_order = self.in_order
        if not in_order or in_order[-1] < entry:
            in_order.append(entry)
        else:
            heappush(self.ready, entry)

    def _worker_for(self, effects: Effects) -> None:
        """A task was put in the ready heap: wake an idle worker for it, or start one (if
        the pool may grow: checked here, so that a full pool leaves no effect to apply)."""
        workers = self.workers
        if not (workers.idle and workers.wake_one()) and (
            len(workers.threads) < workers.max_workers
        ):
            effects.later.append(self._start_worker)

    def _start_worker(self) -> None:
        # A worker runs already (add() saw to it): one more that cannot start is no loss.
        with contextlib.suppress(RuntimeError):
            self.workers.start_worker(self)

    def ready_count(self) -> int:
        """Due tasks waiting for a worker, in the ready heap or on their way to it."""
        counts = self.counts
        return counts[READY] + counts[INTAKE] + len(self.intake)

    def _push_timer(self, entry: TimerEntry, effects: Effects) -> None:
        heappush(self.timers, entry)
        if entry._when < self.promoter.sleeps_until:
            effects.later.append(self.promoter.wake)

    def set_alarm(self, alarm: Alarm, effects: Effects) -> None:
        self._alarms += 1
        self._push_timer(alarm, effects)

    # -- workers -----------------------------------------------------------------------------

    def take(self, park: threading.Lock, effects: Effects) -> Task | None:
        """Claim the best due task for a worker, parking on ``park`` while there is none:
        a task claimed STARTED, to run, or claimed late (see ``Hooks.late``), to abandon;
        None when the worker should exit. ``effects``: the worker's own, empty."""
        lock, intake, posted, later = self.lock, self.intake, self._posted, self.later
        in_order, ready, workers = self.in_order, self.ready, self.workers
        idle, handing = workers.idle, workers.handing
        if lock.acquire(False):
            handing.append(None)
        else:
            workers.lock_for_worker(lock, park)
        finished = False
        try:
            while True:
                if later or posted:
                    self.count_posted(effects)
                if intake:
                    lone = self._drain_for_take(effects)
                    if lone is not None:
                        return lone
                while in_order or ready:
                    if in_order and (not ready or in_order[0] < ready[0]):
                        entry = in_order.popleft()
                    else:
                        entry = heappop(ready)
                    task: Task = entry[-1]
                    if task.state != READY:
                        continue  # claimed where it stood, by cancel() or a deadline
                    ext = task.ext
                    if ext is None:
                        self.move(task, STARTED, _NO_EFFECTS)
                        return task
                    if entry[-2] != task._seq:
                        continue  # of an earlier wait, left by a lane that took room back
                    state = ext.start(task, entry, self, effects)
                    if state == THROTTLED:
                        continue  # it waits in its lane
                    self.move(task, state, effects)
                    return task
                if self.fair:  # once a lane has a weight, the ready tasks are there instead
                    shared = self._take_shared(effects)
                    if shared is not None:
                        return shared
                finished = self._park(park, effects)
                if finished:
                    return None
        finally:
            handing.pop()
            lock.release()
            if posted:
                self._flush_posted()
            if effects.later or effects.finally_ or effects.drop:
                self._apply(effects)
            # Workers parked behind this one (see WorkerPool.lock_for_worker) rely on this
            # look, made after the release: one of them takes over if work is left to take.
            if idle and (finished or later or self.ready_count()):
                workers.wake_one()
            if self.gate is not None:
                self.gate.wake()  # a task started: its room is free
            if finished:
                self._wind_down()

    def _drain_for_take(self, effects: Effects) -> Task | None:
        """take()'s drain of the intake. A lone submit, as on an idle pool, is claimed here,
        returned STARTED: the drain would push it only for take() to pop it at once; 10% of
        the worker's instructions a start (docs/performance.md)."""
        intake = self.intake
        if len(intake) == 1 and not (self.in_order or self.ready or self.fair):
            lone: Task = intake[0][-1]
            if lone.state == INTAKE and lone.ext is None:
                intake.popleft()
                self.counts[INTAKE] += 1  # out of the intake's length, as a drain
                self.move(lone, STARTED, _NO_EFFECTS)
                return lone
        self.drain_intake(effects)
        return None

    def _take_shared(self, effects: Effects) -> Task | None:
        """take(), once fair share is on: the next task by the shares (see _fair)."""
        fair = cast(Fair, self.fair)
        while True:
            entry = fair.pop()
            if entry is None:
                return None
            task: Task = entry[-1]
            ext = task.ext
            if ext is not None and entry[-2] != task._seq:
                fair.took(False)  # left from an earlier wait (see take())
                continue
            state = STARTED if ext is None else ext.start(task, entry, self, effects)
            if state == THROTTLED:
                continue  # it waits in its lane; its share, for its next task
            fair.took(state == STARTED)
            self.move(task, state, effects)
            return task

    def _park(self, park: threading.Lock, effects: Effects) -> bool:
        """take() found nothing: park the worker until it is woken, the lock released
        meanwhile; or return True if it should exit."""
        lock, workers = self.lock, self.workers
        # Read before the look, if closed: see the release before parking, below.
        ends = None if self.closed is None else self._ends()
        if self._finished():
            return True
        if self.shutdown_requested is not None:
            workers.handing.pop()
            self._release()
            try:
                self.shutdown(False, self.shutdown_requested)
            finally:
                workers.lock_for_worker(lock, park)
            return False
        workers.idle.append(park)
        if self.intake:  # appended after the drain, perhaps without seeing us idle
            workers.withdraw(park)
            return False
        # Workers parked behind this one are idle like it: there is nothing to take.
        workers.handing.pop()
        self._release()
        # But one of them may have parked right after counting the end of a task that this
        # look took for running (the last one: then nothing else looks again). Its count
        # came before its attempt at the lock failed, so before this release: a read after
        # it sees that count, and a worker (this one, maybe) looks again. Likewise for a
        # step posted meanwhile (a lane's run that ended: its room may be what a throttled
        # task waits for).
        if self.later or (ends is not None and self._ends() != ends):
            workers.wake_one()
        try:
            if effects.later or effects.finally_ or effects.drop:
                self._apply(effects)  # a lane's timer, say: not after a long sleep
            park.acquire()
        finally:
            workers.lock_for_worker(lock, park)
        return False

    # -- cancellation ------------------------------------------------------------------------

    def future_done(self, task: Task, cancelled: bool) -> None:
        """A task's future was completed by someone other than the scheduler: cancelled by
        the user (a series' future also failed). Called as the future completes (see
        ``Task.__call__``), which may be anywhere, even where this thread holds the lock
        (a signal handler, a ``__del__``): so it never blocks on the lock."""
        if not self.forked:  # else the parent's task: the child's future is the user's alone
            self.post(functools.partial(self._end, task, cancelled))

    def _end(self, task: Task, cancelled: bool, effects: Effects) -> None:
        waiting = task.state <= READY
        if waiting:
            self.claim(task, CANCELLED if cancelled else FAILED, effects)
        ext = task.ext
        if ext is None or ext.recurrence is None:
            if waiting and cancelled:
                effects.later.append(task.abandon)  # reports it to wait(), as_completed()
            return
        self.series.discard(task)
        if cancelled and not waiting:
            # The series is counted once, cancelled; its last run counts on its own.
            self.counts[CANCELLED] += 1
            ext.counted(CANCELLED)
        if task.state != STARTED:
            effects.drop.append(task.let_go())  # else run_ended() does, once the run ends

    def discarded(self, effects: Effects) -> None:
        """Waiting tasks were claimed where they stood: reclaim their memory, maybe finish."""
        ready, in_order = self.ready, self.in_order
        self.drain_intake(effects)  # else busy workers leave claimed tasks there, and their memory
        # Compacting when at least half the entries are dead costs O(1) per claim, amortised.
        # In place: a worker parked in take() holds both.
        if len(ready) + len(in_order) > 2 * self.counts[READY]:
            ready[:] = [entry for entry in ready if entry[-1].state == READY]
            heapify(ready)
            live = [entry for entry in in_order if entry[-1].state == READY]
            in_order.clear()
            in_order.extend(live)
        fair = self.fair
        if fair is not None and fair.size > 2 * self.counts[READY]:
            fair.compact()
        if self.gate is not None:
            effects.later.append(self.gate.wake_all)  # their room is free, or shutdown began
        if self._finished():
            effects.finally_.append(self._wind_down)

    def _key_or_error(self, task: Task) -> Any:
        try:
            return self._key(task)
        except BaseException as exc:  # here a broken policy fails its task, whatever it raised
            return exc


# take()'s plain claims leave nothing to do: a lane's task, which may, has its own.
_NO_EFFECTS = Effects()
