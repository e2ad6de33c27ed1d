"""The lane engine: which due task of a lane may start, and who gets a lane's room.

A lane's due task is in one of two states. *Given*: READY, in the ready heap, holding room
in its lane and every lane it sits in until a worker starts it, which it then may without
another look. Or *throttled*: in its lane's own heap, out of the workers' way, until room
is given to it. Room is ``Limits.room(now)`` less the tasks given it: so a lane's READY
count is exact, and a worker never throttles what it took.

One rule gives room, wherever room may have come (a run's end, a timer, a claim, a
``configure()``) or a task arrives (``arrive``): the top lane of the tree asks ``_best``
for the best throttled task whose every lane has room, by the order the workers take tasks
in (priority, then fair share, then the policy: see ``Core.standing``), gives it its room,
and asks again. Each lane whose room is what its throttled tasks (or those of the lanes
inside it) wait for, and that time alone gives back, plans a ``LaneTimer`` for then. A task
that arrives better than one given the room it needs takes that room (``_take_room``): as
if the two had arrived in the other order.

A task's start needs room in each lane of its chain, so everything here walks the chain or
the tree under one top lane: a lane knows its ``top``, how many tasks are throttled in it
and the lanes inside it (``held``), and which of those lanes hold any (``inner``).

Everything is changed under the scheduler's lock; a run's end is posted (see ``LaneTally``).
"""

from __future__ import annotations

import functools
import math
import threading
import weakref
from collections.abc import Iterator
from heapq import heapify, heappop, heappush
from typing import TYPE_CHECKING, Any

from ._limits import Limits, Rate
from ._run import run
from ._task import (
    INTAKE,
    READY,
    STARTED,
    STATES,
    THROTTLED,
    Alarm,
    Call,
    Core,
    Tally,
    Task,
    Workers,
)
from ._waiting import HeldBy

if TYPE_CHECKING:
    from ._effects import Effects
    from ._fair import Share
    from ._gate import Gate
    from ._retry import Retry


class LaneState:
    """One lane as the scheduler sees it: its limits, its throttled tasks, the room it gave.
    Changed only under the scheduler's lock (but ``in_hand``: see LaneTally)."""

    __slots__ = (
        "__weakref__",
        "cancelled",
        "closed",
        "counts",
        "drained",
        "facade",
        "gate",
        "given",
        "held",
        "in_hand",
        "inner",
        "limits",
        "name",
        "parent",
        "priority",
        "retries",
        "retry",
        "root",
        "share",
        "solo",
        "survive_failures",
        "throttled",
        "time_limit",
        "timed",
        "timer",
        "tracked",
        "weight",
    )

    def __init__(
        self,
        name: str | None,
        priority: int,
        limits: Limits,
        retry: Retry | None,
        survive_failures: bool,
        gate: Gate | None,
        weight: float | None = None,
        parent: LaneState | None = None,
    ) -> None:
        self.name = name
        self.priority = priority
        self.limits = limits  # counts the runs of the lanes inside it too
        self.retry = retry
        self.survive_failures = survive_failures  # its series go on after a failed run
        # Where its submits wait while max_waiting of its tasks wait (see _gate.admit).
        self.gate = gate
        # Its share of the workers among backlogged lanes (see _fair); None: 1, unasked.
        self.weight = weight
        self.share: Share | None = None  # its due tasks, once fair share is on
        self.parent = parent  # its limits hold this lane's tasks too
        # The lane at the top of its tree, if not itself (which would be a reference cycle,
        # for the cyclic GC to find): whose room every task in the tree needs.
        self.root: LaneState | None = None if parent is None else (parent.root or parent)
        # A lane alone, in none and with none inside it: nothing else shares its room, so
        # while none of its tasks is throttled, its due tasks take room as a worker takes
        # them, not as they come due (see arrive, start): a burst of them costs no
        # throttling that the ends of the runs ahead would undo. Its READY tasks not given
        # room count as throttled beyond its room (see held_back).
        self.solo = parent is None
        if parent is not None:
            parent.solo = False
        # Listed among the scheduler's holders while it has due tasks (see _track).
        self.tracked = False
        # A limit in time, its own or an enclosing lane's: the promoter starts with the
        # first task of a timed lane (see Scheduler.add), or as configure() makes one.
        self.timed: bool = limits.timed or (parent is not None and parent.timed)
        self.throttled: list[tuple[Any, ...]] = []  # a heap of ready-heap entries
        self.held = 0  # tasks throttled in this lane and the lanes inside it
        self.inner: set[LaneState] = set()  # the lanes right inside it with ``held``
        # The given tasks of this lane and the lanes inside it, with their entries: each
        # holds room here until it starts or leaves.
        self.given: dict[Task, tuple[Any, ...]] = {}
        self.timer: LaneTimer | None = None  # the live one, if any
        # Its tasks in each state, not in the intake. READY: given; THROTTLED: held here.
        self.counts = [0] * STATES
        self.closed = False
        self.cancelled = False  # by shutdown(cancel_futures=True): no retry is queued
        self.retries = 0  # retries queued so far
        self.drained: threading.Event | None = None  # once shut down: set once drained
        # One entry per worker running one of its tasks, until it is done with the
        # future (see LaneTally): a list, as append() and pop() are atomic without the lock,
        # on free-threaded builds too.
        self.in_hand: list[None] = []
        self.facade: weakref.ref[Any] | None = None
        self.time_limit: float | None = None  # how long each run may take (see _runtime)

    @property
    def max_running(self) -> int | None:
        return self.limits.max_running

    @property
    def cooldown(self) -> float | None:
        return self.limits.cooldown

    @property
    def rates(self) -> tuple[Rate, ...]:
        return self.limits.rate_specs()

    def settings(self) -> dict[str, object]:
        """The options it was made with, as ``executor.lane()`` takes them."""
        rates = self.rates
        first = rates[0] if len(rates) == 1 and isinstance(rates[0], tuple) else None
        return {
            "priority": self.priority,
            "max_running": self.max_running,
            "max_starts": None if first is None else first[0],
            "per": 1.0 if first is None else first[1],
            "rates": rates,
            "cooldown": self.cooldown,
            "weight": self.weight,
            "parent": self.parent,
            "retry": self.retry,
            "survive_failures": self.survive_failures,
            "max_waiting": None if self.gate is None else self.gate.limit,
            "waiting_timeout": None if self.gate is None else self.gate.timeout,
            "time_limit": self.time_limit,
        }

    def chain(self) -> Iterator[LaneState]:
        """This lane, then each lane it sits in."""
        lane: LaneState | None = self
        while lane is not None:
            yield lane
            lane = lane.parent

    def room(self, now: float) -> float:
        """How many more tasks its own limits let start now, less those given room."""
        return self.limits.room(now) - len(self.given)

    # -- who gets room -----------------------------------------------------------------------

    def arrive(
        self, entry: tuple[Any, ...], core: Core, effects: Effects, was: int | None, wake: bool
    ) -> None:
        """One of its tasks is due: given room now, or throttled until some is.
        ``wake``: wake a worker for it (not when the caller is one, on its way to take)."""
        if self.solo and not self.held and not self.given:
            # Nothing else shares its room, and none of its tasks waits for it or holds
            # it: room is taken as a worker takes the task (see start).
            core.make_ready(entry, effects, was, wake)
            return
        now = core.now()
        top = self.root or self
        full = self._full(now)
        if full is not None and core.later:
            # A run's end, posted (see LaneTally): its room may be what this task needs,
            # and nobody else may count it before this task waits for it.
            core.count_posted(effects)
            full = self._full(now)
        if full is None and not top.held:
            self._give(entry, core, effects, was, wake)  # nobody waits: the common case
            return
        task: Task = entry[-1]
        ran = (task.state if was is None else was) == STARTED  # a retry: its run frees room
        core.move(task, THROTTLED, effects, was)
        heappush(self.throttled, entry)
        if full is None or ran:
            top.give_room(core, effects)  # others wait in the tree: the one rule decides
        else:
            full._plan(now, core, effects)  # it waits for that lane: a timer, if time gives room
        if full is not None and full.given and task.state == THROTTLED:
            self._take_room(entry, now, core, effects)

    def _full(self, now: float) -> LaneState | None:
        """The lowest lane of its chain without room for one more task now, if any."""
        lane: LaneState | None = self
        while lane is not None:
            if lane.limits.room(now) <= len(lane.given):
                return lane
            lane = lane.parent
        return None

    def _give(
        self,
        entry: tuple[Any, ...],
        core: Core,
        effects: Effects,
        was: int | None = None,
        wake: bool = True,
    ) -> None:
        task: Task = entry[-1]
        core.make_ready(entry, effects, was, wake)
        lane: LaneState | None = self
        while lane is not None:
            lane.given[task] = entry
            lane = lane.parent

    def give_room(self, core: Core, effects: Effects) -> None:
        """Give the room of this tree (its top lane's) to its best throttled tasks, one at
        a time, while any has room in all its lanes; plan a timer for each lane that holds
        one back until a time."""
        now = core.now()
        while self.held:
            if not self.inner:  # a lane alone: its own best, if it has room
                if self.limits.room(now) <= len(self.given):
                    if self.timed:
                        self._plan(now, core, effects)
                    return
                self._give(self._pop(), core, effects)
                continue
            best = self._best(now, core, effects)
            if best is None:
                return
            lane = best[1]
            lane._give(lane._pop(), core, effects)

    def _best(
        self, now: float, core: Core, effects: Effects
    ) -> tuple[tuple[Any, ...], LaneState] | None:
        """The standing of the best throttled task of this lane and the lanes inside it
        that has room in each of them, with its lane; None if none has."""
        if self.room(now) <= 0:
            self._plan(now, core, effects)
            return None
        best: tuple[tuple[Any, ...], LaneState] | None = None
        head = self._head()
        if head is not None:
            best = (core.standing(self, head, self.counts[READY]), self)
        for lane in self.inner:
            found = lane._best(now, core, effects)
            if found is not None and (best is None or found[0] < best[0]):
                best = found
        return best

    def _head(self) -> tuple[Any, ...] | None:
        throttled = self.throttled
        while throttled and throttled[0][-1].state != THROTTLED:
            heappop(throttled)  # claimed where it stood
        return throttled[0] if throttled else None

    def _pop(self) -> tuple[Any, ...]:
        self._head()
        return heappop(self.throttled)

    def _take_room(self, entry: tuple[Any, ...], now: float, core: Core, effects: Effects) -> None:
        """A task that arrives throttled takes the room of a given task that it comes before
        (as if it had arrived first): the lowest lane of its chain without room gave that
        room, and has no more to give."""
        task: Task = entry[-1]
        while task.state == THROTTLED:
            lane = self._full(now)
            if lane is None or not lane.given or lane.limits.room(now) <= 0:
                return  # a limit holds it, not a task given room
            worst = max(lane.given.values())
            # Only if that room is all it lacks: else the room taken back would go to the
            # same task again, for ever.
            if not core.outranks(entry, worst) or any(
                enclosing.room(now) + (worst[-1] in enclosing.given) <= 0
                for enclosing in self.chain()
            ):
                return
            worst[-1].ext.lane._take_back(worst, core, effects)
            (self.root or self).give_room(core, effects)

    def _take_back(self, entry: tuple[Any, ...], core: Core, effects: Effects) -> None:
        """A given task of this lane loses its room: throttled again."""
        core.move(entry[-1], THROTTLED, effects)
        heappush(self.throttled, entry)

    def _over(self, now: float, core: Core, effects: Effects) -> None:
        """A limit of this lane was lowered, or a run's end renewed its cooldown: the tasks
        given more room than it has now, the worst first, are throttled again."""
        given = self.given
        while given and self.room(now) < 0:
            worst = max(given.values())
            worst[-1].ext.lane._take_back(worst, core, effects)

    def limits_changed(self, now: float, core: Core, effects: Effects) -> None:
        """Its limits (or weight) were changed (see ``_lane_control.configure``): the room
        given beyond them is taken back, the room they add given."""
        self._over(now, core, effects)
        top = self.root or self
        if top.held:
            top.give_room(core, effects)

    def _plan(self, now: float, core: Core, effects: Effects) -> None:
        """This lane's room is what its throttled tasks, or those of the lanes inside it, wait
        for: look again when time alone gives more. Never at a time already passed: that
        look would come in the same promotion, and find no more room."""
        when = self.limits.more_room_at(now, len(self.given))
        if now < when < math.inf:
            timer = self.timer
            if timer is None or timer._when > when:  # else that look sets the next one
                if timer is not None:
                    core.alarm_died()
                self.timer = timer = LaneTimer(self, when, core.next_seq())
                core.set_alarm(timer, effects)

    def _hold(self, change: int) -> None:
        """Count a task throttled in this lane (+1) or no longer (-1) up its chain."""
        lane: LaneState | None = self
        while lane is not None:
            lane.held += change
            parent = lane.parent
            if parent is not None:
                if lane.held:
                    parent.inner.add(lane)
                else:
                    parent.inner.discard(lane)
            lane = parent

    def holding(self, now: float) -> tuple[LaneState, HeldBy, float] | None:
        """Which limit of which lane (this one, or one it sits in) holds back its throttled
        tasks now, and when it lets the next one start (``math.inf``: a run's end does).
        None if none does: its room is about to be given."""
        # Its READY tasks that may start now (a lane alone's, not given room) start first.
        ahead = self.ungiven() - self.held_back(now)
        for lane in self.chain():
            taken = len(lane.given) + ahead
            if lane.limits.room(now) <= taken:
                held = lane.limits.holding(now, taken)
                if held is not None:
                    return (lane, *held)
        return None

    # -- the hooks of its tasks (see _extension), under the scheduler's lock -----------------

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
        if was == READY:
            if task in self.given:  # else a lane alone's, taken as it came
                lane: LaneState | None = self
                while lane is not None:
                    del lane.given[task]
                    lane = lane.parent
        elif was == THROTTLED:
            self._unhold(state)
        if state == STARTED:  # the common case first: it took its room
            now = core.now()
            lane = self
            while lane is not None:
                lane.limits.started(now)
                lane = lane.parent
            return
        if state in (THROTTLED, READY):
            if not self.tracked:
                self.tracked = True
                core.holding(self, True)
            if state == THROTTLED:
                if self.parent is None:
                    self.held += 1  # _hold(1), inlined: most lanes sit in none
                else:
                    self._hold(1)
        elif self.tracked and not (counts[READY] or counts[THROTTLED] or counts[STARTED]):
            self._untrack(core)
        if was == STARTED:
            # An attempt that failed, to be tried again: its run is over, its room free.
            self.retries += 1
            self.ended(None, core.now(), core, effects)
        elif was == READY and state > STARTED and (self.root or self).held:
            # A given task left without starting: its room is another's.
            (self.root or self).give_room(core, effects)
        if state > STARTED and was <= READY:
            self.settled(effects)

    def _unhold(self, state: int) -> None:
        """A throttled task of this lane moved on to ``state``."""
        if self.parent is None:
            self.held -= 1
        else:
            self._hold(-1)
        throttled = self.throttled
        if state != READY and len(throttled) > 2 * self.counts[THROTTLED]:
            # Compacting when at least half the entries are dead: O(1) per claim.
            throttled[:] = [entry for entry in throttled if entry[-1].state == THROTTLED]
            heapify(throttled)

    def _untrack(self, core: Core) -> None:
        """Out of the scheduler's holders: nothing of it is due or runs (a busy lane, whose
        READY count comes and goes with each start, stays listed)."""
        self.tracked = False
        core.holding(self, False)

    def ended(self, state: int | None, at: float, core: Core, effects: Effects) -> None:
        """A run of its tasks ended at ``at``, in ``state`` (see LaneTally), or as an attempt
        to be tried again (None: ``moved`` counted it): its room goes to the next task; an
        idle lane leaves the holders; a closed lane may be drained."""
        counts = self.counts
        if state is not None:
            counts[STARTED] -= 1
            counts[state] += 1
        lane: LaneState | None = self
        while lane is not None:
            lane.limits.ended(at)
            if lane.given and lane.limits.cooldown is not None:
                lane._over(at, core, effects)  # its cooldown starts again
            lane = lane.parent
        top = self.root or self
        if top.held:
            top.give_room(core, effects)
        if self.tracked and not (counts[READY] or counts[THROTTLED] or counts[STARTED]):
            self._untrack(core)  # idle now
        if self.drained is not None:
            self.settled(effects)

    def settled(self, effects: Effects) -> None:
        """A closed lane is drained once nothing of it waits or runs, and its runs' futures
        are done."""
        drained = self.drained
        if drained is not None and not self.in_hand and not self.busy():
            effects.later.append(drained.set)

    def busy(self) -> bool:
        """Whether any of its tasks waits or runs."""
        return any(self.counts[: STARTED + 1])

    # -- as the extension of its tasks that have no other feature (see _task.Hooks) ---------

    lock_free = True
    options = None  # a task with per-call options has an Extension (see _options)
    deadline = None
    recurrence = None
    error = None
    wall_due = None
    upstreams = None

    @property
    def lane(self) -> LaneState:
        return self

    def check_open(self) -> None:
        if self.closed:
            raise RuntimeError("cannot schedule new futures after the lane's shutdown")

    def start(self, task: Task, entry: tuple[Any, ...], core: Core, effects: Effects) -> int:
        """A worker took one of its READY tasks: STARTED if it was given room, or if its
        lanes have room and no task waits for it (a lane alone's task, or one that came
        due while its lane was alone); else THROTTLED, the room given by the one rule."""
        if task in self.given:
            return STARTED
        now = core.now()
        if self.parent is None:  # _full(now), inlined for a lane in none (most lanes)
            full = self if self.limits.room(now) <= len(self.given) else None
        else:
            full = self._full(now)
        top = self.root or self
        if full is None and not top.held:
            return STARTED
        core.move(task, THROTTLED, effects)
        heappush(self.throttled, entry)
        if full is None:
            top.give_room(core, effects)  # to the best waiting task: maybe this one
        else:
            full._plan(now, core, effects)
            if full.given:
                # Given to a task it comes before (that came due while it waited here
                # unlooked at): as if it had been throttled as it came due.
                self._take_room(entry, now, core, effects)
        return THROTTLED

    def ungiven(self) -> int:
        """How many of its own READY tasks hold no room: a lane alone's (see start)."""
        if self.parent is not None:
            return 0  # a lane inside another: its READY tasks are all given room
        if self.solo:
            return self.counts[READY] - len(self.given)
        # Come due while it was alone, they stay so when it gets a lane inside, until a
        # worker takes them; ``given`` holds the inner lanes' tasks too.
        own = [task for task in self.given if task.ext is not None and task.ext.lane is self]
        return self.counts[READY] - len(own)

    def held_back(self, now: float) -> int:
        """How many of its READY tasks not given room cannot start now: they count as
        throttled (see ``_control.stats``)."""
        ungiven = self.ungiven()
        if ungiven <= 0:
            return 0
        room = self.limits.room(now) - len(self.given)
        return ungiven if room <= 0 else max(0, ungiven - int(min(room, ungiven)))

    def counted(self, state: int) -> None:
        self.counts[state] += 1

    def copy(self, task: Task) -> LaneState:
        return self

    def run(self, task: Task, tally: Tally, call: Call | None, core: Core) -> None:
        """Run a claimed task of the lane in a worker (see ``_run.run``), counting its end
        in the lane as well (see ``LaneTally``)."""
        counter = LaneTally(tally, self, core)  # type: ignore[arg-type]  # a worker's list
        try:
            run(task, counter, call)
        finally:  # even if a callback raised SystemExit: the lane's shutdown waits for it
            counter.finished()

    def __repr__(self) -> str:
        return f"<LaneState {self.name!r} running={self.limits.running}>"


class LaneTimer(Alarm):
    """An entry of the pending heap: give a lane's room again when time gives more."""

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
        (lane.root or lane).give_room(core, effects)


class LaneTally:
    """Stands in for a worker's tally while a lane's task runs: the run counts how it ended
    in the worker's tally, as any run does, and in its lane, before its future completes.

    The lane counts it at once, under the scheduler's lock, when a task waits for room in
    its tree (or a shutdown for its end): so a throttled task starts as the run ends, not
    once the future's callbacks are done (which may wait for it). Else the end is posted,
    for the next thread that takes the lock to count (see ``Scheduler.post``): most runs
    end with no one waiting, and pay no lock for it. The worker is counted in the lane's
    ``in_hand`` for the whole run, and a closed lane is drained only once none is
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
        top = lane.root or lane
        if (
            (top.held and _free(core.workers))
            or lane.drained is not None
            or (lane.timed and top.given)
        ):
            # Counted at once: a task waits for this room and a worker could start it now,
            # or a task holds room that a cooldown this end starts again takes back.
            core.locked(end)
        else:
            # The next thread to take the lock counts it (see post): with every worker
            # busy, the next take() does, before it looks for a task.
            core.later.append(end)
            # After the post: a task throttled since, by a thread that counted the posts
            # before this one, waits for whoever counts this one; this look makes it this
            # thread, now. (A worker that parks after it sees the post: see take().)
            if top.held and _free(core.workers):
                core.locked(core.count_posted)
        self.tally[state] = count

    def finished(self) -> None:
        """The worker is done with the run: its future is complete, or its retry queued."""
        lane = self.lane
        lane.in_hand.pop()
        # After the pop: a shutdown that creates ``drained`` after this look finds this
        # run no longer in hand, and decides for itself (see _lane_control.close).
        if lane.drained is not None and not lane.in_hand:
            self.core.locked(functools.partial(_settle, lane, self.core))


def _free(workers: Workers) -> bool:
    """Whether a worker could start a task now: one idle, or one the pool may add."""
    return bool(workers.idle) or len(workers.threads) < workers.max_workers


def _settle(lane: LaneState, core: Core, effects: Effects) -> None:
    """The last run in hand of a closed lane is done: it is drained once its run's end,
    posted maybe, is counted."""
    core.count_posted(effects)
    lane.settled(effects)
