"""Lanes: limits per kind of work, on the executor's workers.

A lane's tasks are ordinary tasks whose extension carries their lane (see ``_extension``).
The scheduler calls the lane's hooks at its tasks' transitions: when a worker is about to
start one, may it start now (``LaneState.start``, which asks ``blocked_until``)? A task that
may not start is *throttled*: moved out of the ready heap into its lane's own heap, so that
it holds back no other lane's task. The lane gives its best tasks back to the workers when
it has room again (``release``): when one of its runs ends (``ended``), when a task that
held its room leaves, or when a ``LaneTimer`` in the pending heap says that a window or a
cooldown passed.

A named lane made with options is kept by its executor until the lane's shutdown, so that
its limits hold whoever looks it up later; one made without options has nothing to lose,
and is found by name only while anything references it (see ``PriorityExecutor.lane``).
"""

from __future__ import annotations

import functools
import math
import threading
import weakref
from collections import deque
from concurrent.futures import Future
from datetime import datetime, timedelta
from heapq import heapify, heappop, heappush
from typing import TYPE_CHECKING, Any, Callable

from . import _threads
from ._arguments import check_int, check_priority, seconds
from ._gate import Gate, make_gate
from ._retry import check_retry
from ._stats import ExecutorStats, make_stats
from ._submitting import Executor
from ._task import (
    CANCELLED,
    INTAKE,
    READY,
    STARTED,
    STATES,
    THROTTLED,
    WAITING,
    Alarm,
    Call,
    Core,
    Tally,
    Task,
    run,
)
from ._waiting import HeldBy, WaitingTask

if TYPE_CHECKING:
    from ._calendar import Schedule
    from ._effects import Effects
    from ._retry import Retry
    from ._scheduler import Scheduler


class LaneState:
    """One lane as the scheduler sees it: its limits, how it uses them, and its throttled
    tasks. Changed only under the scheduler's lock (but ``in_hand``: see LaneTally)."""

    __slots__ = (
        "__weakref__",
        "cancelled",
        "closed",
        "cooldown",
        "counts",
        "drained",
        "facade",
        "gate",
        "given",
        "in_hand",
        "last_end",
        "max_running",
        "max_starts",
        "name",
        "per",
        "priority",
        "retries",
        "retry",
        "running",
        "starts",
        "survive_failures",
        "throttled",
        "timed",
        "timer",
        "tracked",
    )

    def __init__(
        self,
        name: str | None,
        priority: int,
        max_running: int | None,
        max_starts: int | None,
        per: float,
        cooldown: float | None,
        retry: Retry | None,
        survive_failures: bool,
        gate: Gate | None,
    ) -> None:
        self.name = name
        self.priority = priority
        self.max_running = max_running
        self.max_starts = max_starts
        self.per = per
        self.cooldown = cooldown
        self.retry = retry
        self.survive_failures = survive_failures  # its series go on after a failed run
        # Where its submits wait while max_waiting of its tasks wait (see _gate.admit).
        self.gate = gate
        self.running = 0
        # Start times within the last ``per`` seconds, oldest first.
        self.starts: deque[float] | None = None if max_starts is None else deque()
        # A limit in time (a window or a cooldown), which may need a timer.
        self.timed = max_starts is not None or cooldown is not None
        self.last_end = -math.inf
        self.throttled: list[tuple[Any, ...]] = []  # a heap of ready-heap entries
        # Throttled tasks given the room back, until a worker takes them (see room()).
        self.given: set[Task] = set()
        self.timer: LaneTimer | None = None  # the live one, if any
        # Listed among the scheduler's holders: while it has due tasks (see track()).
        self.tracked = False
        self.counts = [0] * STATES  # this lane's tasks in each state (not in the intake)
        self.closed = False
        self.cancelled = False  # by shutdown(cancel_futures=True): no retry is queued
        self.retries = 0  # retries queued so far
        self.drained: threading.Event | None = None  # once shut down: set once drained
        # One entry per worker running one of its tasks, until it is done with the
        # future (see LaneTally): a list, as append() and pop() are atomic without the lock,
        # on free-threaded builds too.
        self.in_hand: list[None] = []
        self.facade: weakref.ref[Lane] | None = None

    def options(self) -> dict[str, object]:
        return {
            "priority": self.priority,
            "max_running": self.max_running,
            "max_starts": self.max_starts,
            "per": self.per,
            "cooldown": self.cooldown,
            "retry": self.retry,
            "survive_failures": self.survive_failures,
            "max_waiting": None if self.gate is None else self.gate.limit,
            "waiting_timeout": None if self.gate is None else self.gate.timeout,
        }

    # -- the limits: may a task start now, and if not, when? ---------------------------------

    def blocked_until(self, now: float) -> float:
        """When the next task may start: at or before ``now`` if it may now; ``math.inf``
        while ``max_running`` tasks run (one ending is what lets the next start)."""
        if self.max_running is not None and self.running >= self.max_running:
            return math.inf
        when = -math.inf if self.cooldown is None else self.last_end + self.cooldown
        starts = self.starts
        if starts is not None:
            # A sliding window: a start at s is in the window until s + per.
            while starts and starts[0] + self.per <= now:
                starts.popleft()
            if len(starts) >= self.max_starts:  # type: ignore[operator]
                when = max(when, starts[0] + self.per)
        return when

    def _startable(self, now: float) -> float:
        """How many more of its tasks every limit lets start now."""
        if self.blocked_until(now) > now:
            return 0
        room = math.inf
        if self.max_running is not None:
            room = self.max_running - self.running
        if self.starts is not None:
            room = min(room, self.max_starts - len(self.starts))  # type: ignore[operator]
        return room

    def room(self, now: float) -> float:
        """How many more throttled tasks may be given back to the workers now: as many as
        every limit lets start, less those given it already and not yet taken by a worker
        (each holds its room until then: else every look at the lane would give that room
        again, to one more task). Negative when a task that was never throttled took it."""
        return self._startable(now) - len(self.given)

    def held_back(self, now: float) -> int:
        """How many of its ready tasks cannot start now, its limits being reached: they
        count as throttled (see ``Scheduler.stats``), though they stay in the ready heap
        until a worker comes to throttle them (see ``start``)."""
        ready, startable = self.counts[READY], self._startable(now)
        return 0 if startable >= ready else ready - max(0, int(startable))

    def holding(self, now: float) -> tuple[HeldBy, float] | None:
        """Which limit holds back its throttled tasks (and its ready ones beyond its room:
        see ``held_back``) at ``now``, and when it lets the next one start: ``math.inf``
        for ``max_running``, which a run's end lifts. Its ready tasks that may start now
        count as started: they start before these. None if no limit holds them: the lane
        is about to give them its room."""
        ahead = self.counts[READY] - self.held_back(now)  # forgets the starts out of the window
        if self.max_running is not None and self.running + ahead >= self.max_running:
            return "max_running", math.inf
        held: tuple[HeldBy, float] | None = None
        if self.cooldown is not None and self.last_end + self.cooldown > now:
            held = "cooldown", self.last_end + self.cooldown
        starts, limit = self.starts, self.max_starts
        if starts is not None and limit is not None:
            # The window is full once the tasks ahead start too, about now: it has room
            # again when the start this many places from its oldest leaves it.
            over = len(starts) + ahead - limit
            if over >= 0:
                leaves = (starts[over] if over < len(starts) else now) + self.per
                if held is None or leaves > held[1]:
                    held = "max_starts", leaves
        return held

    def more_room_at(self, now: float) -> float:
        """When time alone next gives the lane more room than ``room(now)``, always after
        ``now``; ``math.inf`` if only a run's end can (or nothing holds the lane back)."""
        when = self.blocked_until(now)
        if when > now:
            return when
        # Not blocked: the window gives more room as its oldest start leaves it, unless
        # max_running leaves less room than the window does.
        starts = self.starts
        if starts and (
            self.max_running is None
            or self.max_running - self.running > self.max_starts - len(starts)  # type: ignore[operator]
        ):
            return starts[0] + self.per
        return math.inf

    # -- the hooks of its tasks (see _extension), under the scheduler's lock -----------------

    def start(self, task: Task, entry: tuple[Any, ...], core: Core, effects: Effects) -> int:
        """A worker took a ready task of the lane: STARTED if the lane lets it start now;
        else THROTTLED, the task held in the lane, so that it holds back no other lane's."""
        now = core.now()
        if self.blocked_until(now) <= now:
            throttled = self.throttled
            while throttled and throttled[0][-1].state != THROTTLED:
                heappop(throttled)  # claimed where it stood
            # The lane has room: for this task unless one of its throttled tasks comes first
            # (it has room since a moment ago, and the promoter has not released it yet).
            if not throttled or entry < throttled[0]:
                return STARTED
        core.move(task, THROTTLED, effects)
        heappush(self.throttled, entry)
        self.release(core, effects, worker_coming=True)
        self.track(core)
        return THROTTLED

    def moved(self, task: Task, was: int, state: int, core: Core, effects: Effects) -> None:
        """One of its tasks moved from ``was`` to ``state`` (see ``Scheduler.move``)."""
        gate = self.gate
        if gate is not None and (was <= READY) is not (state <= READY):
            # Its max_waiting's count, as move() keeps the executor's: queued, or out of
            # the queue (a task in the intake was counted as it went in: see add()).
            gate.count(state <= READY)
            if state > READY:
                effects.later.append(gate.wake)  # its room is free
        counts = self.counts
        if was != INTAKE:  # a task in the intake is not its lane's yet (see add())
            counts[was] -= 1
        counts[state] += 1
        given = self.given
        if state == STARTED:
            self.running += 1
            if self.starts is not None:
                self.starts.append(core.now())
            if given:
                given.discard(task)  # it took the room it was given
            if self.throttled:  # the start may fill a window the others must wait out
                self.release(core, effects)
        elif was == STARTED:
            # An attempt that failed, to be tried again: its run is over, its room free.
            self.running -= 1
            self.last_end = core.now()
            self.retries += 1
            if self.throttled:
                self.release(core, effects, worker_coming=True)  # its worker goes on to take()
        elif state == READY and was == THROTTLED:
            given.add(task)
        elif state == THROTTLED:
            given.discard(task)  # it did not take the room it was given: another may
        elif state > STARTED and was <= READY:
            self._claimed(task, was, core, effects)
            self.track(core)  # it may be idle now
            return
        if not self.tracked and state <= READY:
            self.track(core)  # busy now

    def track(self, core: Core) -> None:
        """List the lane among the scheduler's holders while it is busy: its throttled
        tasks are waiting tasks, and its ready ones may be held back (see ``held_back``)."""
        # Running too: so that a busy lane, whose ready count comes and goes with each
        # start, is listed and unlisted only as it becomes busy and idle.
        due = bool(self.counts[READY] or self.throttled or self.running)
        if due is not self.tracked:
            self.tracked = due
            core.holding(self, due)

    def _claimed(self, task: Task, was: int, core: Core, effects: Effects) -> None:
        """A waiting task of the lane was claimed other than to start: it leaves the lane."""
        if self.given:
            self.given.discard(task)
        throttled = self.throttled
        if was == THROTTLED:
            # Compacting when at least half the entries are dead costs O(1) per claim.
            if len(throttled) > 2 * self.counts[THROTTLED]:
                throttled[:] = [entry for entry in throttled if entry[-1].state == THROTTLED]
                heapify(throttled)
        elif throttled:
            # A task given back to the workers will not start: its room is another's.
            self.release(core, effects)
        self.settled(effects)

    def ended(self, state: int, at: float, core: Core, effects: Effects) -> None:
        """A run of its tasks ended at ``at``, in ``state`` (see LaneTally): its room goes
        to its next task; a closed lane may be drained."""
        counts = self.counts
        counts[STARTED] -= 1
        counts[state] += 1
        self.running -= 1
        self.last_end = at
        if self.throttled:
            self.release(core, effects)
        if not (self.running or counts[READY] or self.throttled):
            self.track(core)  # idle now
        if self.drained is not None:
            self.settled(effects)

    def hold(self, entry: tuple[Any, ...], core: Core, effects: Effects) -> None:
        """Hold a task just moved THROTTLED, until the lane has room for it."""
        heappush(self.throttled, entry)
        self.release(core, effects)
        self.track(core)

    def release(self, core: Core, effects: Effects, *, worker_coming: bool = False) -> bool:
        """Give the best throttled tasks back to the workers, as many as the limits let
        start now; if a window or cooldown holds the others back, look again when it passes.
        ``worker_coming``: the caller is a worker on its way to take a task, which takes the
        first one given back; returns whether it is still free to take another.

        Called wherever the lane's room may have changed: so that its throttled tasks never
        wait while it has room, and a look is planned whenever time alone gives it more."""
        throttled, now = self.throttled, core.now()
        room = self.room(now)
        while throttled and room > 0:
            entry = heappop(throttled)
            task = entry[-1]
            if task.state != THROTTLED:
                continue  # claimed where it stood
            core.give_back(entry, effects, worker_coming)
            worker_coming = False  # it takes the first one; the others need workers of their own
            room -= 1
        if not throttled:
            self.track(core)
            return worker_coming
        # No room left for them: look again when time alone gives more, never at a time
        # already passed. That look would come in this same promotion, while the tasks just
        # given the room still hold it, and give it again; they look again themselves as
        # they leave the ready heap (see start, moved).
        when = self.more_room_at(now)
        if when < math.inf:  # else a run of the lane ends first, and releases
            timer = self.timer
            if timer is None or timer._when > when:  # else that look sets the next one
                if timer is not None:
                    core.alarm_died()
                self.timer = timer = LaneTimer(self, when, core.next_seq())
                core.set_alarm(timer, effects)
        return worker_coming

    def settled(self, effects: Effects) -> None:
        """A closed lane is drained once nothing of it waits or runs, and its runs' futures
        are done."""
        drained = self.drained
        if drained is not None and not self.in_hand and not self.busy():
            effects.later.append(drained.set)

    def busy(self) -> bool:
        """Whether any of its tasks waits or runs."""
        counts = self.counts
        return any(counts[: STARTED + 1])

    # -- as the extension of its tasks that have no other feature (see _task.Hooks) ---------

    lock_free = True
    deadline = None
    recurrence = None
    error = None
    wall_due = None

    @property
    def lane(self) -> LaneState:
        return self

    def check_open(self) -> None:
        if self.closed:
            raise RuntimeError("cannot schedule new futures after the lane's shutdown")

    def counted(self, state: int) -> None:
        self.counts[state] += 1

    def copy(self, task: Task) -> LaneState:
        return self

    def run(self, task: Task, tally: Tally, call: Call | None, core: Core) -> None:
        """Run a claimed task of the lane in a worker (see ``_task.run``), counting its end
        in the lane as well (see ``LaneTally``)."""
        counter = LaneTally(tally, self, core)  # type: ignore[arg-type]  # a worker's list
        try:
            run(task, counter, call)
        finally:  # even if a callback raised SystemExit: the lane's shutdown waits for it
            counter.finished()

    def __repr__(self) -> str:
        return f"<LaneState {self.name!r} running={self.running}>"


class LaneTimer(Alarm):
    """An entry of the pending heap: look at a lane again when a window or cooldown passes."""

    __slots__ = ("_seq", "_when", "lane")

    def __init__(self, lane: LaneState, when: float, seq: int) -> None:
        self._when = when
        self._seq = seq
        self.lane = lane

    def live(self) -> bool:
        return self.lane.timer is self

    def fire(self, core: Core, now: float, effects: Effects) -> None:
        lane = self.lane
        lane.timer = None
        if lane.throttled:
            lane.release(core, effects)


class LaneTally:
    """Stands in for a worker's tally while a lane's task runs: the run counts how it ended
    in the worker's tally, as any run does, and in its lane, before its future completes.

    The lane counts it at once, under the scheduler's lock, when anyone waits for its room
    (a throttled task, a shutdown): so a throttled task starts as the run ends, not once
    the future's callbacks are done (which may wait for it). Else the end is posted, for
    the next thread that takes the lock to count (see ``Scheduler.post``): most lanes'
    runs end with no one waiting, and pay no lock for it. The worker is counted in the
    lane's ``in_hand`` for the whole run, and a closed lane is drained only once none is
    (``finished()``)."""

    __slots__ = ("core", "lane", "tally")

    def __init__(self, tally: list[int], lane: LaneState, core: Core) -> None:
        self.tally = tally  # the worker's
        self.lane = lane
        self.core = core
        lane.in_hand.append(None)

    def __getitem__(self, state: int) -> int:
        return self.tally[state]

    def __setitem__(self, state: int, count: int) -> None:
        lane, core = self.lane, self.core
        end = functools.partial(lane.ended, state, core.now(), core)
        if lane.throttled or lane.drained is not None:
            core.locked(end)
        else:
            core.later.append(end)  # the next thread to take the lock counts it (see post)
            # After the post: a task throttled since, by a thread that counted the posts
            # before this one, is released by whoever counts this one; this look makes it
            # this thread, now.
            if lane.throttled:
                core.locked(core.count_posted)
        self.tally[state] = count

    def finished(self) -> None:
        """The worker is done with the run: its future is complete, or its retry queued."""
        lane = self.lane
        lane.in_hand.pop()
        # After the pop: a shutdown that creates ``drained`` after this look finds this
        # run no longer in hand, and decides for itself (see close).
        if lane.drained is not None and not lane.in_hand:
            self.core.locked(functools.partial(_settle, lane, self.core))


def _settle(lane: LaneState, core: Core, effects: Effects) -> None:
    """The last run in hand of a closed lane is done: it is drained once its run's end,
    posted maybe, is counted."""
    core.count_posted(effects)
    lane.settled(effects)


def close(lane: LaneState, core: Scheduler, cancel_futures: bool) -> None:
    """A lane's shutdown: it takes no more tasks; its series end; with ``cancel_futures``,
    its waiting tasks are cancelled."""

    def step(effects: Effects) -> None:
        # Closed before the drain: a submit that appends to the intake after it sees the
        # lane closed, and takes its task back (see Scheduler.add).
        lane.closed = True
        if lane.gate is not None:
            effects.later.append(lane.gate.wake_all)  # the submits waiting for its room raise
        core.count_posted(effects)
        core.drain_intake(effects, closing=lane)
        if cancel_futures:
            lane.cancelled = True
            for task in core.claim_waiting(CANCELLED, effects, lane):
                effects.later.append(task.abandon)
        # Their futures, as they complete, tell their tasks: that ends the series.
        effects.later.extend(
            task.future.cancel
            for task in core.series
            if task.ext is not None and task.ext.lane is lane
        )
        if lane.drained is None:
            # Before the look at the runs in hand: a worker that finished one and saw
            # no ``drained`` took it out of ``in_hand`` before, so this look does not
            # find it.
            lane.drained = threading.Event()
        lane.settled(effects)
        core.discarded(effects)

    core.locked(step)


def join(lane: LaneState, core: Scheduler) -> None:
    """Wait until a closed lane's tasks have ended, unless called from one of the
    executor's own threads (see Scheduler.join()), or in a forked child, where they are all
    the parent's."""
    if lane.drained is not None and not core.forked and not _threads.owned_by(core):
        lane.drained.wait()


def stats(lane: LaneState, core: Scheduler) -> ExecutorStats:
    def step(effects: Effects) -> ExecutorStats:
        # A lane counts its tasks in the intake once drained, and its runs' ends once
        # they are posted.
        core.count_posted(effects)
        core.drain_intake(effects)
        counts = list(lane.counts)
        held = lane.held_back(core.now())
        counts[READY] -= held
        counts[THROTTLED] += held
        if core.forked:
            # The parent's tasks, which its lanes still count (see after_fork_in_child).
            for state in (*WAITING, STARTED):
                counts[state] = 0
        return make_stats(counts, lane.retries)

    return core.locked(step)


def make_lane_state(
    name: str | None,
    priority: int | None,
    max_running: int | None,
    max_starts: int | None,
    per: float | timedelta | None,
    cooldown: float | timedelta | None,
    retry: Retry | None,
    survive_failures: bool,
    max_waiting: int | None,
    waiting_timeout: float | timedelta | None,
) -> LaneState:
    """The options of ``executor.lane()``, checked."""
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str or None, not {type(name).__name__}")
    if priority is not None:
        check_priority(priority)
    for option, limit in (("max_running", max_running), ("max_starts", max_starts)):
        if limit is not None and check_int(option, limit) < 1:
            raise ValueError(f"{option} must be at least 1, not {limit}")
    check_retry(retry)
    window = 1.0 if per is None else seconds("per", per, positive=True)
    if per is not None and max_starts is None:
        # Alone, a window limits nothing: the caller surely meant a rate.
        raise ValueError(f"per={per!r} is the window of max_starts: give max_starts too")
    pause = None if cooldown is None else seconds("cooldown", cooldown)
    if not isinstance(survive_failures, bool):
        raise TypeError(f"survive_failures must be a bool, not {type(survive_failures).__name__}")
    gate = make_gate(max_waiting, waiting_timeout)
    return LaneState(
        name, priority or 0, max_running, max_starts, window, pause, retry, survive_failures, gate
    )


class Lane(Executor):
    """A kind of work with limits of its own, on the workers of a ``PriorityExecutor``.

    ``submit``, ``submit_recurring`` and ``map`` work as the executor's; a task's own
    ``priority`` wins over the lane's. ``shutdown()`` closes the lane only.
    """

    def __init__(
        self,
        state: LaneState,
        scheduler: Scheduler,
        schedule: Callable[..., Future[Any]],
        schedule_recurring: Callable[..., Future[None]],
        forget: Callable[[LaneState], object],
        waiting: Callable[[LaneState], list[WaitingTask]],
    ) -> None:
        self._state = state
        self._scheduler = scheduler
        self._schedule_in = schedule
        self._schedule_recurring_in = schedule_recurring
        self._forget = forget  # the executor's: a closed lane frees its name
        self._waiting = waiting
        state.facade = weakref.ref(self)

    @property
    def name(self) -> str | None:
        return self._state.name

    @property
    def priority(self) -> int:
        """The default priority of its tasks."""
        return self._state.priority

    @property
    def max_running(self) -> int | None:
        return self._state.max_running

    @property
    def max_starts(self) -> int | None:
        return self._state.max_starts

    @property
    def per(self) -> float:
        """The window of ``max_starts``, in seconds."""
        return self._state.per

    @property
    def cooldown(self) -> float | None:
        """In seconds, or None."""
        return self._state.cooldown

    @property
    def retry(self) -> Retry | None:
        """Its own retry policy, in place of the executor's; None: the executor's."""
        return self._state.retry

    @property
    def survive_failures(self) -> bool:
        """Whether its recurring series go on after a failed run."""
        return self._state.survive_failures

    @property
    def max_waiting(self) -> int | None:
        """At most this many of its tasks wait to start; a submit past it waits for room."""
        gate = self._state.gate
        return None if gate is None else gate.limit

    @property
    def waiting_timeout(self) -> float | None:
        """In seconds: how long a submit waits for room under ``max_waiting`` before it
        raises ``QueueFull`` (0: not at all); None: until there is room."""
        gate = self._state.gate
        return None if gate is None else gate.timeout

    @property
    def closed(self) -> bool:
        """Whether ``shutdown()`` closed it."""
        return self._state.closed

    def _schedule(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        priority: int | None,
        delay: float | timedelta | None,
        run_at: datetime | None,
        expires: float | timedelta | datetime | None,
    ) -> Future[Any]:
        return self._schedule_in(fn, args, kwargs, priority, delay, run_at, expires, self._state)

    def _schedule_recurring(
        self,
        fn: Callable[..., object],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        interval: float | timedelta | Schedule,
        fixed_rate: bool,
        priority: int | None,
        delay: float | timedelta | None,
        run_at: datetime | None,
    ) -> Future[None]:
        return self._schedule_recurring_in(
            fn, args, kwargs, interval, fixed_rate, priority, delay, run_at, self._state
        )

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Close this lane: its later submits raise ``RuntimeError``; its series are
        cancelled; with ``cancel_futures``, its tasks not yet started too. With ``wait``,
        return when its remaining tasks have finished (unless called from a task or a
        callback of the executor). Other lanes and the executor go on."""
        close(self._state, self._scheduler, cancel_futures)
        self._forget(self._state)
        if wait:
            join(self._state, self._scheduler)

    def stats(self) -> ExecutorStats:
        """A consistent snapshot of how many of this lane's tasks are in each state."""
        return stats(self._state, self._scheduler)

    def waiting(self) -> list[WaitingTask]:
        """``PriorityExecutor.waiting()`` for this lane's tasks."""
        return self._waiting(self._state)

    def __repr__(self) -> str:
        state = self._state
        limits = "".join(
            f" {option}={value!r}"
            for option, value in state.options().items()
            if value is not None and value is not False and option not in ("priority", "per")
        )
        if state.priority:
            limits += f" priority={state.priority!r}"
        if state.max_starts is not None:
            limits += f" per={state.per!r}"
        return f"<Lane {state.name!r}{limits}>"
