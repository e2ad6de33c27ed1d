"""A drop-in ``concurrent.futures.ThreadPoolExecutor`` with priorities, delays, start
deadlines and recurring tasks."""

from ._executor import PriorityExecutor
from ._lanes import Lane
from ._policies import Aging, EarliestDeadlineFirst, Fifo, Policy, Priority, PriorityFirst, TaskInfo
from ._stats import ExecutorStats
from ._waiting import WaitingTask

__all__ = [
    "Aging",
    "EarliestDeadlineFirst",
    "ExecutorStats",
    "Fifo",
    "Lane",
    "Policy",
    "Priority",
    "PriorityExecutor",
    "PriorityFirst",
    "TaskInfo",
    "WaitingTask",
]
__version__ = "0.1.0"
