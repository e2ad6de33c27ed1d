"""Recurring series: one task, run again and again until its future is cancelled or fails.

A series is a single task that the scheduler queues again, with a new due time, each time a
run ends: so two runs never overlap, whatever the pool size. The series future stays pending
while the series lives (a running future could no longer be cancelled); the task, which its
future tells when it completes, is the one place that ends a series.
"""

from __future__ import annotations

import contextlib
import logging
import math
from concurrent.futures import Future, InvalidStateError
from typing import TYPE_CHECKING, Any, Callable, cast

from ._arguments import callable_name
from ._task import COMPLETED, FAILED, VOID, Tally, Task

if TYPE_CHECKING:
    from ._task import OwnFuture

_LOGGER = logging.getLogger("priority_executor")

# How a run makes its call: here, or through a backend (see _backend).
Call = Callable[[Callable[..., Any], tuple[Any, ...], Any], Any]


def call_here(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Any) -> Any:
    return fn(*args, **kwargs)


class Recurrence:
    """When the runs of a series are due: fixed delay, or fixed rate on a grid of slots."""

    __slots__ = ("first_due", "fixed_rate", "interval", "slot")

    def __init__(self, first_due: float, interval: float, fixed_rate: bool) -> None:
        self.first_due = first_due
        self.interval = interval
        self.fixed_rate = fixed_rate
        self.slot = 0  # fixed rate: the current run is due at first_due + slot * interval

    def next_due(self, ended: float) -> float:
        """When the run after the one that ended at ``ended`` is due; overrun slots are skipped."""
        if self.fixed_rate:
            self.slot = max(self.slot + 1, math.ceil((ended - self.first_due) / self.interval))
            return self.first_due + self.slot * self.interval
        return ended + self.interval


class RecurringTask(Task):
    """The task of a series: its future is the series' future, which a run completes only
    with the exception of a failed run."""

    __slots__ = ("lane", "recurrence")
    recurrence: Recurrence

    def __call__(self, future: Future[Any]) -> None:
        # The series future is done: cancelled by the user or by shutdown, or failed.
        cancelled = future.cancelled()
        own = cast("OwnFuture[None]", future)
        # The series ended: its task, which holds the future, must not be held by it (each
        # would keep the other, a reference cycle that only the cyclic GC frees).
        own._task = None
        scheduler = own._owner()
        if scheduler is not None:  # else gone with its threads: nothing waits for it
            scheduler.future_done(self, cancelled)
        if cancelled:
            # No one sets a series future running, so no one else reports its cancellation.
            future.set_running_or_notify_cancel()

    def run(self, tally: Tally, call: Call = call_here) -> None:
        """Run in a worker; ``call(fn, args, kwargs)`` makes the call, here or in a backend."""
        # cancel() on the series future is atomic: if it returned True before this check,
        # this run never starts; if after, this run was in progress and finishes.
        if self.future.cancelled():
            tally[VOID] += 1
        else:
            try:
                call(self.fn, self.args, self.kwargs)
            except BaseException as exc:
                if self.retry is not None and self.scheduler.try_again(self, exc):
                    return  # tried again after a backoff, before the series would end
                lane = self.lane
                if lane is not None and lane.survive_failures and isinstance(exc, Exception):
                    _LOGGER.error(
                        "Recurring task %s in lane %r raised; its series goes on",
                        callable_name(self.fn),
                        lane.name,
                        exc_info=True,
                    )
                    del exc  # its traceback holds this frame
                    self.survived()
                    self.scheduler.run_ended(self)  # the next run, as planned
                    tally[FAILED] += 1
                    return
                _LOGGER.error("Recurring task %r raised; its series ends", self.fn, exc_info=True)
                tally[FAILED] += 1
                self.fail(exc)
                del exc  # its traceback holds this frame
            else:
                # Counted once the next run is queued: whoever sees this run counted and
                # moves the clock finds the series' next run already waiting.
                self.scheduler.run_ended(self)
                tally[COMPLETED] += 1
                return
        self.scheduler.run_ended(self)

    def survived(self) -> None:
        """A run failed for good, and the series goes on (its lane's survive_failures)."""

    def abandon(self) -> None:
        self.future.cancel()  # the future tells the series, which reports it

    def fail(self, exc: BaseException) -> None:
        # Cancelled first: that stands, and the series has reported it.
        with contextlib.suppress(InvalidStateError):
            self.future.set_exception(exc)

    def __repr__(self) -> str:
        kind = "fixed rate" if self.recurrence.fixed_rate else "fixed delay"
        name = getattr(getattr(self, "fn", None), "__qualname__", "(ended)")
        return f"<RecurringTask {self._seq} {name} every {self.recurrence.interval} s, {kind}>"
