"""Recurring series: one future, a run at a time, until cancelled or failed.

Only one run of a series exists at any moment: the next is queued when the previous one
ends, so two runs never overlap, whatever the pool size. The series future stays pending
while the series lives (a running future could no longer be cancelled); its done-callback,
the ``Series`` itself, is the one place that ends a series.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Mapping
from concurrent.futures import Future, InvalidStateError
from typing import TYPE_CHECKING, Any, Callable

from ._task import COMPLETED, FAILED, VOID, Task

if TYPE_CHECKING:
    from ._scheduler import Scheduler

_LOGGER = logging.getLogger("priority_executor")


class Series:
    """The schedule of a recurring task: fixed delay, or fixed rate on a grid of slots."""

    __slots__ = (
        "args",
        "first_due",
        "fixed_rate",
        "fn",
        "future",
        "interval",
        "kwargs",
        "priority",
        "run",
        "scheduler",
        "slot",
    )

    def __init__(
        self,
        scheduler: Scheduler,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        future: Future[Any],
        *,
        priority: int,
        first_due: float,
        interval: float,
        fixed_rate: bool,
    ) -> None:
        self.scheduler = scheduler
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.future = future
        self.priority = priority
        self.first_due = first_due
        self.interval = interval
        self.fixed_rate = fixed_rate
        self.slot = 0  # fixed rate: the current run is due at first_due + slot * interval
        self.run = SeriesRun(self, first_due)

    def next_run(self, ended: float) -> SeriesRun:
        """The run after the one that ended at ``ended``; slots it overran are skipped."""
        if self.fixed_rate:
            self.slot = max(self.slot + 1, math.ceil((ended - self.first_due) / self.interval))
            due = self.first_due + self.slot * self.interval
        else:
            due = ended + self.interval
        self.run = SeriesRun(self, due)
        return self.run

    def __call__(self, future: Future[Any]) -> None:
        # The series future is done: cancelled by the user or by shutdown, or failed.
        cancelled = future.cancelled()
        self.scheduler.end_series(self, cancelled)
        if cancelled:
            future.set_running_or_notify_cancel()  # wakes wait() and as_completed() now

    def fail(self, exc: BaseException) -> None:
        with contextlib.suppress(InvalidStateError):  # cancelled first: that stands
            self.future.set_exception(exc)

    def __repr__(self) -> str:
        kind = "fixed rate" if self.fixed_rate else "fixed delay"
        return f"<Series {self.fn!r} every {self.interval} s, {kind}>"


def _call_here(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    return fn(*args, **kwargs)


class SeriesRun(Task):
    """One run of a series. Its future is the series' future, which it never completes
    except with the exception of a failed run."""

    __slots__ = ("series",)
    series: Series

    def __init__(self, series: Series, due: float) -> None:
        super().__init__(
            series.scheduler, series.fn, series.args, series.kwargs, series.future,
            series.priority, due,
        )  # fmt: skip
        self.series = series

    def run(self, tally: list[int], call: Callable[..., Any] = _call_here) -> None:
        """Run in a worker; ``call(fn, *args, **kwargs)`` makes the call, here or in a backend."""
        # cancel() on the series future is atomic: if it returned True before this check,
        # this run never starts; if after, this run was in progress and finishes.
        if self.future.cancelled():
            tally[VOID] += 1
            return
        try:
            call(self.fn, *self.args, **self.kwargs)
        except BaseException as exc:
            _LOGGER.error("Recurring task %r raised; its series ends", self.fn, exc_info=True)
            tally[FAILED] += 1
            self.series.fail(exc)
            del self  # the traceback holds this frame
            return
        # Counted once the next run is queued: whoever sees this run counted and moves the
        # clock finds the series' next run already waiting.
        self.scheduler.continue_series(self.series)
        tally[COMPLETED] += 1

    def abandon(self) -> None:
        self.future.cancel()  # the series' callback completes the cancellation

    def fail(self, exc: BaseException) -> None:
        self.series.fail(exc)
