"""The scheduler: two heaps, one lock, and the state machine of every task.

::

    add() ──► pending heap (by due time) ──promote──► ready heap (by policy key) ──► take()
        └──────────── already due ──────────────────────┘

One lock guards both heaps, the counts and every state change, so each claim (start,
cancel, expiry, drop) is one atomic step. A locked section only changes state: what must
happen because of it (futures to complete, which runs their callbacks; a thread to start;
the promoter to wake; user objects to let go of, which may run their ``__del__``) is
collected in an ``Effects`` and applied once the lock is released (see ``_effects``).

A task submitted due reaches the ready heap through the *intake*, a deque that submitters
append to without the lock (deque appends and pops are thread-safe, on free-threaded
builds too: see docs/design.md), and that a worker drains under it. A submitter that took
the lock would convoy with the workers: under the GIL, a thread preempted while it holds the
lock makes every other thread that wants it sleep, and each of those then waits again for
the GIL. A task that becomes due under the lock goes straight to the ready heap.

The "ready heap" is a heap and a deque that ``take()`` merges: a task that comes after
every one in the deque by the policy's order joins the deque (O(1)), any other the heap.

Some callers cannot know who holds the lock: a future telling its task of a cancel() (a signal
handler or a ``__del__`` as well), the executor's GC finalizer. They never block on it: a
cancellation is posted to ``_done`` and completed by whoever holds the lock next, when it
releases it (``_release()``); the finalizer only raises a flag and wakes a thread.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import itertools
import logging
import math
import threading
import time
from collections import deque
from concurrent.futures import BrokenExecutor
from heapq import heapify, heappop, heappush
from typing import TYPE_CHECKING, Any, cast

from . import _effects, _threads
from ._arguments import check_deadline
from ._clock import Clock
from ._effects import Effects
from ._gate import Gate
from ._lanes import LaneState, LaneTimer
from ._policies import Policy, key_function
from ._promoter import Promoter
from ._retry import RetryingSeries, RetryingTask, log_retry
from ._stats import ExecutorStats
from ._task import (
    CANCELLED,
    COMPLETED,
    EXPIRED,
    FAILED,
    INTAKE,
    PENDING,
    READY,
    STARTED,
    STATES,
    THROTTLED,
    VOID,
    ExpiringTask,
    Expiry,
    LaneTask,
    OwnFuture,
    Task,
    TimerEntry,
)
from ._waiting import WaitingState, WaitingTask

if TYPE_CHECKING:
    from ._workers import WorkerPool

_LOGGER = logging.getLogger("priority_executor")
# The waiting states: in a forked child, every task in one is the parent's.
_PARENTS = (PENDING, INTAKE, THROTTLED, READY)


class Scheduler:
    def __init__(
        self, clock: Clock, policy: Policy, workers: WorkerPool, max_waiting: int | None
    ) -> None:
        self._key = key_function(policy)
        self.clock = clock
        self.workers = workers
        self.lock = threading.Lock()
        self.next_seq = itertools.count().__next__
        self._intake: deque[tuple[Any, ...]] = deque()  # (*policy key, seq, task)
        # The ready tasks that came in order (see the module docstring; _push_ready), as
        # plain submits and delayed tasks coming due in turn do: a FIFO-like workload never
        # pays a heap pop, which touches log n entries scattered in memory (0.9 us at 100k).
        self._in_order: deque[tuple[Any, ...]] = deque()
        self._ready: list[tuple[Any, ...]] = []
        self._timers: list[TimerEntry] = []  # tasks by due time, other entries by their time
        self._alarms = 0  # live entries among the timers that are not tasks
        self._counts = [0] * STATES
        self._recurring: set[Task] = set()  # tasks of live recurring series
        self._throttling: set[LaneState] = set()  # lanes that hold throttled tasks
        self._done: deque[tuple[Task, bool]] = deque()  # see future_done()
        self._lane_ends: deque[tuple[Task, int, float]] = deque()  # see lane_run_ended()
        self._closed: str | None = None  # why submit() now raises
        self._broken: BaseException | None = None  # why nothing can run any more
        self._shutdown_requested: str | None = None  # by the GC finalizer: see request_shutdown
        self._drained = threading.Event()  # set once closed with nothing left to start
        self._retries = 0  # retries queued so far: see try_again()
        self._forked = False  # in a child forked from this executor's process: its tasks
        # are the parent's (see after_fork_in_child)
        # By a shutdown that cancels waiting tasks: a failed attempt is not tried again.
        self._cancelled_all = False
        self.promoter = Promoter(self, f"{workers.name_prefix}_promoter")
        # Where a submit waits while max_waiting tasks wait (see add_when_room).
        self.gate = None if max_waiting is None else Gate(max_waiting)
        # With a ManualClock, nothing is due until a test advances it.
        self.manual_time = clock.attach(self)

    # -- intake ------------------------------------------------------------------------------

    def add(self, task: Task, due_now: bool, admitted: bool = False) -> None:
        """Queue a new task, already due or not. If this raises (the executor takes no more
        work, no thread could start, a policy raised ``KeyboardInterrupt``), nothing of the
        task stays queued or counted. With ``max_waiting``, wait for room first, unless
        ``admitted`` (see ``_add_when_room``)."""
        if self.gate is not None and not admitted:  # the one test of the plain path
            self._add_when_room(self.gate, task, due_now)
            return
        key = None
        if due_now:
            try:
                key = self._key(task)
            except Exception as exc:  # a broken policy fails this task, not the executor
                self._fail_new(task, exc)
                return
        if self._closed is not None:
            self._check_open()
        workers = self.workers
        if (not workers.idle if due_now else not workers.threads) and (
            len(workers.threads) < workers.max_workers
        ):
            # Before the task is queued: if no worker can start and none runs, this raises
            # with nothing to take back. A delayed task needs one worker, started now:
            # Python 3.12+ starts no thread at interpreter exit, when it may become due.
            workers.start_worker(self)
        if key is not None and (
            type(task) is Task or (type(task) is LaneTask and task._expiry is None)
        ):
            # The common case: no lock (see the module docstring).
            lane = task.lane
            if lane is not None:
                if lane.closed:
                    _check_lane_open(lane)
                if lane.timed and not self.manual_time:
                    self.promoter.start()  # a window or cooldown may need a timer (_look_again)
            self._make_ready(task, key)
            # After the append: shutdown, and a lane's, close before they look at the
            # intake for the last time, so either that look finds this task or this check
            # finds it closed (then the task is taken back, unless a worker started it).
            if (self._closed is not None or (lane is not None and lane.closed)) and (
                self._take_back(task)
            ):
                # Shutdown won the race: raise as if it had come first.
                self._check_open()
                _check_lane_open(cast(LaneState, lane))
            return
        if not self.manual_time:
            self.promoter.start()  # likewise before the task is queued
        effects = Effects()
        self.lock.acquire()
        try:
            self._check_open()
            if task.lane is not None:
                _check_lane_open(task.lane)
            self._queue(task, key, effects)
            # A thread that submits in a loop holds the GIL for the switch interval (5 ms)
            # at a time: a task that comes due meanwhile would wait that long for the
            # promoter to run, and as long again for the worker that it wakes. So this
            # submit promotes what is due itself, then lets the workers it woke run.
            timers, now = self._timers, self.clock.now()
            woke = bool(timers) and timers[0]._when <= now and self._promote(now, effects)
        finally:
            self._release()
        self._apply(effects)
        if woke:
            time.sleep(0)  # the one portable way to hand the GIL over

    def _add_when_room(self, gate: Gate, task: Task, due_now: bool) -> None:
        """``add()`` with ``max_waiting``: first wait until fewer than that many tasks wait
        to start. Not in one of the executor's own threads: a task or a callback that
        waited there would hold up a worker, the very thing that makes room (once every
        worker waited so, nothing would), so it is let through."""
        if not gate.take_room():
            if _threads.owned_by(self):
                self.add(task, due_now, admitted=True)
                return
            gate.enter(functools.partial(self._check_accepts, task.lane))
        try:
            self.add(task, due_now, admitted=True)
        finally:
            # Counted as waiting by now (or refused, or failed, or started): the room it
            # held is its task's, or another submit's.
            gate.entered()

    def _check_accepts(self, lane: LaneState | None) -> None:
        """Raise if the executor, or the lane, takes no more tasks: a submit blocked when
        shutdown begins raises."""
        self._check_open()
        if lane is not None:
            _check_lane_open(lane)

    def _fail_new(self, task: Task, exc: Exception) -> None:
        self.lock.acquire()
        try:
            self._check_open()
            if task.lane is not None:  # a closed lane refuses it, as if its key were fine
                _check_lane_open(task.lane)
            task.state = FAILED
            self._counts[FAILED] += 1
            if task.lane is not None:
                task.lane.moved(None, FAILED)
        finally:
            self._release()
        with _threads.acting_for(self):
            task.fail(exc)

    def _check_open(self) -> None:
        if self._closed is not None:
            if self._broken is not None:
                raise _fresh(self._broken)
            raise RuntimeError(self._closed)

    check_open = _check_open  # for the façade: lane() after shutdown raises as submit() does

    def _take_back(self, task: Task) -> bool:
        """Withdraw a task that shutdown's (or its lane's) last look at the intake may have
        missed. False if it stays accepted: a worker started it already (then shutdown waits
        for it), or the pool broke (then it fails as every waiting task did, as in
        ``ThreadPoolExecutor``, whose initializer may fail while the first task is queued)."""
        effects = Effects()
        self.lock.acquire()
        try:
            # VOID: a drain took it back already, its lane being closed (see _drain_intake).
            taken_back = task.state <= READY or task.state == VOID
            if task.state <= READY:
                if self._broken is not None:
                    self._claim(task, FAILED, effects)
                    effects.later.append(functools.partial(_fail_fresh, task, self._broken))
                    taken_back = False
                else:
                    self._claim(task, VOID, effects)
                self._discarded(effects)
        finally:
            self._release()
        self._apply(effects)
        return taken_back

    def _queue(self, task: Task, key: Any, effects: Effects, held: bool = False) -> None:
        """Queue a task under the lock: to the workers if it is due, else to wait.
        ``held``: a due task goes straight back behind its lane's limits (a throttled task
        rescheduled), where the lane releases it when it has room."""
        if task.recurrence is not None:
            self._recurring.add(task)
        # The due time was computed from a time read before the lock: a ManualClock may have
        # been advanced past it since, and that advance() did not see this task.
        if key is None and task._when <= self.clock.now():
            key = self._key_or_error(task)
        if isinstance(key, BaseException):
            # A new wait that fails at once (a series' run stays counted as started).
            task.state = FAILED
            self._counts[FAILED] += 1
            effects.later.append(functools.partial(task.fail, key))
        elif key is None:
            task.state = PENDING
            self._counts[PENDING] += 1
            self._push_timer(task, effects)
        elif held:
            assert task.lane is not None
            task.state = THROTTLED
            self._counts[THROTTLED] += 1
            self._hold(task.lane, (*key, task._seq, task))
        else:
            self._to_ready(task, key, effects)
        if self.gate is not None and task.state != FAILED:
            self.gate.waiting.append(None)
        if task.lane is not None:
            task.lane.moved(None, task.state)
        if task._expiry is not None and task.state != FAILED:
            self._alarms += 1
            self._push_timer(task._expiry, effects)

    def run_ended(self, task: Task) -> None:
        """A run of a recurring series ended: queue the next one, unless the series ended."""
        effects = Effects()
        self.lock.acquire()
        try:
            if self._closed is None and not task.future.done():
                now = self.clock.now()
                recurrence = task.recurrence
                assert recurrence is not None
                task._when = due = recurrence.next_due(now)
                task._seq = self.next_seq()
                self._queue(task, self._key_or_error(task) if due <= now else None, effects)
            elif task in self._recurring:
                # Cancelled, failed or shut down: its future's callback, still to come, ends
                # the series (see _end) and lets go of the task, which no run uses now.
                task.state = VOID
            else:
                effects.drop.append(task.let_go())
        finally:
            self._release()
        self._apply(effects)

    def try_again(self, task: Task, exc: BaseException) -> bool:
        """An attempt of a task with a retry policy raised ``exc``: queue the task again
        when its policy says, and return True; or return False, and the caller ends the
        task with ``exc``. The attempt's start is taken back: the task waits as if it had
        never started, and is counted once, when its last attempt ends.

        A shutdown that began since does not stop it: the task was accepted, and shutdown
        waits for it (see _finished). ``cancel_futures``, a broken pool, a start deadline
        that the retry would miss, or the task's cancellation do.
        """
        # The promoter, which a retry waits for, started with the task: a task with a retry
        # policy is never queued without the lock (see add()).
        effects = Effects()
        self.lock.acquire()
        try:
            now = self.clock.now()
            wait = self._backoff(task, exc, now)
            if wait is not None:
                assert isinstance(task, (RetryingTask, RetryingSeries))  # they have a policy
                task._when = now + wait
                task._seq = self.next_seq()
                task.attempt += 1
                self._retries += 1
                self._counts[STARTED] -= 1
                if isinstance(task, RetryingTask) and task._deadline is not None:
                    task._expiry = Expiry(task, task._deadline)  # the last died with the start
                lane = task.lane
                if lane is not None:
                    lane.end(None, now)  # counted anew as it is queued; looked at below
                    lane.retries += 1
                self._queue(task, None, effects)
                if lane is not None:
                    # The worker that ran it goes on to take().
                    self._lane_run_over(lane, now, effects, worker_coming=True)
                effects.later.append(
                    functools.partial(
                        log_retry, task.fn, lane, task.attempt - 1, task.retry.attempts, wait, exc
                    )
                )
        finally:
            self._release()
        self._apply(effects)
        return wait is not None

    def _backoff(self, task: Task, exc: BaseException, now: float) -> float | None:
        """How long the task waits before its next attempt, or None if there is none: the
        one place that asks a retry policy "again, and when?"."""
        if task.future.done() or self._broken is not None or self._cancelled_all:
            return None  # cancelled (or a series ended), or nothing may start any more
        lane = task.lane
        if lane is not None and lane.cancelled:
            return None  # by the lane's shutdown(cancel_futures=True)
        policy = task.retry
        assert policy is not None
        wait = policy.again(exc, task.attempt)
        deadline = task._deadline
        if wait is None or (deadline is not None and now + wait >= deadline):
            return None  # the deadline bounds every attempt's start
        return wait

    def _key_or_error(self, task: Task) -> Any:
        try:
            return self._key(task)
        except BaseException as exc:  # here a broken policy fails its task, whatever it raised
            return exc

    def _make_ready(self, task: Task, key: Any) -> None:
        """Hand a new due task to the workers, without the lock.

        A task in the intake is counted by the intake's length until a worker drains it;
        a lane's task is counted in its lane then.
        """
        task.state = INTAKE
        if self.gate is not None:
            self.gate.waiting.append(None)  # before the intake counts it: never fewer
        self._intake.append((*key, task._seq, task))
        # After the append: a worker that finds the intake empty registers as idle first
        # and looks again (see take()), so one of the two always sees the other.
        if self.workers.idle:
            self.workers.wake_one()

    def _drain_intake(self, closing: LaneState | None = None) -> None:
        """Move the intake's tasks to the ready heap. ``closing``: a lane closed just now,
        whose tasks in the intake are still its own."""
        intake, counts, push = self._intake, self._counts, self._push_ready
        while intake:
            entry = intake.popleft()
            task: Task = entry[-1]
            if task.state == INTAKE:
                lane = task.lane
                if lane is not None:
                    if lane.closed and lane is not closing:
                        # Submitted after its lane's shutdown drained the intake, so it
                        # saw the lane closed after the append: its submit is taken back
                        # and raises (see add()). It must not start meanwhile: the lane's
                        # shutdown(wait=True) did not wait for it.
                        task.state = VOID
                        if self.gate is not None:
                            self.gate.waiting.pop()
                        continue
                    lane.counts[READY] += 1
                task.state = READY
                counts[READY] += 1
                push(entry)
            else:
                counts[INTAKE] += 1  # claimed in the intake: its claim counted it out

    def _to_ready(self, task: Task, key: Any, effects: Effects) -> None:
        """Under the lock, put a due task counted nowhere in the ready heap, and have a
        worker come for it."""
        task.state = READY
        self._counts[READY] += 1
        self._push_ready((*key, task._seq, task))
        self._worker_for(effects)

    def _push_ready(self, entry: tuple[Any, ...]) -> None:
        in_order = self._in_order
        if not in_order or in_order[-1] < entry:
            in_order.append(entry)
        else:
            heappush(self._ready, entry)

    def _worker_for(self, effects: Effects) -> None:
        """A task was put in the ready heap: wake an idle worker for it, or start one."""
        workers = self.workers
        if not (workers.idle and workers.wake_one()):
            self._more_workers(effects)

    def _ready_count(self) -> int:
        """Due tasks waiting for a worker, in the ready heap or on their way to it."""
        counts = self._counts
        return counts[READY] + counts[INTAKE] + len(self._intake)

    def _push_timer(self, entry: TimerEntry, effects: Effects) -> None:
        heappush(self._timers, entry)
        if entry._when < self.promoter.sleeps_until:
            effects.later.append(self.promoter.wake)

    def _more_workers(self, effects: Effects) -> None:
        """A task was made ready and no idle worker took it: start one more, if the pool
        may grow (checked here, so that a full pool leaves no effect to apply)."""
        if len(self.workers.threads) < self.workers.max_workers:
            effects.later.append(self._start_worker)

    def _start_worker(self) -> None:
        # A worker runs already (add() saw to it): one more that cannot start is no loss.
        with contextlib.suppress(RuntimeError):
            self.workers.start_worker(self)

    # -- promotion ---------------------------------------------------------------------------

    def promote_due(self) -> None:
        """Move every task due by now into the ready heap; expire every task whose deadline
        passed."""
        effects = Effects()
        self.lock.acquire()
        try:
            self._promote(self.clock.now(), effects)
        finally:
            self._release()
        self._apply(effects)

    def promote_and_plan(self) -> float | None:
        """The promoter's step: promote, then return when to promote next, or None when
        the promoter may exit."""
        if self._shutdown_requested is not None:
            self.shutdown(False, self._shutdown_requested)
        effects = Effects()
        self.lock.acquire()
        try:
            self._promote(self.clock.now(), effects)
            timers = self._timers
            while timers and not timers[0].live():
                heappop(timers)
            wake_at = timers[0]._when if timers else math.inf
            self.promoter.sleeps_until = wake_at
            done = self._finished()
        finally:
            self._release()
        self._apply(effects)
        return None if done else wake_at

    def _promote(self, now: float, effects: Effects) -> bool:
        """Promote what is due by ``now``; return whether more tasks are ready than before
        (then a submit hands the GIL to the workers woken for them: see add())."""
        timers, ready = self._timers, self._counts[READY]
        while timers and timers[0]._when <= now:
            entry = heappop(timers)
            if isinstance(entry, Expiry):
                task = entry.task
                if task is not None:
                    self._claim(task, _expired(task), effects)
                    effects.later.append(task.abandon)
            elif isinstance(entry, Task):
                if entry.state != PENDING:
                    continue
                key = self._key_or_error(entry)
                if isinstance(key, BaseException):
                    self._claim(entry, FAILED, effects)
                    effects.later.append(functools.partial(entry.fail, key))
                    continue
                self._counts[PENDING] -= 1
                if entry.lane is not None:
                    entry.lane.moved(PENDING, READY)
                self._to_ready(entry, key, effects)
            elif isinstance(entry, LaneTimer) and entry.live():
                self._alarms -= 1
                entry.lane.timer = None
                self._review_lane(entry.lane, now, effects)
        if effects.later:
            self._discarded(effects)
        return self._counts[READY] > ready

    def _apply(self, effects: Effects) -> None:
        if effects.later or effects.finally_ or effects.drop:  # most locked sections leave none
            # Callbacks of this executor's futures run here: they must not wait for it.
            with _threads.acting_for(self):
                _effects.apply(effects)

    # -- workers -----------------------------------------------------------------------------

    def take(self, park: threading.Lock, spare: Effects) -> Task | None:
        """Claim the best due task for a worker, parking on ``park`` while there is none.
        ``spare``: the worker's own effects, empty, for what a lane's task leaves to do.

        Returns a task claimed STARTED, to run, or claimed late (see ``_expired``), to
        abandon; None when the worker should exit.
        """
        lock, intake, lane_ends = self.lock, self._intake, self._lane_ends
        in_order, ready = self._in_order, self._ready
        workers = self.workers
        idle, handing = workers.idle, workers.handing
        lane_effects = None
        if lock.acquire(False):
            handing.append(None)
        else:
            workers.lock_for_worker(lock, park)
        finished = False
        try:
            while True:
                if lane_ends:
                    if lane_effects is None:
                        lane_effects = spare
                    self._count_lane_ends(lane_effects, worker_coming=True)
                if intake:
                    if len(intake) == 1 and not (in_order or ready):
                        # A worker woken for a lone submit, as on an idle pool: that task is
                        # the best there is, and the drain would push it only for the loop
                        # below to pop it at once. Claimed here instead, with the same net
                        # effect (a plain task in the intake has no deadline, see add()).
                        # A caller waits out this way from the wake-up to the task; 10% of
                        # the worker's instructions a start (see docs/performance.md).
                        lone: Task = intake[0][-1]
                        if lone.state == INTAKE and lone.lane is None:
                            intake.popleft()
                            self._counts[INTAKE] += 1  # out of the intake's length, as a drain
                            self._claim(lone, STARTED)
                            return lone
                    self._drain_intake()
                while in_order or ready:
                    if in_order and (not ready or in_order[0] < ready[0]):
                        entry = in_order.popleft()
                    else:
                        entry = heappop(ready)
                    task: Task = entry[-1]
                    if task.state != READY:
                        continue  # claimed where it stood, by cancel() or a deadline
                    if task.lane is not None:
                        if lane_effects is None:
                            lane_effects = spare
                        if not self._start_in_lane(entry, task.lane, lane_effects):
                            continue  # throttled: it waits in its lane
                        return task
                    deadline = task._deadline
                    if deadline is not None and deadline <= self.clock.now():
                        # Its expiry may still be on its way: never start a task that is late.
                        self._claim(task, _expired(task))
                    else:
                        self._claim(task, STARTED)
                    return task
                # Read before the look, if closed: see the release before parking, below.
                ends = None if self._closed is None else self._ends()
                finished = self._finished()
                if finished:
                    return None
                if self._shutdown_requested is not None:
                    handing.pop()
                    self._release()
                    try:
                        self.shutdown(False, self._shutdown_requested)
                    finally:
                        workers.lock_for_worker(lock, park)
                    continue
                idle.append(park)
                if intake:  # appended after the drain, perhaps without seeing us idle
                    workers.withdraw(park)
                    continue
                # Workers parked behind this one are idle like it: there is nothing to take.
                handing.pop()
                self._release()
                # But one of them may have parked right after counting the end of a task
                # that this look took for running (the last one: then nothing else looks
                # again). Its count came before its attempt at the lock failed, so before
                # this release: a read after it sees that count, and a worker (this one,
                # maybe) looks again. Likewise for a lane's run that ended: its room may be
                # what a throttled task waits for.
                if lane_ends or (ends is not None and self._ends() != ends):
                    workers.wake_one()
                try:
                    if lane_effects is not None:  # a lane's timer, say: not after a long sleep
                        effects, lane_effects = lane_effects, None
                        self._apply(effects)
                    park.acquire()
                finally:
                    workers.lock_for_worker(lock, park)
        finally:
            handing.pop()
            lock.release()
            if self._done:
                self._flush_done()
            if lane_effects is not None:
                self._apply(lane_effects)
            # Workers parked behind this one (see WorkerPool.lock_for_worker) rely on this
            # look, made after the release: one of them takes over if work is left to take.
            if idle and (finished or lane_ends or self._ready_count()):
                workers.wake_one()
            if self.gate is not None:
                self.gate.wake()  # a task started: its room is free
            if finished:
                self._wind_down()

    def _claim(self, task: Task, state: int, effects: Effects | None = None) -> None:
        """Take a waiting task out of the queue for good, into ``state``. Every race between
        start, cancel, expiry and shutdown is decided by which claim comes first. A lane's
        task is claimed with ``effects``; its lane counts a start itself (see
        ``_start_in_lane``)."""
        counts = self._counts
        was = task.state
        counts[was] -= 1
        counts[state] += 1
        task.state = state
        if self.gate is not None:
            self.gate.waiting.pop()
        if task.lane is not None and state != STARTED:
            assert effects is not None
            self._lane_claimed(task, task.lane, was, state, effects)
        expiry = task._expiry
        if expiry is not None:
            expiry.task = None  # a finished task, and its result, must not live until then
            self._alarms -= 1
        elif was != PENDING:
            return
        # An entry of the pending heap died: compacting when at least half are dead costs
        # O(1) per claim, amortised, and the promoter never wakes for a dead entry.
        timers = self._timers
        if len(timers) > 2 * (counts[PENDING] + self._alarms):
            timers[:] = [entry for entry in timers if entry.live()]
            heapify(timers)

    # -- lanes -------------------------------------------------------------------------------

    def _start_in_lane(self, entry: tuple[Any, ...], lane: LaneState, effects: Effects) -> bool:
        """Claim a ready task of a lane for a worker, if its lane lets it start now: else
        throttle it, so that it holds back no other lane's task. Returns whether it was
        claimed (STARTED, or as late: see _expired)."""
        task: Task = entry[-1]
        now = self.clock.now()
        deadline = task._deadline
        if deadline is not None and deadline <= now:
            self._claim(task, _expired(task), effects)
            return True
        if lane.blocked_until(now) <= now:
            throttled = lane.throttled
            if throttled:
                while throttled and throttled[0][-1].state != THROTTLED:
                    heappop(throttled)  # claimed where it stood
                if not throttled:
                    self._throttling.discard(lane)
            # The lane has room: for this task unless one of its throttled tasks comes first
            # (it has room since a moment ago, and the promoter has not released it yet).
            if not throttled or entry < throttled[0]:
                self._claim(task, STARTED)
                lane.start(task, now)
                if throttled:  # the start may fill a window the others must wait out
                    self._release_lane(lane, now, effects)
                return True
        # Throttled; where the lane has room, its best task goes back to the workers.
        self._counts[READY] -= 1
        self._counts[THROTTLED] += 1
        lane.moved(READY, THROTTLED)
        task.state = THROTTLED
        lane.given.discard(task)  # it did not take the room it was given: another may
        self._hold(lane, entry)
        self._release_lane(lane, now, effects, worker_coming=True)
        return False

    def _hold(self, lane: LaneState, entry: tuple[Any, ...]) -> None:
        """Put a ready-heap entry of a task counted THROTTLED in its lane's heap."""
        heappush(lane.throttled, entry)
        self._throttling.add(lane)

    def _release_lane(
        self, lane: LaneState, now: float, effects: Effects, *, worker_coming: bool = False
    ) -> bool:
        """Give a lane's best throttled tasks back to the workers, as many as its limits let
        start now; if a window or cooldown holds the others back, look again when it passes.
        ``worker_coming``: the caller is a worker on its way to take a task, which takes the
        first one given back; returns whether it is still free to take another.

        Called wherever the lane's room may have changed: so that its throttled tasks never
        wait while it has room, and a look is planned whenever time alone gives it more."""
        throttled, counts = lane.throttled, self._counts
        room = lane.room(now)
        while throttled and room > 0:
            entry = heappop(throttled)
            task = entry[-1]
            if task.state != THROTTLED:
                continue  # claimed where it stood
            counts[THROTTLED] -= 1
            counts[READY] += 1
            lane.moved(THROTTLED, READY)
            task.state = READY
            lane.given.add(task)
            self._push_ready(entry)
            room -= 1
            if worker_coming:
                worker_coming = False  # it takes this one
            else:
                self._worker_for(effects)
        if not throttled:
            self._throttling.discard(lane)
            return worker_coming
        # No room left for them: look again when time alone gives more, never at a time
        # already passed. That look would come in this same promotion, while the tasks just
        # given the room still hold it, and give it again; they look again themselves as
        # they leave the ready heap (see _lane_claimed, _start_in_lane).
        when = lane.more_room_at(now)
        if when < math.inf:  # else a run of the lane ends first, and releases
            self._look_again(lane, when, effects)
        return worker_coming

    def _look_again(self, lane: LaneState, when: float, effects: Effects) -> None:
        """Have the promoter look at a lane at ``when`` (see _review_lane)."""
        timer = lane.timer
        if timer is not None and timer._when <= when:
            return  # that look sets the next one
        if timer is None:
            self._alarms += 1
        lane.timer = timer = LaneTimer(lane, when, self.next_seq())
        self._push_timer(timer, effects)

    def _review_lane(self, lane: LaneState, now: float, effects: Effects) -> None:
        """A lane's window or cooldown may have passed: release what may start."""
        if lane.throttled:
            self._release_lane(lane, now, effects)

    def _lane_claimed(
        self, task: Task, lane: LaneState, was: int, state: int, effects: Effects
    ) -> None:
        """A lane's task was claimed other than to start: it leaves its lane."""
        # A task still in the intake is not its lane's yet (see _drain_intake).
        lane.moved(None if was == INTAKE else was, state)
        if lane.given:
            lane.given.discard(task)
        if task.recurrence is None:
            # Its future, which the user may keep, holds it: it must not hold the lane.
            cast(LaneTask, task).lane = None
        throttled = lane.throttled
        if was == THROTTLED:
            # Compacting when at least half the entries are dead costs O(1) per claim.
            if len(throttled) > 2 * lane.counts[THROTTLED]:
                throttled[:] = [entry for entry in throttled if entry[-1].state == THROTTLED]
                heapify(throttled)
                if not throttled:
                    self._throttling.discard(lane)
        elif throttled:
            # A task given back to the workers will not start: its room is another's.
            self._release_lane(lane, self.clock.now(), effects)
        self._lane_settled(lane, effects)

    def _lane_settled(self, lane: LaneState, effects: Effects) -> None:
        """A closed lane is drained once nothing of it waits or runs, and its runs' futures
        are done."""
        drained = lane.drained
        if drained is not None and lane.drained_now():
            effects.later.append(drained.set)

    def lane_run_ended(self, task: Task, state: int) -> None:
        """A run of a lane's task ended in ``state``; its worker counts it in its tally
        next, then completes its future. Called without the lock, as a run's end of any
        task is counted (see ``_running``): the lane counts it as the next worker to take the
        lock comes (see ``_count_lane_ends``), which may well be this one in ``take()``, in
        the same locked section as its next claim. Whatever reads a lane's counts or room
        under the lock counts its posted ends first: so whoever sees the future done finds
        the lane's room back."""
        self._lane_ends.append((task, state, self.clock.now()))

    def _count_lane_ends(self, effects: Effects, worker_coming: bool = False) -> None:
        """Count in their lanes the runs that ended since the last look (see
        ``lane_run_ended``), and give each lane's room to its next task. ``worker_coming``:
        the caller is a worker in ``take()``. Another caller has every task given back
        woken a worker for: the worker that posted the end may be held up in a
        done-callback of that run, on its way to ``take()``."""
        ends, now = self._lane_ends, self.clock.now()
        while ends:
            task, state, ended_at = ends.popleft()
            lane = task.lane
            assert lane is not None
            if task.recurrence is None:
                cast(LaneTask, task).lane = None  # see _lane_claimed
            if lane.end(state, ended_at):
                worker_coming = self._lane_run_over(lane, now, effects, worker_coming)

    def _lane_run_over(
        self, lane: LaneState, now: float, effects: Effects, worker_coming: bool
    ) -> bool:
        """A run of ``lane`` ended, for good or to be tried again: its room goes to the lane's
        next task, a closed lane may be drained (see ``LaneState.end``,
        which says when this may matter). ``worker_coming``, returned as in
        ``_release_lane``."""
        if lane.throttled:
            worker_coming = self._release_lane(lane, now, effects, worker_coming=worker_coming)
        self._lane_settled(lane, effects)
        return worker_coming

    def close_lane(self, lane: LaneState, cancel_futures: bool) -> None:
        """A lane's shutdown: it takes no more tasks; its series end; with
        ``cancel_futures``, its waiting tasks are cancelled."""
        effects = Effects()
        self.lock.acquire()
        try:
            # Closed before the drain: a submit that appends to the intake after it sees the
            # lane closed, and takes its task back (see add()).
            lane.closed = True
            self._count_lane_ends(effects)
            self._drain_intake(closing=lane)
            if cancel_futures:
                lane.cancelled = True
                for task in self._claim_waiting(CANCELLED, effects, lane):
                    effects.later.append(task.abandon)
            # Their futures, as they complete, tell their tasks: that ends the series (see _end).
            effects.later.extend(
                task.future.cancel for task in self._recurring if task.lane is lane
            )
            if lane.drained is None:
                # Before the look at the runs in hand: a worker that finished one and saw
                # no ``drained`` took it out of ``in_hand`` before, so this look does not
                # find it.
                lane.drained = threading.Event()
            self._lane_settled(lane, effects)
            self._discarded(effects)
        finally:
            self._release()
        self._apply(effects)

    def lane_finished(self, lane: LaneState) -> None:
        """A worker is done with the last run in hand of a closed lane (see
        ``LaneTally.finished``)."""
        effects = Effects()
        self.lock.acquire()
        try:
            self._count_lane_ends(effects)  # the run's own end, if no one counted it yet
            self._lane_settled(lane, effects)
        finally:
            self._release()
        self._apply(effects)

    def join_lane(self, lane: LaneState) -> None:
        """Wait until a closed lane's tasks have ended, unless called from one of the
        executor's own threads (see join()), or in a forked child, where they are all the
        parent's (see after_fork_in_child)."""
        if lane.drained is not None and not self._forked and not _threads.owned_by(self):
            lane.drained.wait()

    def lane_stats(self, lane: LaneState) -> ExecutorStats:
        effects = Effects()
        self.lock.acquire()
        try:
            # A lane counts its tasks in the intake once drained, and its runs' ends once
            # they are posted.
            self._count_lane_ends(effects)
            self._drain_intake()
            counts = list(lane.counts)
            retries = lane.retries
            if self._forked:
                # The parent's tasks, which its lanes still count (see after_fork_in_child).
                for state in (*_PARENTS, STARTED):
                    counts[state] = 0
        finally:
            self._release()
        self._apply(effects)
        return _stats(counts, retries)

    # -- live control ------------------------------------------------------------------------

    def reschedule(
        self,
        future: OwnFuture[Any],
        priority: int | None,
        due: float | None,
        deadline: float | None,
        now: float,
    ) -> bool:
        """Give the task of ``future``, if it has not started, a new ``priority``, ``due``
        time or start ``deadline`` (None: unchanged), checked by the caller (but for the
        deadline against the due time, which only this knows for sure); else return False
        and change nothing. ``now``: when the caller read the clock. O(log n).

        The task is replaced by a copy with the new values (see ``Task.replacement``),
        queued afresh with a new ``seq``: so it counts as submitted now among equals. The
        original is claimed VOID: a dead entry wherever it stood, which its heap skips and
        compacts as it does cancelled tasks. Whoever takes the lock first wins: a worker
        that started the task, a cancel() or an expiry that claimed it make this return
        False; once this has returned True, each of them finds the copy.
        """
        if self._forked:
            return False  # the parent's task, which nothing here may queue or start
        if not self.manual_time and (due is not None or deadline is not None):
            # A timer may now wait: a task that was due when submitted started no promoter.
            self.promoter.start()
        effects = Effects()
        self.lock.acquire()
        try:
            task = future._task
            if task is None:
                return False  # a series that ended (see RecurringTask.__call__)
            was = task.state
            if was > READY:
                return False
            when = task._when if due is None else due
            new_deadline = task._deadline if deadline is None else deadline
            if new_deadline is not None and (due is not None or deadline is not None):
                check_deadline(now, when, new_deadline)  # before anything changes
            if priority is None and due is None and deadline is None:
                return True
            # Why a plain Task's copy is an ExpiringTask: see Task.replacement.
            plain = deadline is not None and type(task) is Task
            new = task.replacement(ExpiringTask if plain else None)
            if not future._replace_task(new):
                return False  # cancelled: the future, telling its task, claims it
            if priority is not None:
                new._priority = priority
            new._when = when
            new._seq = self.next_seq()
            if new_deadline is not None:
                expiring = cast(ExpiringTask, new)  # a plain Task's copy is one by now
                expiring._deadline = new_deadline
                expiring._expiry = Expiry(new, new_deadline)  # the original's dies with it
            if task.recurrence is not None:
                self._recurring.discard(task)
            # Queued before the original is claimed: its lane never looks idle meanwhile
            # (a lane's shutdown(wait=True) would return).
            self._queue(new, None, effects, held=was == THROTTLED)
            lane = task.lane
            if lane is not None and task in lane.given and new.state == READY:
                lane.given.add(new)  # else the original's claim would give its room again
            self._claim(task, VOID, effects)
            task.hand_over()  # the copy holds the call: nothing is freed here
            self._discarded(effects)
        finally:
            self._release()
        self._apply(effects)
        return True

    # -- cancellation ------------------------------------------------------------------------

    def future_done(self, task: Task, cancelled: bool) -> None:
        """A task's future was completed by someone other than the scheduler: cancelled by
        the user (a series' future also failed). Called as the future completes (see
        ``OwnFuture._invoke_callbacks``), which may be anywhere, even where this thread
        holds the lock (a signal handler, a ``__del__``): so it never blocks on the lock.
        If the lock is taken, whoever holds it completes the cancellation when it releases
        it."""
        if self._forked:
            return  # the parent's task: the child's copy of its future is the user's alone
        self._done.append((task, cancelled))
        self._flush_done()

    def _flush_done(self) -> None:
        while self._done and self.lock.acquire(False):
            effects = Effects()
            try:
                done = self._done
                while done:
                    task, cancelled = done.popleft()
                    self._end(task, cancelled, effects)
                self._discarded(effects)
            finally:
                self.lock.release()
            self._apply(effects)

    def _release(self) -> None:
        """Release the lock, then complete what was posted to ``_done`` while it was held."""
        self.lock.release()
        if self._done:
            self._flush_done()

    def _end(self, task: Task, cancelled: bool, effects: Effects) -> None:
        waiting = task.state <= READY
        if waiting:
            self._claim(task, CANCELLED if cancelled else FAILED, effects)
        if task.recurrence is None:
            if waiting and cancelled:
                effects.later.append(task.abandon)  # reports it to wait(), as_completed()
            return
        self._recurring.discard(task)
        if cancelled and not waiting:
            self._counts[CANCELLED] += 1  # the series; its last run counts on its own
            if task.lane is not None:
                task.lane.moved(None, CANCELLED)
        if task.state != STARTED:
            effects.drop.append(task.let_go())  # else run_ended() does, once the run ends

    def _discarded(self, effects: Effects) -> None:
        """Waiting tasks were claimed where they stood: reclaim their memory, maybe finish."""
        ready, in_order = self._ready, self._in_order
        self._drain_intake()  # else busy workers leave claimed tasks there, and their memory
        # Compacting when at least half the entries are dead costs O(1) per claim, amortised.
        # In place: a worker parked in take() holds both.
        if len(ready) + len(in_order) > 2 * self._counts[READY]:
            ready[:] = [entry for entry in ready if entry[-1].state == READY]
            heapify(ready)
            live = [entry for entry in in_order if entry[-1].state == READY]
            in_order.clear()
            in_order.extend(live)
        if self.gate is not None:
            effects.later.append(self.gate.wake_all)  # their room is free, or shutdown began
        if self._finished():
            effects.finally_.append(self._wind_down)

    # -- shutdown ----------------------------------------------------------------------------

    def shutdown(self, cancel_futures: bool, reason: str, cancel_not_due: bool = False) -> None:
        """Take no more work; cancel the series; with ``cancel_futures``, every task not
        started; with ``cancel_not_due``, those not due yet (a ``with`` block's exception
        must not wait for them)."""
        self._shutdown_requested = None
        effects = Effects()
        self.lock.acquire()
        try:
            if self._closed is None:
                self._closed = reason
            if cancel_futures or cancel_not_due:
                self._cancelled_all = True  # a retry would be a task not due
                for task in self._claim_waiting(CANCELLED, effects, due_too=cancel_futures):
                    effects.later.append(task.abandon)
            # Their futures, as they complete, tell their tasks: that ends the series (see _end).
            effects.later.extend(task.future.cancel for task in self._recurring)
            self._discarded(effects)
        finally:
            self._release()
        self._apply(effects)

    def request_shutdown(self, reason: str) -> None:
        """Shut down without waiting, from the executor's GC finalizer. That may run in any
        thread, at any moment, even in one that holds the lock: so this only raises a flag
        and wakes a thread of the executor, which shuts it down (as ``ThreadPoolExecutor``'s
        finalizer only puts a wake-up on its queue)."""
        self._shutdown_requested = reason
        self.workers.wake_one()  # one that waits for work: an idle worker looks at the flag
        self.promoter.wake()

    def break_pool(self, exc: BaseException) -> None:
        """Nothing can run any more (an initializer failed, the backend broke): fail every
        waiting task, and every later submit, with ``exc``."""
        effects = Effects()
        self.lock.acquire()
        try:
            if self._broken is None:
                self._broken = exc
            if self._closed is None:
                self._closed = str(exc)
            for task in self._claim_waiting(FAILED, effects):
                effects.later.append(functools.partial(_fail_fresh, task, exc))
            # Their futures, as they complete, tell their tasks: that ends the series (see _end).
            effects.later.extend(
                functools.partial(_fail_fresh, task, exc) for task in self._recurring
            )
            self._discarded(effects)
        finally:
            self._release()
        self._apply(effects)

    def _claim_waiting(
        self, state: int, effects: Effects, lane: LaneState | None = None, due_too: bool = True
    ) -> list[Task]:
        """Claim every waiting one-shot task, or every one of ``lane`` (series end with
        their futures); without ``due_too``, only those not due yet."""
        self._drain_intake()
        claimed = []
        # A copy: each claim may compact a heap, or give throttled tasks back to the workers.
        waiting = [
            *(entry[-1] for entry in (*self._in_order, *self._ready)),
            *(entry[-1] for throttling in self._throttling for entry in throttling.throttled),
            *self._timers,
        ]
        for entry in waiting:
            if (
                isinstance(entry, Task)
                and entry.state <= READY
                and entry.recurrence is None
                and (lane is None or entry.lane is lane)
                and (due_too or entry.state == PENDING)
            ):
                self._claim(entry, state, effects)
                claimed.append(entry)
        return claimed

    def _finished(self) -> bool:
        """Closed, and nothing waits to start or runs: workers and promoter may exit. A
        running task counts: if it has a retry policy, a failed attempt queues it again."""
        counts = self._counts
        return (
            self._closed is not None
            and not counts[PENDING]
            and not counts[THROTTLED]
            and not self._ready_count()
            and not self._running()
        )

    def _running(self) -> int:
        """Tasks started and not ended, under the lock. Starts are counted under it, ends in
        the workers' tallies without it: a tally read before its worker counts an end only
        makes this larger, and that worker looks again (in take()) once it has counted, or
        has the worker it parked behind look again (see the parking in take())."""
        return self._counts[STARTED] - self._ends()

    def _ends(self) -> int:
        """Runs ended, as the workers count them in their tallies, without the lock."""
        return sum(sum(tally) for tally in self.workers.tallies)

    def _wind_down(self) -> None:
        with self.lock:
            # Nothing will fire the timers left (lane timers, dead entries): a lane and
            # its timer hold each other, a reference cycle that only the cyclic GC frees.
            for entry in self._timers:
                if isinstance(entry, LaneTimer):
                    entry.lane.timer = None
            self._timers = []
        self._drained.set()
        self.clock.detach(self)
        self.promoter.retire()
        self.workers.retire()

    def join(self) -> bool:
        """Wait until nothing waits to start and every thread has exited; unless called
        from one of the executor's own threads (a task or a done-callback running there),
        which cannot wait for the work it is part of. Returns whether it waited."""
        if _threads.owned_by(self):
            return False
        self._drained.wait()
        self.promoter.join()
        self.workers.join()
        return True

    def after_fork_in_child(self) -> None:
        """In a forked child: the parent's threads are gone, and its tasks are the parent's.
        The executor takes no work and holds none, so that nothing of the parent's runs,
        is cancelled or has its callbacks called here."""
        self.lock = threading.Lock()
        self._forked = True
        self._closed = "cannot schedule new futures in a process forked from the executor's"
        self._intake = deque()
        self._in_order = deque()
        self._ready = []
        self._timers = []
        self._recurring = set()
        self._throttling = set()
        self._done = deque()
        self._lane_ends = deque()
        for state in _PARENTS:
            self._counts[state] = 0
        # Its runs too: their threads are gone, and no end will ever be counted here.
        self._counts[STARTED] = self._ends()
        self.promoter = Promoter(self, self.promoter.name)
        self.promoter.retire()
        if self.gate is not None:
            self.gate = Gate(self.gate.limit)  # its lock may be held by a parent's thread
        self.workers.forget_threads()
        self._drained = threading.Event()
        self._drained.set()

    # -- introspection -----------------------------------------------------------------------

    def stats(self) -> ExecutorStats:
        self.lock.acquire()
        try:
            counts = list(self._counts)
            # A worker tallies how its tasks ended without the lock; counts[STARTED] is
            # every start, so a task ending between the two reads is simply still running.
            for tally in self.workers.tallies:
                for state, n in enumerate(tally):
                    counts[state] += n
                    counts[STARTED] -= n
            counts[READY] += counts[INTAKE] + len(self._intake)
            retries = self._retries
        finally:
            self._release()
        return _stats(counts, retries)

    def quiet(self) -> bool:
        """Whether nothing can happen until time moves on: no task is due (held back by a
        lane with room, or ready) or running, and every worker is done with its last task,
        its future's callbacks included (see ManualClock.settle)."""
        effects = Effects()
        self.lock.acquire()
        try:
            self._count_lane_ends(effects)  # a lane's room may give a throttled task back
            self._drain_intake()
            workers = self.workers
            # A worker lists itself idle only in take(), once done with its last task.
            quiet = (
                not self._ready_count()
                and not self._running()
                and len(workers.idle) >= len(workers.threads)
            )
        finally:
            self._release()
        self._apply(effects)
        return quiet

    def waiting(self, lane: LaneState | None = None) -> list[WaitingTask]:
        """Every task not started yet (of ``lane``, if given), in one snapshot taken under
        the lock: the ready ones in the order workers would take them, then the throttled
        ones in the same order, then the others by due time."""
        effects = Effects()
        self.lock.acquire()
        try:
            now = self.clock.now()
            # As a worker would: the intake's tasks are due, the lanes' room is back.
            self._count_lane_ends(effects)
            self._drain_intake()
            # A stale entry (its task claimed, or a series' run re-queued since) is skipped.
            ready = sorted(
                e
                for e in (*self._in_order, *self._ready)
                if e[-1].state == READY and e[-2] == e[-1]._seq
            )
            throttled = sorted(
                entry
                for throttling in self._throttling
                for entry in throttling.throttled
                if entry[-1].state == THROTTLED
            )
            seen: set[int] = set()
            pending: list[Task] = []
            for entry in self._timers:
                if isinstance(entry, Task) and entry.state == PENDING and id(entry) not in seen:
                    seen.add(id(entry))
                    pending.append(entry)
            pending.sort()
            snapshot = [
                _waiting_task(task, state, now)
                for state, tasks in (
                    ("ready", [e[-1] for e in ready]),
                    ("throttled", [e[-1] for e in throttled]),
                    ("scheduled", pending),
                )
                for task in tasks
                if lane is None or task.lane is lane
            ]
        finally:
            self._release()
        self._apply(effects)
        return snapshot


def _stats(counts: list[int], retries: int) -> ExecutorStats:
    return ExecutorStats(
        scheduled=counts[PENDING],
        ready=counts[READY],
        throttled=counts[THROTTLED],
        running=counts[STARTED],
        completed=counts[COMPLETED],
        failed=counts[FAILED],
        cancelled=counts[CANCELLED],
        expired=counts[EXPIRED],
        retries=retries,
    )


def _waiting_task(task: Task, state: str, now: float) -> WaitingTask:
    deadline = task._deadline
    return WaitingTask(
        future=task.future,
        fn=task.fn,
        priority=task._priority,
        state=cast(WaitingState, state),
        due_in=task._when - now,
        expires_in=None if deadline is None else deadline - now,
        lane=None if task.lane is None else task.lane.name,
    )


def _expired(task: Task) -> int:
    """The state of a task claimed because its start deadline passed: EXPIRED, unless it is
    a retry, whose future then ends with its last attempt's exception (see
    ``RetryingTask.abandon``): a task counts where its future ended."""
    return FAILED if isinstance(task, RetryingTask) and task.error is not None else EXPIRED


def _check_lane_open(lane: LaneState) -> None:
    if lane.closed:
        raise RuntimeError("cannot schedule new futures after the lane's shutdown")


def _fail_fresh(task: Task, exc: BaseException) -> None:
    task.fail(_fresh(exc))


def _fresh(exc: BaseException) -> BaseException:
    """A new exception like ``exc``, to raise in one more place: one instance raised from
    many would collect all their tracebacks."""
    try:
        fresh = copy.copy(exc)
    except Exception:
        # Its __init__ does not take its own args: say what broke, and chain it.
        fresh = BrokenExecutor(f"the executor cannot run tasks: {type(exc).__name__}")
        fresh.__cause__ = exc
        return fresh
    fresh.__cause__ = exc.__cause__  # where the pool broke, if it said so
    return fresh
