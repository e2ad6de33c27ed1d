"""The events that ``PriorityExecutor.subscribe()`` delivers (see README, "Seeing what it
does"): each a frozen dataclass, ``TaskEvent`` for a step of one task's life."""

from ._events import (
    BUFFER,
    Dropped,
    Due,
    Event,
    Expired,
    Finished,
    LaneConfigured,
    Outcome,
    Rejected,
    Rescheduled,
    RetryScheduled,
    Skipped,
    Started,
    Submitted,
    TaskEvent,
    Throttled,
)

__all__ = [
    "BUFFER",
    "Dropped",
    "Due",
    "Event",
    "Expired",
    "Finished",
    "LaneConfigured",
    "Outcome",
    "Rejected",
    "Rescheduled",
    "RetryScheduled",
    "Skipped",
    "Started",
    "Submitted",
    "TaskEvent",
    "Throttled",
]
