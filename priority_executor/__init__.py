"""A drop-in ``concurrent.futures.ThreadPoolExecutor`` with priorities, delays, start
deadlines, recurring tasks, lanes and retries."""

from ._calendar import Cron, Schedule
from ._dependencies import DependencyFailed
from ._events import Event, Subscription, Timings, timings
from ._executor import PriorityExecutor
from ._expiry import Expired
from ._gate import QueueFull
from ._graph import submit_graph
from ._lanes import Lane
from ._limits import Smooth
from ._otel import record_metrics, record_spans
from ._policies import Aging, EarliestDeadlineFirst, Fifo, Policy, Priority, PriorityFirst, TaskInfo
from ._retry import Retry
from ._stats import ExecutorStats
from ._token import CancelToken, TaskStopped, TaskTimeoutError, current, stop
from ._waiting import WaitingTask

__all__ = [
    "Aging",
    "CancelToken",
    "Cron",
    "DependencyFailed",
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
    "Smooth",
    "Subscription",
    "TaskInfo",
    "TaskStopped",
    "TaskTimeoutError",
    "Timings",
    "WaitingTask",
    "current",
    "record_metrics",
    "record_spans",
    "stop",
    "submit_graph",
    "timings",
]
__version__ = "0.1.0"
