"""Recurring series: one task, run again and again until its future is cancelled or fails.

A series is a single task that the scheduler queues again, with a new due time, each time a
run ends (``Scheduler.run_ended``, asking ``Recurrence.next_due``): so two runs never
overlap, whatever the pool size. The series future stays pending while the series lives (a
running future could no longer be cancelled); the task, which its future tells when it
completes (``Task.__call__``), is the one place that ends a series.
"""

from __future__ import annotations

import math
from typing import Callable


class Recurrence:
    """When the runs of a series are due: fixed delay, or fixed rate on a grid of slots,
    on the executor's clock. (A calendar series has a ``_calendar.Calendar``, which
    answers the same questions in wall-clock time.)"""

    __slots__ = ("first_due", "fixed_rate", "interval", "slot")
    wall_due = None  # its runs wait for no wall-clock time

    def begin(self, wall: float) -> bool:
        """A run is about to start: it may (see ``Calendar.begin``)."""
        return True

    def look_ahead(self) -> None:
        """A run is over: nothing to ask ahead (see ``Calendar.look_ahead``)."""

    def __init__(self, first_due: float, interval: float, fixed_rate: bool) -> None:
        self.first_due = first_due
        self.interval = interval
        self.fixed_rate = fixed_rate
        self.slot = 0  # fixed rate: the current run is due at first_due + slot * interval

    def next_due(self, ended: float, place: Callable[[float], float]) -> float:
        """When the run after the one that ended at ``ended`` is due; overrun slots are skipped."""
        if self.fixed_rate:
            self.slot = max(self.slot + 1, math.ceil((ended - self.first_due) / self.interval))
            return self.first_due + self.slot * self.interval
        return ended + self.interval

    def __repr__(self) -> str:
        kind = "fixed rate" if self.fixed_rate else "fixed delay"
        return f"<Recurrence every {self.interval} s, {kind}>"
