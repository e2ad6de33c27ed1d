from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

WaitingState = Literal["scheduled", "ready", "throttled", "blocked"]
HeldBy = Literal["max_running", "max_starts", "cooldown"]


@dataclass(frozen=True)
class WaitingTask:
    """One task that has not started yet, as ``PriorityExecutor.waiting()`` saw it.

    ``state`` is ``"ready"`` (due, waiting for a worker), ``"throttled"`` (due, held back by
    its lane's limits), ``"scheduled"`` (waiting for its due time) or ``"blocked"`` (waiting
    for its upstreams: ``after`` holds those not done yet). ``due_in`` and
    ``expires_in`` are seconds from the snapshot on the executor's clock, negative when
    overdue; ``expires_in`` is None for a task without a deadline. ``lane`` is the name of
    the task's lane, None for an anonymous lane or none.

    For a throttled task, ``held_by`` names the limit that holds it back:
    ``"max_running"``, ``"max_starts"`` (any of its rates) or ``"cooldown"``, and
    ``held_in`` the name of the lane whose limit it is: the task's own lane, or one that
    lane sits in (None for an anonymous lane); ``starts_in`` is when that limit
    lets the lane's next task start, in seconds from the snapshot: when the window or the
    cooldown passes, None for ``max_running``, which only a run's end lifts. Both are None
    for a task that is not throttled, and for a moment when its lane has room again and
    has not yet given it back to the workers (``held_in`` likewise).

    ``runs_at`` is when it is due on the wall clock, an aware datetime: for a task still
    waiting for a wall-clock time (a calendar run's slot plus its jitter, a ``run_at``),
    that time; for any other, where its due time falls on the wall clock. In the
    schedule's time zone for a run of a calendar series, else in local time.
    """

    future: Future[Any]
    fn: Callable[..., Any]
    priority: int
    state: WaitingState
    due_in: float
    expires_in: float | None
    lane: str | None = None
    held_by: HeldBy | None = None
    starts_in: float | None = None
    held_in: str | None = None
    runs_at: datetime | None = None
    after: tuple[Future[Any], ...] = ()
