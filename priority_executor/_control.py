"""Introspection and live control: what the executor counts, what waits and why, and
moving a task that waits. Each is one locked section of the scheduler's, through its
public methods."""

from __future__ import annotations

import datetime
import math
from typing import TYPE_CHECKING, Any, cast

from ._arguments import check_deadline
from ._calendar import Calendar
from ._clock import wall_datetime
from ._extension import Extension
from ._stats import ExecutorStats, make_stats
from ._task import (
    BLOCKED,
    INTAKE,
    PENDING,
    READY,
    STARTED,
    THROTTLED,
    VOID,
    Extended,
    OwnFuture,
    Task,
)
from ._waiting import WaitingState, WaitingTask

if TYPE_CHECKING:
    from ._effects import Effects
    from ._lane_engine import LaneState
    from ._scheduler import Scheduler
    from ._task import Lane
    from ._waiting import HeldBy

_MICROSECOND = datetime.timedelta(microseconds=1)


def stats(core: Scheduler) -> ExecutorStats:
    def step(effects: Effects) -> ExecutorStats:
        # The posted run ends first, and the intake's tasks, due, are ready or throttled
        # (see _lane_engine).
        core.count_posted(effects)
        core.drain_intake(effects)
        counts = list(core.counts)
        # A worker tallies how its tasks ended without the lock; counts[STARTED] is
        # every start, so a task ending between the two reads is simply still running.
        for tally in core.workers.tallies:
            for state, n in enumerate(tally):
                counts[state] += n
                counts[STARTED] -= n
        counts[READY] += counts[INTAKE] + len(core.intake)  # appended since the drain
        # A lane alone's READY tasks beyond its room (not given it: see _lane_engine).
        now = core.now()
        held = sum(holder.held_back(now) for holder in core.holders)
        counts[READY] -= held
        counts[THROTTLED] += held
        return make_stats(counts, core.retries, core.workers.overrunning)

    return core.locked(step)


def waiting(core: Scheduler, lane: Lane | None = None) -> list[WaitingTask]:
    """Every task not started yet (of ``lane``, if given), in one snapshot taken under
    the lock: the ready ones in the order workers would take them, then the throttled
    ones in the same order, with the limit that holds them back, then the scheduled ones
    by due time, then those blocked by upstreams, by due time too."""

    def step(effects: Effects) -> list[WaitingTask]:
        now = core.now()
        # As a worker would: the intake's tasks are due, the lanes' room is back.
        core.count_posted(effects)
        core.drain_intake(effects)
        # A stale entry (its task claimed, or a series' run re-queued since) is skipped,
        # and a lane's task given its room again is listed once.
        fair = core.fair
        listed = (*core.in_order, *core.ready) if fair is None else fair.entries()
        due = list(
            {id(e): e for e in listed if e[-1].state == READY and e[-2] == e[-1]._seq}.values()
        )
        due = sorted(due) if fair is None else fair.preview(due)
        throttled = list(
            {
                id(entry): entry
                for holder in core.holders
                for entry in holder.throttled
                if entry[-1].state == THROTTLED
            }.values()
        )
        # A lane alone's READY tasks not given room: those its room lets start now, in
        # the workers' order, are ready; the others throttled (see _lane_engine).
        ready: list[Task] = []
        room: dict[object, int] = {}
        for entry in due:
            task = entry[-1]
            own = None if task.ext is None else cast("LaneState", task.ext.lane)
            if own is None or task in own.given:
                ready.append(task)
                continue
            left = room.get(own)
            if left is None:
                left = own.ungiven() - own.held_back(now)
            room[own] = left - 1
            if left > 0:
                ready.append(task)
            else:
                throttled.append(entry)
        throttled.sort()
        seen: set[int] = set()
        pending: list[Task] = []
        for timer in core.timers:
            if isinstance(timer, Task) and timer.state == PENDING and id(timer) not in seen:
                seen.add(id(timer))
                pending.append(timer)
        pending.sort()
        # Waiting for upstreams (see _dependencies.Blocked), by due time as well.
        blocked = sorted(
            entry[-1]
            for holder in core.holders
            for entry in holder.throttled
            if entry[-1].state == BLOCKED
        )
        # What holds each lane's throttled tasks back: each such lane has due tasks, so is
        # among the holders.
        held: dict[object, tuple[LaneState, HeldBy, float] | None] = {
            holder: holder.holding(now) for holder in core.holders
        }
        # As the clock shows it now: the one the scheduler keeps is looked at again only
        # while a task waits for a wall-clock time, so it misses a step made meanwhile.
        wall_offset = core.wall_time.clock.wall_offset()
        return [
            _waiting_task(task, state, now, held, wall_offset)
            for state, tasks in (
                ("ready", ready),
                ("throttled", [e[-1] for e in throttled]),
                ("scheduled", pending),
                ("blocked", blocked),
            )
            for task in tasks
            if lane is None or (task.ext is not None and task.ext.lane is lane)
        ]

    return core.locked(step)


def _waiting_task(
    task: Task,
    state: str,
    now: float,
    held: dict[object, tuple[LaneState, HeldBy, float] | None],
    wall_offset: float,
) -> WaitingTask:
    deadline = task.deadline
    ext = task.ext
    own = None if ext is None else ext.lane
    holding = held.get(own) if state == "throttled" else None
    # The wall-clock time it waits for, if it does (a run_at's, a calendar run's), else
    # where its due time falls on the wall clock; a calendar's in its schedule's zone.
    wall = None if ext is None else ext.wall_due
    recurrence = None if ext is None else ext.recurrence
    zone = recurrence.zone() if isinstance(recurrence, Calendar) else None
    # To the microsecond, as a datetime shows it: the first at which it is due, not the
    # nearest, so that advance_to(runs_at) makes it due.
    if wall is None:
        runs_at = wall_datetime(task._when + wall_offset)
        early = runs_at.timestamp() - wall_offset < task._when
    else:
        runs_at = wall_datetime(wall)
        early = runs_at.timestamp() < wall
    if early:
        runs_at += _MICROSECOND
    upstreams = None if ext is None else ext.upstreams
    return WaitingTask(
        future=task.future,
        fn=task.fn,
        priority=task._priority,
        state=cast(WaitingState, state),
        due_in=task._when - now,
        expires_in=None if deadline is None else deadline - now,
        lane=None if own is None else own.name,
        held_by=None if holding is None else holding[1],
        starts_in=None if holding is None or holding[2] == math.inf else holding[2] - now,
        held_in=None if holding is None else holding[0].name,
        runs_at=runs_at.astimezone(zone),
        after=() if upstreams is None or state != "blocked" else upstreams.waiting_for(),
    )


def reschedule(
    core: Scheduler,
    future: OwnFuture[Any],
    priority: int | None,
    due: float | None,
    wall: float | None,
    deadline: float | None,
    now: float,
) -> bool:
    """Give the task of ``future``, if it has not started, a new ``priority``, ``due``
    time (with ``wall``, the wall-clock time it is, for a ``run_at``) or start
    ``deadline`` (None: unchanged), checked by the caller (but for the
    deadline against the due time, which only this knows for sure); else return False
    and change nothing. ``now``: when the caller read the clock. O(log n).

    The task is replaced by a copy with the new values (see ``Task.replacement``), queued
    afresh with a new ``seq``: so it counts as submitted now among equals. The original is
    claimed VOID: a dead entry wherever it stood, which its heap skips and compacts as it
    does cancelled tasks. Whoever takes the lock first wins: a worker that started the
    task, a cancel() or an expiry that claimed it make this return False; once this has
    returned True, each of them finds the copy.
    """
    if core.forked:
        return False  # the parent's task, which nothing here may queue or start
    if not core.manual_time and (due is not None or deadline is not None):
        # A timer may now wait: a task that was due when submitted started no promoter.
        core.promoter.start()

    def step(effects: Effects) -> bool:
        task = future._task
        if task is None:
            return False  # a series that ended (see Task.__call__)
        was = task.state
        if was > READY:
            return False
        when = task._when if due is None else due
        new_deadline = task.deadline if deadline is None else deadline
        if new_deadline is not None and (due is not None or deadline is not None):
            check_deadline(now, when, new_deadline)  # before anything changes
        if priority is None and due is None and deadline is None:
            return True
        new = task.replacement()
        if not future._replace_task(new):
            return False  # cancelled: the future, telling its task, claims it
        if priority is not None:
            new._priority = priority
        new._when = when
        new._seq = core.next_seq()
        ext = new.ext
        if (new_deadline is not None or wall is not None) and not isinstance(ext, Extension):
            # A plain task, or one whose extension is its lane.
            lane = None if ext is None else cast("LaneState", ext.lane)
            ext = Extension(None, lane, None, None)
            cast(Extended, new).ext = ext  # a copy is an Extended (see replacement())
        if isinstance(ext, Extension):
            ext.deadline = new_deadline
            if due is not None:
                ext.wall_due = wall  # a delay waits for no wall-clock time
        if task.ext is not None and task.ext.recurrence is not None:
            core.series.discard(task)
        # Queued before the original is claimed: its lane never looks idle meanwhile
        # (a lane's shutdown(wait=True) would return).
        core.queue(new, None, effects)
        core.claim(task, VOID, effects)
        task.hand_over()  # the copy holds the call: nothing is freed here
        core.discarded(effects)
        return True

    return core.locked(step)
