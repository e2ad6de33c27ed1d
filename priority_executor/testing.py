"""Helpers for testing code that uses ``PriorityExecutor``."""

from ._clock import ManualClock

__all__ = ["ManualClock"]
