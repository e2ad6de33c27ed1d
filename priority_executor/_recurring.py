"""Recurring series: one task, run again and again until its future is cancelled or fails.

A series is a single task that the scheduler queues again, with a new due time, each time a
run ends (``Scheduler.run_ended``, asking ``Recurrence.next_due``): so two runs never
overlap, whatever the pool size. The series future stays pending while the series lives (a
running future could no longer be cancelled); the task, which its future tells when it
completes (``Task.__call__``), is the one place that ends a series.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import TYPE_CHECKING, Callable, cast

from ._arguments import seconds
from ._calendar import Calendar, Schedule

if TYPE_CHECKING:
    from ._clock import Clock


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


def series_of(
    interval: float | timedelta | Schedule,
    fixed_rate: bool,
    clock: Clock,
    now: float,
    due: float,
    wall: float | None,
) -> tuple[Recurrence | Calendar, float, float | None]:
    """What ``submit_recurring()``'s ``interval`` means: a schedule's slots or a period,
    checked, naming the argument; with the first due time (and wall time) ``due`` (and
    ``wall``), a schedule's moved to its first slot after them."""
    recurrence: Recurrence | Calendar
    if callable(getattr(interval, "next_after", None)):
        if isinstance(interval, type):
            raise TypeError(
                f"interval must be a schedule, such as Cron('0 2 * * *'), not the class"
                f" {interval.__name__} itself"
            )
        if fixed_rate:
            raise ValueError(
                "fixed_rate applies to an interval in seconds: a schedule's runs fall on"
                " its own slots"
            )
        recurrence = Calendar(cast(Schedule, interval))
        # Its first slot after the first due time (asked here: the schedule is user
        # code, which may raise, and must run before anything is queued).
        wall = recurrence.first(clock.wall() + (due - now))
        due = now + (wall - clock.wall())  # placed anew under the lock (see WallTime)
    else:
        if isinstance(interval, str):
            raise TypeError(
                f"interval must be a number of seconds, a timedelta or a schedule, not"
                f" str (for a cron expression, pass Cron({interval!r}))"
            )
        period = seconds("interval", interval, positive=True)
        recurrence = Recurrence(due, period, fixed_rate)
    return recurrence, due, wall
