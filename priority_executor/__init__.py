"""A drop-in ``concurrent.futures.ThreadPoolExecutor`` with priorities, delays, start
deadlines, recurring tasks, lanes and retries."""

from ._calendar import Cron, Schedule
from ._events import Event, Subscription, Timings, timings
from ._executor import PriorityExecutor
from ._expiry import Expired
from ._gate import QueueFull
from ._lanes import Lane
from ._otel import record_metrics
from ._policies import Aging, EarliestDeadlineFirst, Fifo, Policy, Priority, PriorityFirst, TaskInfo
from ._retry import Retry
from ._stats import ExecutorStats
from ._waiting import WaitingTask

__all__ = [
    "Aging",
    "Cron",
    "EarliestDeadlineFirst",
    "Event",
    "ExecutorStats",
    "Expired",
    "Fifo",
    "Lane",
    "Policy",
    "Priority",
    "PriorityExecutor",
    "PriorityFirst",
    "QueueFull",
    "Retry",
    "Schedule",
    "Subscription",
    "TaskInfo",
    "Timings",
    "WaitingTask",
    "record_metrics",
    "timings",
]
__version__ = "0.1.0"
