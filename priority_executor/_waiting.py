from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class WaitingTask:
    """One task that has not started yet, as ``PriorityExecutor.waiting()`` saw it.

    ``due_in`` and ``expires_in`` are seconds from the snapshot on the executor's clock,
    negative when overdue; ``expires_in`` is None for a task without a deadline. ``lane``
    (the task's lane) and the ``"throttled"`` state belong to lanes: in this version,
    ``lane`` is always None and ``state`` never ``"throttled"``.
    """

    future: Future[Any]
    fn: Callable[..., Any]
    priority: int
    state: Literal["scheduled", "ready", "throttled"]
    due_in: float
    expires_in: float | None
    lane: str | None = None
