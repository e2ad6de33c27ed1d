"""A lane's own operations, each one locked section of the scheduler's: ``configure()``,
``shutdown()`` (``close`` and ``join``) and ``stats()``, as the ``Lane`` façade calls them.
Who gets the lane's room when they change it is ``_lane_engine``'s."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from . import _threads
from ._stats import ExecutorStats, make_stats
from ._task import CANCELLED, READY, STARTED, THROTTLED, WAITING

if TYPE_CHECKING:
    from ._effects import Effects
    from ._lane_engine import LaneState
    from ._scheduler import Scheduler


def configure(lane: LaneState, core: Scheduler, changes: dict[str, Any]) -> None:
    """Change a lane's limits (or weight) at once, under the lock: a limit raised gives its
    room to the tasks that wait for it now, in this lane and the lanes inside it; one
    lowered stops the next start (taking back the room given beyond it), and cancels no
    run."""

    def step(effects: Effects) -> None:
        lane.check_open()
        core.count_posted(effects)  # the runs' ends first: the room is counted from them
        limits, now = lane.limits, core.now()
        if "max_running" in changes:
            limits.max_running = changes["max_running"]
        if "rates" in changes:
            limits.set_rates(changes["rates"], now)
        if "cooldown" in changes:
            limits.cooldown = changes["cooldown"]
        if "time_limit" in changes:  # read by the submits that follow (Executor._limit)
            lane.time_limit = changes["time_limit"]
        lane.timed = lane.timed or limits.timed
        if "weight" in changes:
            lane.weight = weight = changes["weight"]
            if weight is not None:
                core.share_fairly()
            if lane.share is not None and core.fair is not None:
                core.fair.reweigh(lane.share, weight or 1.0)
        lane.limits_changed(now, core, effects)

    timed = lane.timed or changes.get("rates") or changes.get("cooldown") is not None
    if timed and not core.manual_time:
        core.promoter.start()  # a window or cooldown may need a timer
    core.locked(step)


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
        held = lane.held_back(core.now())  # READY, not given room, beyond its room
        counts[READY] -= held
        counts[THROTTLED] += held
        if core.forked:
            # The parent's tasks, which its lanes still count (see after_fork_in_child).
            for state in (*WAITING, STARTED):
                counts[state] = 0
        return make_stats(counts, lane.retries)

    return core.locked(step)
