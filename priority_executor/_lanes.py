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
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from datetime import datetime, timedelta
from heapq import heapify, heappop, heappush
from typing import TYPE_CHECKING, Any, Callable, cast

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
    from ._fair import Share
    from ._options import Options
    from ._retry import Retry
    from ._scheduler import Scheduler


class Window:
    """One rate of a lane: at most ``limit`` starts in any ``per`` seconds (sliding)."""

    __slots__ = ("limit", "per", "starts")

    def __init__(self, limit: int, per: float, starts: deque[float]) -> None:
        self.limit = limit
        self.per = per
        self.starts = starts  # start times within the last ``per`` seconds, oldest first

    def prune(self, now: float) -> deque[float]:
        starts = self.starts
        while starts and starts[0] + self.per <= now:
            starts.popleft()
        return starts


class LaneState:
    """One lane as the scheduler sees it: its limits, how it uses them, and its throttled
    tasks. Changed only under the scheduler's lock (but ``in_hand``: see LaneTally).

    A lane inside another (``parent``) counts its runs and starts in every enclosing lane
    too: a task starts only when each allows it."""

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
        "name",
        "parent",
        "priority",
        "retries",
        "retry",
        "running",
        "share",
        "survive_failures",
        "throttled",
        "timed",
        "timer",
        "tracked",
        "waiters",
        "weight",
        "windows",
    )

    def __init__(
        self,
        name: str | None,
        priority: int,
        max_running: int | None,
        rates: tuple[tuple[int, float], ...],
        cooldown: float | None,
        retry: Retry | None,
        survive_failures: bool,
        gate: Gate | None,
        weight: float | None = None,
        parent: LaneState | None = None,
    ) -> None:
        self.name = name
        self.priority = priority
        self.max_running = max_running
        self.windows = tuple(Window(limit, per, deque()) for limit, per in rates)
        self.cooldown = cooldown
        self.retry = retry
        self.survive_failures = survive_failures  # its series go on after a failed run
        # Where its submits wait while max_waiting of its tasks wait (see _gate.admit).
        self.gate = gate
        # Its share of the workers among backlogged lanes (see _fair); None: 1, unasked.
        self.weight = weight
        self.share: Share | None = None  # its due tasks, once fair share is on
        self.parent = parent  # the lane it sits in: its limits hold this lane's tasks too
        # Lanes inside this one whose throttled tasks wait for its room (see release()):
        # weakly, as each holds this one (its parent), and its tasks hold it while they wait.
        self.waiters: weakref.WeakSet[LaneState] | None = None
        self.running = 0  # its runs, and those of the lanes inside it
        # A limit in time (a window or a cooldown), its own or an enclosing lane's, which
        # may need a timer: the promoter starts with the first task of a timed lane (see
        # Scheduler.add), or when configure() gives a lane such a limit.
        self.timed: bool = (
            bool(rates) or cooldown is not None or (parent is not None and parent.timed)
        )
        self.last_end = -math.inf
        self.throttled: list[tuple[Any, ...]] = []  # a heap of ready-heap entries
        # Throttled tasks given the room back, until a worker takes them (see room()); of
        # the lanes inside it too, as they hold its room as well.
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

    @property
    def rates(self) -> tuple[tuple[int, float], ...]:
        return tuple((window.limit, window.per) for window in self.windows)

    def options(self) -> dict[str, object]:
        rates = self.rates
        return {
            "priority": self.priority,
            "max_running": self.max_running,
            "max_starts": rates[0][0] if rates else None,
            "per": rates[0][1] if rates else 1.0,
            "rates": rates,
            "cooldown": self.cooldown,
            "weight": self.weight,
            "parent": self.parent,
            "retry": self.retry,
            "survive_failures": self.survive_failures,
            "max_waiting": None if self.gate is None else self.gate.limit,
            "waiting_timeout": None if self.gate is None else self.gate.timeout,
        }

    def chain(self) -> Iterator[LaneState]:
        """This lane, then each lane it sits in."""
        lane: LaneState | None = self
        while lane is not None:
            yield lane
            lane = lane.parent

    # -- the limits: may a task start now, and if not, when? ---------------------------------

    def blocked_until(self, now: float) -> float:
        """When the next task may start, by this lane's own limits: at or before ``now`` if
        it may now; ``math.inf`` while ``max_running`` tasks run (one ending is what lets
        the next start)."""
        if self.max_running is not None and self.running >= self.max_running:
            return math.inf
        when = -math.inf if self.cooldown is None else self.last_end + self.cooldown
        windows = self.windows
        if windows:  # a test, not a loop over none: most lanes have no rate
            for window in windows:
                starts = window.prune(now)
                if len(starts) >= window.limit:
                    # Room again once the start this many from the newest leaves the window
                    # (more than ``limit`` are in it after the limit was lowered).
                    when = max(when, starts[len(starts) - window.limit] + window.per)
        return when

    def _startable(self, now: float) -> float:
        """How many more of its tasks its own limits let start now."""
        if self.blocked_until(now) > now:
            return 0
        room = math.inf
        if self.max_running is not None:
            room = self.max_running - self.running
        windows = self.windows
        if windows:
            for window in windows:
                room = min(room, window.limit - len(window.starts))
        return room

    def room(self, now: float) -> float:
        """How many more throttled tasks may be given back to the workers now: as many as
        every limit lets start, less those given it already and not yet taken by a worker
        (each holds its room until then: else every look at the lane would give that room
        again, to one more task). Negative when a task that was never throttled took it."""
        return self._startable(now) - len(self.given)

    def held_back(self, now: float) -> int:
        """How many of its ready tasks cannot start now, its limits (or an enclosing
        lane's) being reached: they count as throttled (see ``Scheduler.stats``), though
        they stay in the ready heap until a worker comes to throttle them (see ``start``).
        An enclosing lane's room is counted whole for each lane inside it."""
        startable = min(lane._startable(now) for lane in self.chain())
        ready = self.counts[READY]
        return 0 if startable >= ready else ready - max(0, int(startable))

    def holding(self, now: float) -> tuple[LaneState, HeldBy, float] | None:
        """Which limit of which lane (this one, or one it sits in) holds back its throttled
        tasks (and its ready ones beyond its room: see ``held_back``) at ``now``, and when
        it lets the next one start: ``math.inf`` for ``max_running``, which a run's end
        lifts. None if no limit holds them: the lane is about to give them its room."""
        for lane in self.chain():
            held = lane._holding(now)
            if held is not None:
                return (lane, *held)
        return None

    def _holding(self, now: float) -> tuple[HeldBy, float] | None:
        # Its ready tasks that may start now count as started: they start before these.
        ahead = self.counts[READY] - self.held_back(now)  # forgets the starts out of the window
        if self.max_running is not None and self.running + ahead >= self.max_running:
            return "max_running", math.inf
        held: tuple[HeldBy, float] | None = None
        if self.cooldown is not None and self.last_end + self.cooldown > now:
            held = "cooldown", self.last_end + self.cooldown
        for window in self.windows:
            starts = window.starts
            # The window is full once the tasks ahead start too, about now: it has room
            # again when the start this many places from its oldest leaves it.
            over = len(starts) + ahead - window.limit
            if over >= 0:
                leaves = (starts[over] if over < len(starts) else now) + window.per
                if held is None or leaves > held[1]:
                    held = "max_starts", leaves
        return held

    def more_room_at(self, now: float) -> float:
        """When time alone next gives the lane more room than ``room(now)``, always after
        ``now``; ``math.inf`` if only a run's end can (or nothing holds the lane back)."""
        when = self.blocked_until(now)
        if when > now:
            return when
        # Not blocked: a window gives more room as its oldest start leaves it, unless
        # max_running, or a window with no start to lose, leaves less room than it does.
        windows = self.windows
        if not windows:
            return math.inf
        room = min(window.limit - len(window.starts) for window in windows)
        if self.max_running is not None and self.max_running - self.running <= room:
            return math.inf
        when = -math.inf
        for window in windows:
            starts = window.starts
            if window.limit - len(starts) == room:  # one that leaves the least room
                if not starts:
                    return math.inf
                when = max(when, starts[0] + window.per)
        return when

    # -- the hooks of its tasks (see _extension), under the scheduler's lock -----------------

    def start(self, task: Task, entry: tuple[Any, ...], core: Core, effects: Effects) -> int:
        """A worker took a ready task of the lane: STARTED if the lane lets it start now;
        else THROTTLED, the task held in the lane, so that it holds back no other lane's."""
        now = core.now()
        lane: LaneState | None = self
        while lane is not None:
            if lane.blocked_until(now) > now:
                break
            throttled = lane.throttled
            while throttled and throttled[0][-1].state != THROTTLED:
                heappop(throttled)  # claimed where it stood
            # The lane has room: for this task unless one of its throttled tasks comes first
            # (it has room since a moment ago, and the promoter has not released it yet).
            if throttled and not entry < throttled[0]:
                break
            lane = lane.parent  # and the lane it sits in?
        else:
            return STARTED
        # Held in its own lane, whichever lane holds it back: that one gives it the room
        # when it has some (see release), and it holds back no task of a sibling lane.
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
        if state == STARTED:
            lane: LaneState | None = self
            while lane is not None:  # it, and each lane it sits in
                lane.running += 1
                windows = lane.windows
                if windows:
                    now = core.now()
                    for window in windows:
                        window.starts.append(now)
                if lane.given:
                    lane.given.discard(task)  # it took the room it was given
                if lane.throttled or lane.waiters:  # the start may fill a window
                    lane.release(core, effects)  # that the others must wait out
                lane = lane.parent
        elif was == STARTED:
            # An attempt that failed, to be tried again: its run is over, its room free.
            self.retries += 1
            now = core.now()
            for lane in self.chain():
                lane.running -= 1
                lane.last_end = now
            for lane in self.chain():
                if lane.throttled or lane.waiters:
                    # Its worker goes on to take().
                    lane.release(core, effects, worker_coming=True)
        elif state == READY and was == THROTTLED:
            for lane in self.chain():
                lane.given.add(task)
        elif state == THROTTLED:
            for lane in self.chain():
                lane.given.discard(task)  # it did not take the room it was given: another may
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
        for lane in self.chain():
            if lane.given:
                lane.given.discard(task)
        throttled = self.throttled
        if was == THROTTLED:
            # Compacting when at least half the entries are dead costs O(1) per claim.
            if len(throttled) > 2 * self.counts[THROTTLED]:
                throttled[:] = [entry for entry in throttled if entry[-1].state == THROTTLED]
                heapify(throttled)
        else:
            # A task given back to the workers will not start: its room is another's.
            for lane in self.chain():
                if lane.throttled or lane.waiters:
                    lane.release(core, effects)
        self.settled(effects)

    def ended(self, state: int, at: float, core: Core, effects: Effects) -> None:
        """A run of its tasks ended at ``at``, in ``state`` (see LaneTally): its room goes
        to its next task; a closed lane may be drained."""
        counts = self.counts
        counts[STARTED] -= 1
        counts[state] += 1
        lane: LaneState | None = self
        while lane is not None:  # it, and each lane it sits in
            lane.running -= 1
            lane.last_end = at
            lane = lane.parent
        lane = self
        while lane is not None:  # once each knows: the room may be an enclosing lane's
            if lane.throttled or lane.waiters:
                lane.release(core, effects)
            if lane.tracked and not (lane.running or lane.counts[READY] or lane.throttled):
                lane.track(core)  # idle now
            lane = lane.parent
        if self.drained is not None:
            self.settled(effects)

    def hold(self, entry: tuple[Any, ...], core: Core, effects: Effects) -> None:
        """Hold a task just moved THROTTLED, until the lane has room for it."""
        heappush(self.throttled, entry)
        self.release(core, effects)
        self.track(core)

    def release(
        self,
        core: Core,
        effects: Effects,
        *,
        worker_coming: bool = False,
        most: float = math.inf,
        defer: bool = True,
    ) -> bool:
        """Give the best throttled tasks back to the workers, as many as the limits let
        start now (and at most ``most``); if a window or cooldown holds the others back,
        look again when it passes. ``worker_coming``: the caller is a worker on its way to
        take a task, which takes the first one given back; returns whether it is still free
        to take another.

        Called wherever the lane's room may have changed: so that its throttled tasks never
        wait while it has room, and a look is planned whenever time alone gives it more.
        The room is the least that it and the lanes it sits in have. Where that is an
        enclosing lane's, the lane lists itself among that lane's ``waiters``, and (unless
        not ``defer``, as when that lane asks) leaves it to that lane to share its room
        between the lanes that wait for it."""
        throttled, now = self.throttled, core.now()
        room, holder = self._least_room(now)
        if throttled and holder is not self:
            holder.wait_for_room(self)
            if defer:
                return holder.release(core, effects, worker_coming=worker_coming)
        waiters = self.waiters
        if waiters and room > 0 and defer:
            worker_coming = self._share_room(waiters, now, core, effects, worker_coming)
        else:
            worker_coming = self._give(min(room, most), core, effects, worker_coming)
            if throttled:
                holder = self._least_room(now)[1]  # now that it took some
                if holder is not self:
                    holder.wait_for_room(self)
                    holder.plan(now, core, effects)
        if not throttled:
            self.track(core)
            # Lanes listed that have nothing throttled left (claimed where they stood) need
            # no look when time gives room.
            if not (waiters and any(lane.throttled for lane in waiters)):
                return worker_coming
        self.plan(now, core, effects)
        return worker_coming

    def _give(self, room: float, core: Core, effects: Effects, worker_coming: bool) -> bool:
        """Give up to ``room`` of its best throttled tasks back to the workers."""
        throttled = self.throttled
        while throttled and room > 0:
            entry = heappop(throttled)
            if entry[-1].state != THROTTLED:
                continue  # claimed where it stood
            core.give_back(entry, effects, worker_coming)
            worker_coming = False  # it takes the first one; the others need workers of their own
            room -= 1
        return worker_coming

    def wait_for_room(self, lane: LaneState) -> None:
        """``lane``, inside this one, has throttled tasks that wait for this lane's room."""
        if self.waiters is None:
            self.waiters = weakref.WeakSet()
        self.waiters.add(lane)

    def _least_room(self, now: float) -> tuple[float, LaneState]:
        """The least room of this lane and those it sits in, and whose it is (this lane's
        on a tie)."""
        room, holder = self.room(now), self
        parent = self.parent
        while parent is not None:
            enclosing = parent.room(now)
            if enclosing < room:
                room, holder = enclosing, parent
            parent = parent.parent
        return room, holder

    def _share_room(
        self,
        waiters: weakref.WeakSet[LaneState],
        now: float,
        core: Core,
        effects: Effects,
        coming: bool,
    ) -> bool:
        """Share this lane's room between its own throttled tasks and the lanes inside it
        that wait for it: one task at a time, each to the lane whose best task the workers
        would take first (by priority, then fair share: see ``Core.standing``), as if each
        task given started. A lane that still waits for this one's room lists itself again
        (see release)."""
        # A lane listed may have no throttled task left: given back by its own look, or
        # claimed since.
        lanes = [lane for lane in (*waiters, self) if lane.throttled]
        ahead = [(core.standing(lane, 0), n, lane) for n, lane in enumerate(lanes)]
        waiters.clear()
        heapify(ahead)
        given: dict[LaneState, int] = {}
        while ahead and self._least_room(now)[0] > 0:
            _, n, lane = heappop(ahead)
            if lane is self:
                coming = self._give(1, core, effects, coming)
                more = bool(self.throttled)
            else:
                coming = lane.release(core, effects, worker_coming=coming, most=1, defer=False)
                # It has more that wait for this lane's room (it listed itself before it
                # gave one back: see release).
                more = lane in waiters and bool(lane.throttled)
                waiters.discard(lane)
            if more:
                given[lane] = steps = given.get(lane, 0) + 1
                heappush(ahead, (core.standing(lane, steps), n, lane))
        waiters.update(lane for _, _, lane in ahead if lane.throttled and lane is not self)
        return coming

    def plan(self, now: float, core: Core, effects: Effects) -> None:
        """No room left for its tasks, or those of the lanes inside it: look again when time
        alone gives more, never at a time already passed. That look would come in this same
        promotion, while the tasks just given the room still hold it, and give it again;
        they look again themselves as they leave the ready heap (see start, moved)."""
        when = self.more_room_at(now)
        if when < math.inf:  # else a run of the lane ends first, and releases
            timer = self.timer
            if timer is None or timer._when > when:  # else that look sets the next one
                if timer is not None:
                    core.alarm_died()
                self.timer = timer = LaneTimer(self, when, core.next_seq())
                core.set_alarm(timer, effects)

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

    def drop(self) -> None:
        # The scheduler winds down: the lane holds it no more (each holds the other).
        if self.lane.timer is self:
            self.lane.timer = None

    def fire(self, core: Core, now: float, effects: Effects) -> None:
        lane = self.lane
        lane.timer = None
        if lane.throttled or lane.waiters:
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
        if lane.throttled or lane.drained is not None or lane.parent is not None:
            # Counted at once, as a task may wait for this room: in this lane, or (which
            # would take a look up the lanes it sits in to know) in an enclosing one.
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
    rates: Rates | None = None,
    weight: float | None = None,
    parent: LaneState | None = None,
) -> LaneState:
    """The options of ``executor.lane()``, checked (``parent`` by the executor)."""
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str or None, not {type(name).__name__}")
    if priority is not None:
        check_priority(priority)
    check_max_running(max_running)
    windows = check_rates(max_starts, per, rates)
    check_retry(retry)
    pause = None if cooldown is None else seconds("cooldown", cooldown)
    if not isinstance(survive_failures, bool):
        raise TypeError(f"survive_failures must be a bool, not {type(survive_failures).__name__}")
    gate = make_gate(max_waiting, waiting_timeout)
    return LaneState(
        name,
        priority or 0,
        max_running,
        windows,
        pause,
        retry,
        survive_failures,
        gate,
        check_weight(weight),
        parent,
    )


Rates = Sequence[tuple[int, "float | timedelta"]]


def check_max_running(max_running: object) -> None:
    if max_running is not None and check_int("max_running", max_running) < 1:
        raise ValueError(f"max_running must be at least 1, not {max_running}")


def check_rates(max_starts: object, per: object, rates: object) -> tuple[tuple[int, float], ...]:
    """A lane's rates, as ``(max_starts, per)`` pairs: ``max_starts`` per ``per`` seconds
    (default 1) is one; ``rates`` any number. Not both."""
    if max_starts is not None and check_int("max_starts", max_starts) < 1:
        raise ValueError(f"max_starts must be at least 1, not {max_starts}")
    window = 1.0 if per is None else seconds("per", per, positive=True)
    if rates is not None and (max_starts is not None or per is not None):
        raise ValueError("give a lane's rates as max_starts and per, or as rates: not both")
    if max_starts is not None:
        return ((cast(int, max_starts), window),)  # an int: checked
    if per is not None:
        # Alone, a window limits nothing: the caller surely meant a rate.
        raise ValueError(f"per={per!r} is the window of max_starts: give max_starts too")
    if rates is None:
        return ()
    if not isinstance(rates, (list, tuple)):
        raise TypeError(f"rates must be a list of (max_starts, per) pairs, not {rates!r}")
    checked: list[tuple[int, float]] = []
    for rate in cast("Sequence[object]", rates):
        if not isinstance(rate, (list, tuple)) or len(cast("Sequence[object]", rate)) != 2:
            raise TypeError(f"rates must be a list of (max_starts, per) pairs, not {rates!r}")
        limit, span = cast("tuple[object, object]", rate)
        if check_int("rates", limit) < 1:
            raise ValueError(f"rates: each max_starts must be at least 1, not {limit}")
        checked.append((cast(int, limit), seconds("rates: each per", span, positive=True)))
    return tuple(checked)


def check_weight(weight: object) -> float | None:
    if weight is None:
        return None
    if isinstance(weight, bool) or not isinstance(weight, (int, float)):
        raise TypeError(f"weight must be a number or None, not {type(weight).__name__}")
    if not (math.isfinite(weight) and weight > 0):
        raise ValueError(f"weight must be finite and > 0, not {weight!r}")
    return float(weight)


# What configure() leaves as it was.
class _Keep:
    def __repr__(self) -> str:
        return "KEEP"


KEEP: Any = _Keep()


def parent_state(core: Scheduler, parent: object, argument: str = "parent") -> LaneState | None:
    """The lane ``parent`` as ``lane(parent=...)`` takes it (or another call's ``argument``):
    None, or a lane of the executor of ``core`` that is not shut down."""
    if parent is None:
        return None
    if not isinstance(parent, Lane) or parent._scheduler is not core:
        raise TypeError(f"{argument} must be a lane of this executor or None, not {parent!r}")
    if parent.closed:
        raise ValueError(f"{argument} {parent!r} is shut down")
    return parent._state


def configure(lane: LaneState, core: Scheduler, changes: dict[str, Any]) -> None:
    """Change a lane's limits (or weight) at once, under the lock: a limit raised gives its
    room to the tasks that wait for it now, in this lane and the lanes inside it; one
    lowered stops the next start, and cancels no run."""

    def step(effects: Effects) -> None:
        lane.check_open()
        if "max_running" in changes:
            lane.max_running = changes["max_running"]
        if "rates" in changes:
            now = core.now()
            # Every start within the longest window so far, oldest first: a new window
            # counts those of them within it (and no older one, which it never kept).
            history: deque[float] = deque()
            if lane.windows:
                history = max(lane.windows, key=lambda window: window.per).starts
            lane.windows = tuple(
                Window(limit, per, deque(s for s in history if s + per > now))
                for limit, per in changes["rates"]
            )
        if "cooldown" in changes:
            lane.cooldown = changes["cooldown"]
        lane.timed = lane.timed or bool(lane.windows) or lane.cooldown is not None
        if "weight" in changes:
            lane.weight = weight = changes["weight"]
            if weight is not None:
                core.share_fairly()
            if lane.share is not None and core.fair is not None:
                core.fair.reweigh(lane.share, weight or 1.0)
        if lane.throttled or lane.waiters:
            lane.release(core, effects)

    timed = lane.timed or changes.get("rates") or changes.get("cooldown") is not None
    if timed and not core.manual_time:
        core.promoter.start()  # a window or cooldown may need a timer
    core.locked(step)


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
        keep: Callable[[LaneState], object],
        parent: Lane | None,
    ) -> None:
        self._state = state
        self._scheduler = scheduler
        self._schedule_in = schedule
        self._schedule_recurring_in = schedule_recurring
        self._forget = forget  # the executor's: a closed lane frees its name
        self._keep = keep  # the executor's: a named lane given limits keeps them
        self._waiting = waiting
        self._parent = parent
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
        """Of its first rate (see ``rates``)."""
        rates = self._state.rates
        return rates[0][0] if rates else None

    @property
    def per(self) -> float:
        """The window of ``max_starts``, in seconds."""
        rates = self._state.rates
        return rates[0][1] if rates else 1.0

    @property
    def rates(self) -> tuple[tuple[int, float], ...]:
        """Its rates: ``(max_starts, per)`` pairs, each a sliding window; every one holds."""
        return self._state.rates

    @property
    def weight(self) -> float | None:
        """Its share of the workers among the backlogged lanes; None: 1, as any lane's."""
        return self._state.weight

    @property
    def parent(self) -> Lane | None:
        """The lane it sits in, whose limits hold its tasks too."""
        return self._parent

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
        options: Options | None = None,
    ) -> Future[Any]:
        return self._schedule_in(
            fn, args, kwargs, priority, delay, run_at, expires, options, self._state
        )

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
        options: Options | None = None,
    ) -> Future[None]:
        return self._schedule_recurring_in(
            fn, args, kwargs, interval, fixed_rate, priority, delay, run_at, options, self._state
        )

    def configure(
        self,
        *,
        max_running: int | None = KEEP,
        max_starts: int | None = KEEP,
        per: float | timedelta | None = KEEP,
        rates: Rates | None = KEEP,
        cooldown: float | timedelta | None = KEEP,
        weight: float | None = KEEP,
    ) -> None:
        """Change the lane's limits or weight now; what is not given stays, None removes a
        limit (a weight of None is 1). Checked as ``lane()`` checks them: a bad one raises
        and changes nothing. A limit raised lets start at once what it now allows; one
        lowered stops new starts and cancels no running task. ``max_starts`` (with ``per``,
        default 1) sets one rate in place of all, ``rates`` every rate; ``max_starts=None``
        or ``rates=None`` removes them."""
        changes: dict[str, Any] = {}
        if max_running is not KEEP:
            check_max_running(max_running)
            changes["max_running"] = max_running
        if max_starts is not KEEP or per is not KEEP or rates is not KEEP:
            changes["rates"] = check_rates(
                None if max_starts is KEEP else max_starts,
                None if per is KEEP else per,
                None if rates is KEEP else rates,
            )
        if cooldown is not KEEP:
            changes["cooldown"] = None if cooldown is None else seconds("cooldown", cooldown)
        if weight is not KEEP:
            changes["weight"] = check_weight(weight)
        configure(self._state, self._scheduler, changes)
        self._keep(self._state)

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
        options = state.options()
        rates = state.rates
        del options["rates"], options["parent"]
        if len(rates) > 1:
            del options["max_starts"]
            options["rates"] = rates
        limits = "".join(
            f" {option}={value!r}"
            for option, value in options.items()
            if value is not None and value is not False and option not in ("priority", "per")
        )
        if state.priority:
            limits += f" priority={state.priority!r}"
        if len(rates) == 1:
            limits += f" per={options['per']!r}"
        if state.parent is not None:
            limits += f" parent={state.parent.name!r}"
        return f"<Lane {state.name!r}{limits}>"
