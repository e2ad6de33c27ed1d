"""Lanes: limits per kind of work, on the executor's workers.

A lane's tasks are ordinary tasks that carry their lane. The scheduler asks a lane one
question, when a worker is about to start one of its tasks: may it start now, and if not,
when? (``LaneState.blocked_until``). A task that may not start is *throttled*: the scheduler
moves it out of the ready heap into its lane's own heap, so that it holds back no other
lane's task, and moves the lane's best tasks back when the lane has room again: when one of
its runs ends, or when a timer in the pending heap says that a window or a cooldown passed.

A named lane made with options is kept by its executor until the lane's shutdown, so that
its limits hold whoever looks it up later; one made without options has nothing to lose,
and is found by name only while anything references it (see ``PriorityExecutor.lane``).
"""

from __future__ import annotations

import math
import threading
import weakref
from collections import deque
from concurrent.futures import Future
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Callable

from ._arguments import check_int, check_priority, seconds
from ._retry import check_retry
from ._stats import ExecutorStats
from ._submitting import Executor
from ._task import READY, STARTED, STATES, TimerEntry
from ._waiting import WaitingTask

if TYPE_CHECKING:
    from ._retry import Retry
    from ._scheduler import Scheduler
    from ._task import Task


class LaneState:
    """One lane as the scheduler sees it: its limits and how it uses them. Changed only
    under the scheduler's lock."""

    __slots__ = (
        "__weakref__",
        "cancelled",
        "closed",
        "cooldown",
        "counts",
        "drained",
        "facade",
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
    ) -> None:
        self.name = name
        self.priority = priority
        self.max_running = max_running
        self.max_starts = max_starts
        self.per = per
        self.cooldown = cooldown
        self.retry = retry
        self.survive_failures = survive_failures  # its series go on after a failed run
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
        }

    # -- the seam: may a task start now, and if not, when? -------------------------------------

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

    def room(self, now: float) -> float:
        """How many more throttled tasks may be given back to the workers now: as many as
        every limit lets start, less those given it already and not yet taken by a worker
        (each holds its room until then: else every look at the lane would give that room
        again, to one more task). Negative when a task that was never throttled took it."""
        if self.blocked_until(now) > now:
            return 0
        room = math.inf
        if self.max_running is not None:
            room = self.max_running - self.running
        if self.starts is not None:
            room = min(room, self.max_starts - len(self.starts))  # type: ignore[operator]
        return room - len(self.given)

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

    def start(self, task: Task, now: float) -> None:
        """One of its ready tasks starts at ``now``."""
        counts = self.counts
        counts[READY] -= 1
        counts[STARTED] += 1
        if self.given:
            self.given.discard(task)  # it took the room it was given
        self.running += 1
        if self.starts is not None:
            self.starts.append(now)

    def end(self, state: int | None, at: float) -> bool:
        """A run of its tasks ended at ``at``, in ``state`` (None: to be tried again).
        Returns whether the end may matter beyond the counts: throttled tasks may have its
        room, or a shutdown may wait for it (see ``Scheduler._lane_run_over``). Most lanes'
        ends do not: no call is made for them."""
        counts = self.counts
        counts[STARTED] -= 1
        if state is not None:
            counts[state] += 1
        self.running -= 1
        self.last_end = at
        return bool(self.throttled) or self.drained is not None

    def moved(self, was: int | None, state: int | None) -> None:
        """Count one of its tasks moved from ``was`` (None: a new one) into ``state`` (None:
        not counted until it is queued again)."""
        counts = self.counts
        if was is not None:
            counts[was] -= 1
        if state is not None:
            counts[state] += 1

    def busy(self) -> bool:
        """Whether any of its tasks waits or runs."""
        counts = self.counts
        return any(counts[: STARTED + 1])

    def drained_now(self) -> bool:
        """Whether a closed lane is drained: none of its tasks waits or runs, and every
        run's future is done."""
        return self.drained is not None and not self.in_hand and not self.busy()

    def __repr__(self) -> str:
        return f"<LaneState {self.name!r} running={self.running}>"


class LaneTimer(TimerEntry):
    """An entry of the pending heap: look at a lane again when a window or cooldown passes."""

    __slots__ = ("_seq", "_when", "lane")

    def __init__(self, lane: LaneState, when: float, seq: int) -> None:
        self._when = when
        self._seq = seq
        self.lane = lane

    def live(self) -> bool:
        return self.lane.timer is self


class LaneTally:
    """Stands in for a worker's tally while a lane's task runs: the run counts how it ended
    in the worker's tally, as any run does, and posts its end to the scheduler, without
    the lock, before its future completes (see ``Scheduler.lane_run_ended``).

    So the lane has its room back before the worker is done with the future: the worker is
    counted in the lane's ``in_hand`` for the whole run, and a closed lane is drained only
    once none is (``finished()``)."""

    __slots__ = ("lane", "scheduler", "tally", "task")

    def __init__(self, tally: list[int], task: Task, lane: LaneState, scheduler: Scheduler) -> None:
        self.tally = tally  # the worker's
        self.task = task
        # The task's lane, held here: counting the end may take the task's (_lane_claimed).
        self.lane = lane
        self.scheduler = scheduler
        lane.in_hand.append(None)

    def __getitem__(self, state: int) -> int:
        return self.tally[state]

    def __setitem__(self, state: int, count: int) -> None:
        self.scheduler.lane_run_ended(self.task, state)
        self.tally[state] = count

    def finished(self) -> None:
        """The worker is done with the run: its future is complete, or its retry queued."""
        lane = self.lane
        lane.in_hand.pop()
        # After the pop: a shutdown that creates ``drained`` after this look finds this
        # run no longer in hand, and decides for itself (see close_lane).
        if lane.drained is not None and not lane.in_hand:
            self.scheduler.lane_finished(lane)


def make_lane_state(
    name: str | None,
    priority: int | None,
    max_running: int | None,
    max_starts: int | None,
    per: float | timedelta | None,
    cooldown: float | timedelta | None,
    retry: Retry | None,
    survive_failures: bool,
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
    return LaneState(
        name, priority or 0, max_running, max_starts, window, pause, retry, survive_failures
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
    ) -> None:
        self._state = state
        self._scheduler = scheduler
        self._schedule_in = schedule
        self._schedule_recurring_in = schedule_recurring
        self._forget = forget  # the executor's: a closed lane frees its name
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
        interval: float | timedelta,
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
        self._scheduler.close_lane(self._state, cancel_futures)
        self._forget(self._state)
        if wait:
            self._scheduler.join_lane(self._state)

    def stats(self) -> ExecutorStats:
        """A consistent snapshot of how many of this lane's tasks are in each state."""
        return self._scheduler.lane_stats(self._state)

    def waiting(self) -> list[WaitingTask]:
        """``PriorityExecutor.waiting()`` for this lane's tasks."""
        return self._scheduler.waiting(self._state)

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
