"""Retries: a policy that answers "again, and when?", and the tasks that follow it.

A retry is the same task queued again, with a new due time, in the pending heap like any
delayed task: so it keeps its priority and deadline, and a ``ManualClock`` times it exactly.
The scheduler asks the task's policy in one place (``Scheduler.try_again``); the plain path
pays nothing, as only the task classes here have a policy.
"""

from __future__ import annotations

import functools
import logging
import math
import random
from collections.abc import Mapping
from concurrent.futures import BrokenExecutor, Future
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Callable

from ._arguments import callable_name, check_int, seconds
from ._recurring import Call, RecurringTask, call_here
from ._task import CANCELLED, COMPLETED, FAILED, LaneTask, OwnFuture, Tally

if TYPE_CHECKING:
    from ._lanes import LaneState
    from ._scheduler import Scheduler

_LOGGER = logging.getLogger("priority_executor")

# Never tried again, whatever ``on`` says: the user wants out, or nothing can run any more.
_NEVER = (KeyboardInterrupt, SystemExit, BrokenExecutor)


class Retry:
    """How a failed task is tried again: ``attempts`` in all; attempt k + 1 is due
    ``min(max_backoff, backoff * factor ** (k - 1))`` seconds after attempt k ended, scaled
    by a uniform random factor in ``[1 - jitter, 1]``; only after an exception that is an
    instance of ``on`` (a class or a tuple of classes)."""

    __slots__ = ("attempts", "backoff", "factor", "jitter", "max_backoff", "on")
    attempts: int
    backoff: float
    factor: float
    max_backoff: float
    jitter: float
    on: tuple[type[BaseException], ...]

    def __init__(
        self,
        attempts: int = 3,
        *,
        backoff: float | timedelta = 0.1,
        factor: float = 2.0,
        max_backoff: float | timedelta = 60.0,
        jitter: float = 0.0,
        on: type[BaseException] | tuple[type[BaseException], ...] = Exception,
    ) -> None:
        if check_int("attempts", attempts) < 1:
            raise ValueError(f"attempts must be >= 1, got {attempts!r}")
        factor = _number("factor", factor)
        if not 1 <= factor < math.inf:
            # Below 1, waits would shrink: no backoff. 1 waits the same each time.
            raise ValueError(f"factor must be finite and >= 1, got {factor!r}")
        jitter = _number("jitter", jitter)
        if not 0 <= jitter <= 1:
            raise ValueError(f"jitter must be between 0 and 1, got {jitter!r}")
        classes = on if isinstance(on, tuple) else (on,)
        if not classes or not all(
            isinstance(cls, type) and issubclass(cls, BaseException) for cls in classes
        ):
            raise TypeError(f"on must be an exception class or a tuple of them, not {on!r}")
        if all(issubclass(cls, _NEVER) for cls in classes):
            raise ValueError(
                f"on={on!r} can never be retried: KeyboardInterrupt, SystemExit and"
                " BrokenExecutor end a task at once, whatever on says"
            )
        set_ = object.__setattr__  # immutable: set once, here
        set_(self, "attempts", attempts)
        set_(self, "backoff", seconds("backoff", backoff))
        set_(self, "factor", factor)
        set_(self, "max_backoff", seconds("max_backoff", max_backoff))
        set_(self, "jitter", jitter)
        set_(self, "on", classes)

    def again(self, exc: BaseException, attempt: int) -> float | None:
        """Attempt ``attempt`` (1 for the first) raised ``exc``: in how many seconds the next
        attempt is due, or None if there is none."""
        if attempt >= self.attempts or not isinstance(exc, self.on) or isinstance(exc, _NEVER):
            return None
        try:
            wait = min(self.max_backoff, self.backoff * self.factor ** (attempt - 1))
        except OverflowError:  # factor ** k beyond any float: so beyond max_backoff too
            wait = self.max_backoff if self.backoff else 0.0
        if self.jitter:
            wait *= random.uniform(1 - self.jitter, 1)
        return wait

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Retry is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Retry is immutable: cannot delete {name!r}")

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Retry):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __reduce__(self) -> tuple[Any, ...]:  # the default needs __setattr__
        return (_rebuild, self._fields())

    def __repr__(self) -> str:
        names = [cls.__qualname__ for cls in self.on]
        on = names[0] if len(names) == 1 else f"({', '.join(names)})"
        return (
            f"Retry({self.attempts}, backoff={self.backoff!r}, factor={self.factor!r},"
            f" max_backoff={self.max_backoff!r}, jitter={self.jitter!r}, on={on})"
        )


def _rebuild(
    attempts: int,
    backoff: float,
    factor: float,
    jitter: float,
    max_backoff: float,
    on: tuple[type[BaseException], ...],
) -> Retry:
    return Retry(
        attempts, backoff=backoff, factor=factor, max_backoff=max_backoff, jitter=jitter, on=on
    )


def check_retry(retry: object) -> None:
    if retry is Retry:
        raise TypeError("retry must be an instance such as Retry(3), not the class itself")
    if retry is not None and not isinstance(retry, Retry):
        raise TypeError(f"retry must be a Retry or None, not {type(retry).__name__}")


def log_retry(
    fn: Callable[..., Any],
    lane: LaneState | None,
    attempt: int,
    attempts: int,
    wait: float,
    exc: BaseException,
) -> None:
    """One line for a retried failure: a retry is expected, its traceback is for debugging
    (the last attempt's exception is in the future). Quiet it by raising the level of the
    ``priority_executor`` logger above WARNING."""
    where = "" if lane is None else f" in lane {lane.name!r}" if lane.name else " in a lane"
    lines = str(exc).splitlines()
    error = type(exc).__qualname__ + (f": {lines[0]}" if lines else "")
    if len(error) > 200 or len(lines) > 1:
        error = error[:200] + "..."
    _LOGGER.warning(
        "%s%s failed on attempt %d of %d (%s); retrying in %.3g s",
        callable_name(fn),
        where,
        attempt,
        attempts,
        error,
        wait,
        exc_info=exc if _LOGGER.isEnabledFor(logging.DEBUG) else None,
    )


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, not {type(value).__name__}")
    return float(value)


class RetryingTask(LaneTask):
    """A one-shot task whose failed attempts are tried again, as its policy says; of a
    lane or not, with a start deadline or not.

    Its future stays pending until the last attempt ends, as a series' does, so that
    ``cancel()`` succeeds at any time: no attempt starts after it, and the outcome of one in
    progress is dropped. Between attempts it waits in the pending heap (see
    ``Scheduler.try_again``).
    """

    __slots__ = ("attempt", "error", "retry")
    retry: Retry

    def __init__(
        self,
        scheduler: Scheduler,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        future: OwnFuture[Any],
        priority: int,
        due: float,
        deadline: float | None,
        lane: LaneState | None,
        retry: Retry,
    ) -> None:
        super().__init__(scheduler, fn, args, kwargs, future, priority, due, deadline, lane)
        self.retry = retry
        self.attempt = 1
        # The last attempt's exception while its retry waits: the task's outcome, should the
        # retry not start by the deadline.
        self.error: BaseException | None = None

    def run(self, tally: Tally, call: Call = call_here) -> None:
        """Make one attempt, in a worker, after the claim; ``call(fn, args, kwargs)`` makes the
        call, here or in a backend."""
        result = error = None
        if not self.future.cancelled():  # else cancelled since the claim: nothing starts
            self.error = None
            try:
                result = call(self.fn, self.args, self.kwargs)
            except BaseException as exc:
                self.error = exc
                if self.scheduler.try_again(self, exc):
                    # Queued again: the task is no longer this worker's. No local holds
                    # the exception, whose traceback holds this frame: once the task lets
                    # go of it, it is freed, and the call's arguments with it.
                    return
                error = exc
        future = self.hand_over()[0]
        # Atomic with cancel(): a cancellation that came during the attempt wins, drops the
        # attempt's outcome and is reported here (told of it, a started task does nothing).
        if not future.set_running_or_notify_cancel():
            tally[CANCELLED] += 1
        elif error is None:
            tally[COMPLETED] += 1
            future.set_result(result)
        else:
            tally[FAILED] += 1
            future.set_exception(error)
            # The traceback holds this frame, and the future holds the traceback.
            del future, error

    def abandon(self) -> None:
        if self.state == FAILED and self.error is not None:
            # Its retry did not start by the deadline (see Scheduler._expired): the last
            # attempt's exception stands.
            self.fail(self.error)
        else:
            super().abandon()

    def hand_over(self) -> tuple[Future[Any], Callable[..., Any], tuple[Any, ...], Any]:
        self.error = None  # its traceback holds the call's arguments too
        return super().hand_over()


class RetryingSeries(RecurringTask):
    """A recurring series whose failed runs are tried again, before the series would end.
    A run that returns ends its retries: the next one that fails starts counting anew."""

    __slots__ = ("attempt", "retry")
    retry: Retry

    def __init__(self, *args: Any, retry: Retry) -> None:
        super().__init__(*args)
        self.retry = retry
        self.attempt = 1

    def run(self, tally: Tally, call: Call = call_here) -> None:
        # A failed run asks to be tried again in RecurringTask.run.
        super().run(tally, functools.partial(self._attempt, call))

    def _attempt(
        self, call: Call, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Any
    ) -> None:
        call(fn, args, kwargs)
        self.attempt = 1  # before the next run is queued, which may start at once

    def survived(self) -> None:
        self.attempt = 1  # likewise: the next run that fails starts counting anew


__all__ = ["Retry"]
