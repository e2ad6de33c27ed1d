"""Retries: a policy that answers "again, and when?", and the tasks that follow it.

A retry is the same task queued again, with a new due time, in the pending heap like any
delayed task: so it keeps its priority and deadline, and a ``ManualClock`` times it exactly.
The task's extension asks its policy in one place (``Extension.again_in``); the plain path
pays nothing, as a plain task has no extension.
"""

from __future__ import annotations

import logging
import math
import random
from concurrent.futures import BrokenExecutor
from datetime import timedelta
from typing import Any, Callable

from ._arguments import callable_name, check_int, seconds
from ._logs import LOGGER, Named, error_name, fields, in_lane

# Never tried again, whatever ``on`` says: the user wants out, or nothing can run any more.
_NEVER = (KeyboardInterrupt, SystemExit, BrokenExecutor)


class Retry:
    """How a failed task is tried again: ``attempts`` in all; attempt k + 1 is due
    ``min(max_backoff, backoff * factor ** (k - 1))`` seconds after attempt k ended, scaled
    by a uniform random factor in ``[1 - jitter, 1]``; only after an exception that is an
    instance of ``on`` (a class or a tuple of classes). ``budget``: no attempt starts
    later than this many seconds after the first attempt started (the future then gets the
    last attempt's exception), so that attempts and their time limits add up to a bound."""

    __slots__ = ("attempts", "backoff", "budget", "factor", "jitter", "max_backoff", "on")
    attempts: int
    backoff: float
    budget: float | None
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
        budget: float | timedelta | None = None,
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
        set_(self, "budget", None if budget is None else seconds("budget", budget, positive=True))
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
        budget = "" if self.budget is None else f", budget={self.budget!r}"
        return (
            f"Retry({self.attempts}, backoff={self.backoff!r}, factor={self.factor!r},"
            f" max_backoff={self.max_backoff!r}, jitter={self.jitter!r}, on={on}{budget})"
        )


def _rebuild(
    attempts: int,
    backoff: float,
    budget: float | None,
    factor: float,
    jitter: float,
    max_backoff: float,
    on: tuple[type[BaseException], ...],
) -> Retry:
    return Retry(
        attempts,
        backoff=backoff,
        factor=factor,
        max_backoff=max_backoff,
        jitter=jitter,
        on=on,
        budget=budget,
    )


def check_retry(retry: object) -> None:
    if retry is Retry:
        raise TypeError("retry must be an instance such as Retry(3), not the class itself")
    if retry is not None and not isinstance(retry, Retry):
        raise TypeError(f"retry must be a Retry or None, not {type(retry).__name__}")


def log_retry(
    fn: Callable[..., Any],
    lane: Named | None,
    attempt: int,
    attempts: int,
    wait: float,
    exc: BaseException,
) -> None:
    """One line for a retried failure: a retry is expected, its traceback is for debugging
    (the last attempt's exception is in the future). Quiet it by raising the level of the
    ``priority_executor`` logger above WARNING."""
    lines = str(exc).splitlines()
    error = error_name(exc) + (f": {lines[0]}" if lines else "")
    if len(error) > 200 or len(lines) > 1:
        error = error[:200] + "..."
    LOGGER.warning(
        "%s%s failed on attempt %d of %d (%s); retrying in %.3g s",
        callable_name(fn),
        in_lane(lane),
        attempt,
        attempts,
        error,
        wait,
        exc_info=exc if LOGGER.isEnabledFor(logging.DEBUG) else None,
        extra=fields(
            fn, lane, attempt=attempt, attempts=attempts, wait=wait, error=error_name(exc)
        ),
    )


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, not {type(value).__name__}")
    return float(value)


__all__ = ["Retry"]
