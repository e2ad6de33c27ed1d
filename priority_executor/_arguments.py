"""Checks of the scheduling arguments, and their conversion to times on the executor's clock.

Every check raises before anything is queued, naming the argument, so bad input leaves the
executor exactly as it was.
"""

from __future__ import annotations

import datetime
import functools
import math
from typing import Protocol


class Clock(Protocol):
    """A clock, as the arguments are turned into times on it (see _clock)."""

    def now(self) -> float: ...
    def wall(self) -> float: ...


def check_int(name: str, value: object) -> int:
    """An int; a bool is refused, as ``True`` given for a number is a mistake, not a 1."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    return value


def check_priority(priority: object) -> int:
    return check_int("priority", priority)


def check_policy(policy: object) -> None:
    # A policy class has a sort_key function too, which would only fail at the first task.
    if isinstance(policy, type):
        raise TypeError(
            f"policy must be an instance such as {policy.__name__}(), not the class itself"
        )


def check_callable(fn: object, name: str = "fn") -> None:
    if not callable(fn):
        raise TypeError(f"{name} must be callable, got {fn!r}")


def seconds(name: str, value: object, *, positive: bool = False, signed: bool = False) -> float:
    """A duration in seconds: an int or float, or a ``timedelta``; finite and >= 0 (> 0 if
    ``positive``; of either sign if ``signed``, a step back or forward)."""
    if isinstance(value, datetime.timedelta):
        result = value.total_seconds()
    elif isinstance(value, float):
        result = value
    elif isinstance(value, int) and not isinstance(value, bool):
        try:
            result = float(value)
        except OverflowError:  # as out of range as an infinite float
            result = math.inf
    else:
        raise TypeError(
            f"{name} must be a number of seconds or a timedelta, not {type(value).__name__}"
        )
    if not math.isfinite(result) or (result < 0 and not signed) or (positive and result == 0):
        bound = " and > 0" if positive else "" if signed else " and >= 0"
        shown = repr(value)
        if len(shown) > 40:
            shown = shown[:20] + "..."
        raise ValueError(f"{name} must be finite{bound}, got {shown}")
    return result


def on_clock(clock: Clock, now: float, name: str, moment: datetime.datetime) -> float:
    """A datetime (naive means local time) as a time on ``clock``, read at ``now``."""
    try:
        timestamp = moment.timestamp()
    except (OverflowError, ValueError, OSError):  # a naive time the OS cannot place
        raise ValueError(
            f"{name}={moment!r} cannot be placed in time: a naive datetime is local time,"
            " and this platform converts local times only within a narrower range (give an"
            " aware datetime, or one closer to now)"
        ) from None
    return now + (timestamp - clock.wall())


def due_time(clock: Clock, now: float, delay: object, run_at: object) -> float:
    """When a task submitted at ``now`` becomes due. A past ``run_at`` keeps its past time."""
    if run_at is None:
        return now if delay is None else now + seconds("delay", delay)
    if delay is not None:
        raise ValueError("delay and run_at cannot both be given")
    if not isinstance(run_at, datetime.datetime):
        raise TypeError(f"run_at must be a datetime.datetime, not {type(run_at).__name__}")
    return on_clock(clock, now, "run_at", run_at)


def deadline_time(clock: Clock, now: float, due: float, expires: object) -> float | None:
    """The start deadline of a task submitted at ``now``; it must come after ``due``."""
    if expires is None:
        return None
    deadline = expiry_time(clock, now, expires)
    check_deadline(now, due, deadline)
    return deadline


def expiry_time(clock: Clock, now: float, expires: object) -> float:
    """``expires`` (seconds or timedelta from ``now``, or a datetime) as a time on ``clock``."""
    if isinstance(expires, datetime.datetime):
        return on_clock(clock, now, "expires", expires)
    return now + seconds("expires", expires)


def check_deadline(now: float, due: float, deadline: float) -> None:
    """A start deadline must come after the due time. Apart from ``expiry_time``, for
    ``reschedule()``, which knows a task's due time only under the scheduler's lock."""
    if deadline <= due:
        raise ValueError(
            f"expires must fall after the task's due time (deadline {deadline - now:+.6f} s,"
            f" due {due - now:+.6f} s from now)"
        )


def callable_name(fn: object) -> str:
    """How logs and messages name a task: its callable's qualified name (a partial's
    function's; a callable object's class's), never a repr with an address."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    name = getattr(fn, "__qualname__", None)
    return name if isinstance(name, str) else f"{type(fn).__qualname__} object"
