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

Some callers cannot know who holds the lock: a future telling its task of a cancel() (a signal
handler or a ``__del__`` as well), a worker counting its lane's run end, the executor's GC
finalizer. They never block on it: they ``post()`` a step, which whoever holds the lock next
does before it releases it (``_release()``); the finalizer only raises a flag and wakes a
thread.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import itertools
import math
import threading
import time
import weakref
from collections import deque
from concurrent.futures import BrokenExecutor
from heapq import heapify, heappop, heappush
from typing import TYPE_CHECKING, Any, Callable, TypeVar, cast

from . import _effects, _threads
from ._clock import WallTime
from ._effects import Effects
from ._fair import Fair
from ._gate import Gate, admit
from ._policies import Policy, key_function
from ._promoter import Promoter
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
    WAITING,
    Alarm,
    Holder,
    Lane,
    MoreHooks,
    Task,
    TimerEntry,
)

if TYPE_CHECKING:
    from ._clock import Clock
    from ._workers import WorkerPool

R = TypeVar("R")


class Scheduler:
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
                self.locked(functools.partial(self._fail_new, task, exc))
                with _threads.acting_for(self):
                    task.fail(exc)
                return
        ext = task.ext
        if self.closed is not None:
            self.check_open()
        workers = self.workers
        if (not workers.idle if due_now else not workers.threads) and (
            len(workers.threads) < workers.max_workers
        ):
            # Before the task is queued: if no worker can start and none runs, this raises
            # with nothing to take back. A delayed task needs one worker, started now:
            # Python 3.12+ starts no thread at interpreter exit, when it may become due.
            workers.start_worker(self)
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
                if self.gate is not None:
                    self.gate.waiting.append(None)
                if lane is not None and lane.gate is not None:
                    lane.gate.waiting.append(None)  # the rest: see LaneState.moved
            self.intake.append((*key, task._seq, task))
            # After the append: a worker that finds the intake empty registers as idle
            # first and looks again (see take()), so one of the two always sees the other.
            if workers.idle:
                workers.wake_one()
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
        if not self.manual_time:
            self.promoter.start()  # likewise before the task is queued
        effects = Effects()
        self.lock.acquire()
        try:
            self.check_open()
            if ext is not None:
                ext.check_open()
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

    def check_accepts(self, task: Task) -> None:
        """Raise if the executor, or the task's lane, takes no more tasks: a submit blocked
        when shutdown begins raises."""
        self.check_open()
        if task.ext is not None:
            task.ext.check_open()

    def _fail_new(self, task: Task, exc: Exception, effects: Effects) -> None:
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

    def queue(
        self,
        task: Task,
        key: Any,
        effects: Effects,
        was: int | None = None,
        held: bool = False,
    ) -> None:
        """Queue a task under the lock: to the workers if it is due, else to wait. ``was``:
        as in ``move()``, for a task that is not new. ``held``: a due task goes straight
        back behind its lane's limits (a throttled task rescheduled), where the lane
        releases it when it has room."""
        ext = task.ext
        if ext is not None:
            if ext.recurrence is not None:
                self.series.add(task)
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
        elif held:
            self.move(task, THROTTLED, effects, was)
            task.ext.hold((*key, task._seq, task), self, effects)  # type: ignore[union-attr]
        else:
            self._make_due(task, (*key, task._seq, task), effects, was)

    def _make_due(
        self, task: Task, entry: tuple[Any, ...], effects: Effects, was: int | None = None
    ) -> None:
        """A task is due: to the ready heap, and a worker for it."""
        self.move(task, READY, effects, was)
        self._push_ready(entry)
        self._worker_for(effects)

    def give_back(self, entry: tuple[Any, ...], effects: Effects, worker_coming: bool) -> None:
        """A throttled task may start: back to the ready heap. ``worker_coming``: the caller
        is a worker on its way to take it, so none is woken for it."""
        self.move(entry[-1], READY, effects)
        self._push_ready(entry)
        if not worker_coming:
            self._worker_for(effects)

    def share_fairly(self) -> None:
        """A lane has a weight: from now on the ready tasks wait in shares (see _fair), the
        ones already ready too. Under the lock."""
        if self.fair is None:
            self.fair = fair = Fair()
            for entry in (*self.in_order, *self.ready):
                if entry[-1].state == READY:
                    fair.push(entry)
            # In place: a worker parked in take() holds both.
            self.in_order.clear()
            self.ready.clear()

    def standing(self, lane: Lane, steps: int) -> tuple[Any, ...]:
        entry: tuple[Any, ...] = lane.throttled[0]  # type: ignore[attr-defined]  # a LaneState's
        return (entry,) if self.fair is None else self.fair.standing(lane, entry, steps)

    def holding(self, holder: Holder, holds: bool) -> None:
        """``holder`` (a lane) is busy now, or idle: its throttled tasks are waiting tasks
        (see waiting_tasks()), and its ready ones may be held back (see _control.stats)."""
        if holds:
            self.holders.add(holder)
        else:
            self.holders.discard(holder)

    def drain_intake(self, effects: Effects, closing: object = None) -> None:
        """Move the intake's tasks to the ready heap. ``closing``: a lane closed just now,
        whose tasks in the intake are still its own."""
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
            if lane.closed and task.ext.lane is not closing:  # type: ignore[union-attr]
                # Submitted after its lane's shutdown drained the intake, so it saw the
                # lane closed after the append: its submit is taken back and raises (see
                # add()). It must not start meanwhile: the lane's shutdown(wait=True)
                # did not wait for it.
                self.move(task, VOID, effects)
                continue
            self.move(task, READY, effects)
            push(entry)

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

    # -- after a run -------------------------------------------------------------------------

    def run_ended(self, task: Task) -> None:
        """A run of a recurring series ended: queue the next one, unless the series ended."""
        self.locked(functools.partial(self._next_run, task))

    def _next_run(self, task: Task, effects: Effects) -> None:
        due = over = None
        if self.closed is None and not task.future.done():
            due = cast(MoreHooks, task.ext).next_due(self)  # a series'
            over = due is None
        if due is not None:
            task._when = due
            task._seq = self.next_seq()
            # VOID: its worker counts the run that ended (see _task.run).
            self.queue(task, None, effects, VOID)
        elif task in self.series:
            # Cancelled, failed or shut down: its future's callback, still to come, ends
            # the series (see _end) and lets go of the task, which no run uses now. Or
            # its calendar has no run left: the series ends with its future's result.
            self.move(task, VOID, effects, VOID)
            if over:
                effects.later.append(task.end_series)
        else:
            effects.drop.append(task.let_go())

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
        return self.locked(functools.partial(self._try_again, task, exc))

    def _try_again(self, task: Task, exc: BaseException, effects: Effects) -> bool:
        if task.future.done() or self.broken is not None or self.cancelled_all:
            return False  # cancelled (or a series ended), or nothing may start any more
        now = self.now()
        wait = cast(MoreHooks, task.ext).again_in(task, exc, now, effects)  # a retry's
        if wait is None:
            return False
        task._when = now + wait
        task._seq = self.next_seq()
        self.retries += 1
        self.queue(task, None, effects)  # out of STARTED: the start is taken back
        return True

    # -- promotion ---------------------------------------------------------------------------

    def promote_due(self) -> None:
        """Move every task due by now into the ready heap; expire every task whose deadline
        passed."""
        self.locked(self._promote)

    def promote_and_plan(self) -> float | None:
        """The promoter's step: promote, then return when to promote next, or None when
        the promoter may exit."""
        if self.shutdown_requested is not None:
            self.shutdown(False, self.shutdown_requested)
        return self.locked(self._plan)

    def _plan(self, effects: Effects) -> float | None:
        self._promote(effects)
        timers = self.timers
        while timers and not timers[0].live():
            heappop(timers)
        wake_at = timers[0]._when if timers else math.inf
        if self.wall_time.waiting:
            # Steps of the wall clock wake no one: looked for this often (see WallTime).
            wake_at = min(wake_at, self.now() + WallTime.PERIOD)
        self.promoter.sleeps_until = wake_at
        return None if self._finished() else wake_at

    def _promote(self, effects: Effects, submitter: bool = False) -> bool:
        """Promote what is due by now; return whether more tasks are ready than before
        (then a submit hands the GIL to the workers woken for them: see add()).
        ``submitter``: only make due tasks ready; an alarm, or a task whose policy key
        fails, is left to the promoter, which the submit wakes."""
        timers, ready = self.timers, self.counts[READY]
        if self.wall_time.waiting and self.wall_time.stepped():
            self._place_anew()
        now = self.now()
        while timers and timers[0]._when <= now:
            entry = timers[0]
            if not entry.live():
                heappop(timers)
            elif isinstance(entry, Task):
                key = self._key_or_error(entry)
                if isinstance(key, BaseException):
                    if submitter:
                        effects.later.append(self.promoter.wake)
                        break
                    heappop(timers)
                    self.claim(entry, FAILED, effects)
                    effects.later.append(functools.partial(entry.fail, key))
                    continue
                heappop(timers)
                self._make_due(entry, (*key, entry._seq, entry), effects)
            elif submitter:
                effects.later.append(self.promoter.wake)
                break
            else:
                heappop(timers)
                self._alarms -= 1
                entry.fire(self, now, effects)  # type: ignore[attr-defined]  # an Alarm
        if effects.later:
            self.discarded(effects)
        return self.counts[READY] > ready

    def _place_anew(self) -> None:
        """The wall clock was stepped: every task waiting for a wall-clock time waits for
        it where it now falls on the executor's clock."""
        place = self.wall_time.place
        for entry in self.timers:
            if isinstance(entry, Task) and entry.state == PENDING:
                wall = None if entry.ext is None else entry.ext.wall_due
                if wall is not None:
                    entry._when = place(wall)
        heapify(self.timers)

    # -- workers -----------------------------------------------------------------------------

    def take(self, park: threading.Lock, effects: Effects) -> Task | None:
        """Claim the best due task for a worker, parking on ``park`` while there is none.
        ``effects``: the worker's own, empty, for what a task's hooks leave to do.

        Returns a task claimed STARTED, to run, or claimed late (see ``Hooks.late``), to
        abandon; None when the worker should exit.
        """
        lock, intake, posted, later = self.lock, self.intake, self._posted, self.later
        in_order, ready = self.in_order, self.ready
        workers = self.workers
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
                    if len(intake) == 1 and not (in_order or ready or self.fair):
                        # A worker woken for a lone submit, as on an idle pool: that task is
                        # the best there is, and the drain would push it only for the loop
                        # below to pop it at once. Claimed here instead, with the same net
                        # effect. A caller waits out this way from the wake-up to the task;
                        # 10% of the worker's instructions a start (docs/performance.md).
                        lone: Task = intake[0][-1]
                        if lone.state == INTAKE and lone.ext is None:
                            intake.popleft()
                            self.counts[INTAKE] += 1  # out of the intake's length, as a drain
                            self.move(lone, STARTED, _NO_EFFECTS)
                            return lone
                    self.drain_intake(effects)
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
                    state = ext.start(task, entry, self, effects)
                    if state == THROTTLED:
                        continue  # it waits in its lane
                    self.move(task, state, effects)
                    return task
                fair = self.fair
                if fair:  # once a lane has a weight, the ready tasks are there instead
                    taken = fair.pop()
                    if taken is not None:
                        entry, task = taken, taken[-1]
                        ext = task.ext
                        state = STARTED if ext is None else ext.start(task, entry, self, effects)
                        if state == THROTTLED:
                            continue  # it waits in its lane; its share, for its next task
                        fair.took(state == STARTED)
                        self.move(task, state, effects)
                        return task
                # Read before the look, if closed: see the release before parking, below.
                ends = None if self.closed is None else self._ends()
                finished = self._finished()
                if finished:
                    return None
                if self.shutdown_requested is not None:
                    handing.pop()
                    self._release()
                    try:
                        self.shutdown(False, self.shutdown_requested)
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
                # maybe) looks again. Likewise for a step posted meanwhile (a lane's run
                # that ended: its room may be what a throttled task waits for).
                if later or (ends is not None and self._ends() != ends):
                    workers.wake_one()
                try:
                    if effects.later or effects.finally_ or effects.drop:
                        self._apply(effects)  # a lane's timer, say: not after a long sleep
                    park.acquire()
                finally:
                    workers.lock_for_worker(lock, park)
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

    # -- steps posted without the lock -------------------------------------------------------

    def locked(self, step: Callable[[Effects], R]) -> R:
        """Do ``step(effects)`` under the lock, then what it left to do."""
        effects = Effects()
        self.lock.acquire()
        try:
            result = step(effects)
        finally:
            self._release()
        self._apply(effects)
        return result

    def post(self, step: Callable[[Effects], object], flush: bool = True) -> None:
        """Have ``step(effects)`` done under the lock, without waiting for it: at once if
        the lock is free, else by its holder before it lets go (see ``_release``). Not
        ``flush``: a step that may wait for the next thread that takes the lock, a worker
        in ``take()`` or a reader of the counts (a lane's run end, which most often finds
        a worker on its way). Never blocks: for callers that cannot know who holds the
        lock."""
        if flush:
            self._posted.append(step)
            self._flush_posted()
        else:
            self.later.append(step)

    def count_posted(self, effects: Effects) -> None:
        """Do the posted steps, under the lock: whatever reads counts does this first."""
        for posted in (self.later, self._posted):
            while posted:
                posted.popleft()(effects)

    def _flush_posted(self) -> None:
        while self._posted and self.lock.acquire(False):
            effects = Effects()
            try:
                self.count_posted(effects)
                self.discarded(effects)
            finally:
                self.lock.release()
            self._apply(effects)

    def _release(self) -> None:
        """Release the lock, then do what was posted while it was held."""
        self.lock.release()
        if self._posted:
            self._flush_posted()

    def _apply(self, effects: Effects) -> None:
        if effects.later or effects.finally_ or effects.drop:  # most locked sections leave none
            # Callbacks of this executor's futures run here: they must not wait for it.
            with _threads.acting_for(self):
                _effects.apply(effects)

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

    # -- shutdown ----------------------------------------------------------------------------

    def shutdown(self, cancel_futures: bool, reason: str, cancel_not_due: bool = False) -> None:
        """Take no more work; cancel the series; with ``cancel_futures``, every task not
        started; with ``cancel_not_due``, those not due yet (a ``with`` block's exception
        must not wait for them)."""
        self.shutdown_requested = None
        self.locked(functools.partial(self._close, cancel_futures, reason, cancel_not_due))

    def _close(
        self, cancel_futures: bool, reason: str, cancel_not_due: bool, effects: Effects
    ) -> None:
        self._take_no_more(reason, effects)
        if cancel_futures or cancel_not_due:
            self.cancelled_all = True  # a retry would be a task not due
            for task in self.claim_waiting(CANCELLED, effects, due_too=cancel_futures):
                effects.later.append(task.abandon)
        # Their futures, as they complete, tell their tasks: that ends the series (see _end).
        effects.later.extend(task.future.cancel for task in self.series)
        self.discarded(effects)

    def request_shutdown(self, reason: str) -> None:
        """Shut down without waiting, from the executor's GC finalizer. That may run in any
        thread, at any moment, even in one that holds the lock: so this only raises a flag
        and wakes a thread of the executor, which shuts it down (as ``ThreadPoolExecutor``'s
        finalizer only puts a wake-up on its queue)."""
        self.shutdown_requested = reason
        self.workers.wake_one()  # one that waits for work: an idle worker looks at the flag
        self.promoter.wake()

    def break_pool(self, exc: BaseException) -> None:
        """Nothing can run any more (an initializer failed, the backend broke): fail every
        waiting task, and every later submit, with ``exc``."""
        self.locked(functools.partial(self._break, exc))

    def _break(self, exc: BaseException, effects: Effects) -> None:
        if self.broken is None:
            self.broken = exc
        self._take_no_more(str(exc), effects)
        for task in self.claim_waiting(FAILED, effects):
            effects.later.append(functools.partial(fail_fresh, task, exc))
        # Their futures, as they complete, tell their tasks: that ends the series (see _end).
        effects.later.extend(functools.partial(fail_fresh, task, exc) for task in self.series)
        self.discarded(effects)

    def _take_no_more(self, reason: str, effects: Effects) -> None:
        """Shutdown began, or the pool broke: submits raise, those waiting for a lane's room
        too (those waiting for the executor's are woken by every claim: see discarded())."""
        if self.closed is None:
            self.closed = reason
        effects.later.extend(gate.wake_all for gate in self._lane_gates)

    def bound(self, gate: Gate) -> None:
        """A lane with ``max_waiting`` was made: from now on every submit looks for room
        (see add()), and shutdown wakes the submits waiting in its gate."""
        # Under the lock, as _take_no_more iterates them.
        self.locked(lambda effects: self._lane_gates.add(gate))
        self.gated = True

    def waiting_tasks(self, effects: Effects) -> list[Task]:
        """Every entry of a waiting task, under the lock, once the intake is drained: the
        ready ones, the throttled ones, the pending ones (a task may be listed twice:
        a series' stale entries, a heap's dead ones)."""
        self.drain_intake(effects)
        return [
            *(entry[-1] for entry in (*self.in_order, *self.ready)),
            *(entry[-1] for entry in (() if self.fair is None else self.fair.entries())),
            *(entry[-1] for holder in self.holders for entry in holder.throttled),
            *(entry for entry in self.timers if isinstance(entry, Task)),
        ]

    def claim_waiting(
        self, state: int, effects: Effects, lane: object = None, due_too: bool = True
    ) -> list[Task]:
        """Claim every waiting one-shot task, or every one of ``lane`` (series end with
        their futures); without ``due_too``, only those not due yet."""
        claimed = []
        # A copy: each claim may compact a heap, or give throttled tasks back to the workers.
        for task in self.waiting_tasks(effects):
            ext = task.ext
            if (
                task.state <= READY
                and (ext is None or ext.recurrence is None)
                and (lane is None or (ext is not None and ext.lane is lane))
                and (due_too or task.state == PENDING)
            ):
                self.claim(task, state, effects)
                claimed.append(task)
        return claimed

    def _finished(self) -> bool:
        """Closed, and nothing waits to start or runs: workers and promoter may exit. A
        running task counts: if it has a retry policy, a failed attempt queues it again."""
        counts = self.counts
        return (
            self.closed is not None
            and not counts[PENDING]
            and not counts[THROTTLED]
            and not self.ready_count()
            and not self.running()
        )

    def running(self) -> int:
        """Tasks started and not ended, under the lock. Starts are counted under it, ends in
        the workers' tallies without it: a tally read before its worker counts an end only
        makes this larger, and that worker looks again (in take()) once it has counted, or
        has the worker it parked behind look again (see the parking in take())."""
        return self.counts[STARTED] - self._ends()

    def _ends(self) -> int:
        """Runs ended, as the workers count them in their tallies, without the lock."""
        return sum(sum(tally) for tally in self.workers.tallies)

    def _wind_down(self) -> None:
        with self.lock:
            # Nothing will fire the alarms left (a lane's timer, dead entries): a lane and
            # its timer hold each other, a reference cycle that only the cyclic GC frees.
            timers, self.timers = self.timers, []
        for entry in timers:
            if isinstance(entry, Alarm):
                entry.drop()
        self.drained.set()
        self.wall_time.clock.detach(self)
        self.promoter.retire()
        self.workers.retire()

    def join(self) -> bool:
        """Wait until nothing waits to start and every thread has exited; unless called
        from one of the executor's own threads (a task or a done-callback running there),
        which cannot wait for the work it is part of. Returns whether it waited."""
        if _threads.owned_by(self):
            return False
        self.drained.wait()
        self.promoter.join()
        self.workers.join()
        return True

    def quiet(self) -> bool:
        """Whether nothing can happen until time moves on: no task is due (held back by a
        lane with room, or ready) or running, and every worker is done with its last task,
        its future's callbacks included (see ManualClock.settle)."""
        return self.locked(self._quiet)

    def _quiet(self, effects: Effects) -> bool:
        self.count_posted(effects)  # a lane's room may give a throttled task back
        self.drain_intake(effects)
        workers = self.workers
        # A worker lists itself idle only in take(), once done with its last task.
        return (
            not self.ready_count()
            and not self.running()
            and len(workers.idle) >= len(workers.threads)
        )

    def after_fork_in_child(self) -> None:
        """In a forked child: the parent's threads are gone, and its tasks are the parent's.
        The executor takes no work and holds none, so that nothing of the parent's runs,
        is cancelled or has its callbacks called here."""
        self.lock = threading.Lock()
        self.forked = True
        self.closed = "cannot schedule new futures in a process forked from the executor's"
        self.intake = deque()
        self.in_order = deque()
        self.ready = []
        if self.fair is not None:
            self.fair = Fair()
        self.timers = []
        self.wall_time.waiting = 0
        self.series = set()
        self.holders = set()
        self._posted = deque()
        self.later = deque()
        for state in WAITING:
            self.counts[state] = 0
        # Its runs too: their threads are gone, and no end will ever be counted here.
        self.counts[STARTED] = self._ends()
        self.promoter = Promoter(self, self.promoter.name)
        self.promoter.retire()
        if self.gate is not None:
            self.gate.after_fork_in_child()
        for gate in self._lane_gates:
            gate.after_fork_in_child()
        self.workers.forget_threads()
        self.drained = threading.Event()
        self.drained.set()

    def _key_or_error(self, task: Task) -> Any:
        try:
            return self._key(task)
        except BaseException as exc:  # here a broken policy fails its task, whatever it raised
            return exc


# take()'s plain claims leave nothing to do: a lane's task, which may, has its own.
_NO_EFFECTS = Effects()


def fail_fresh(task: Task, exc: BaseException) -> None:
    task.fail(fresh(exc))


def fresh(exc: BaseException) -> BaseException:
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
