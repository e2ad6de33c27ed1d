"""Clocks: where the executor reads the time, and who wakes the pending heap.

Every time inside the executor is a float of seconds on one monotonic clock. A clock also
gives the wall time, so that a ``run_at`` datetime, or a calendar series' next run, can be
placed on that clock; ``WallTime`` keeps such tasks on time when the wall clock is stepped.
"""

from __future__ import annotations

import datetime
import math
import threading
import time
from typing import Callable, Protocol

from . import _arguments, _threads


class Scheduler(Protocol):
    """A scheduler, as a clock drives it."""

    def promote_due(self) -> None: ...
    def quiet(self) -> bool: ...


class Clock(Protocol):
    def now(self) -> float: ...

    def wall(self) -> float: ...

    def wall_offset(self) -> float:
        """``wall() - now()``: where wall-clock times fall on this clock, as of now."""
        ...

    def attach(self, scheduler: Scheduler) -> bool:
        """Return True if this clock itself promotes the scheduler's due tasks."""
        ...

    def detach(self, scheduler: Scheduler) -> None:
        """The scheduler is closed and has nothing left to promote."""
        ...


class MonotonicClock:
    """Real time: ``time.monotonic`` for intervals, so wall-clock jumps move nothing."""

    now = staticmethod(time.monotonic)

    @staticmethod
    def wall() -> float:
        return time.time()

    @staticmethod
    def wall_offset() -> float:
        # The wall time first: a thread that loses the CPU between the two reads gets an
        # offset too small by that long, which places a wall-clock time late, never early.
        wall = time.time()
        return wall - time.monotonic()

    def attach(self, scheduler: Scheduler) -> bool:
        return False

    def detach(self, scheduler: Scheduler) -> None:
        pass


class ManualClock:
    """Time that moves only when a test says so.

    An executor built with ``clock=ManualClock()`` starts no promoter thread: ``advance()``
    does the promoter's work in the calling thread, so when it returns every task due by the
    new time is in the ready heap and every deadline that passed has been applied. One clock
    can drive several executors. Its wall time starts at the real wall time when the clock
    is made and moves with it. ``settle()`` waits until the executors have done all they
    can before the clock moves again.

    Its wall time starts at ``wall`` (an aware datetime, or a ``time.time()``), by default
    the real wall time when the clock is made, and moves with it; ``step_wall()`` steps it
    alone, as NTP or a laptop waking from sleep steps the system clock, and
    ``advance_to()`` moves time on until the wall clock shows a given moment: so tests of
    calendar schedules (DST nights, clock steps) are deterministic. A wall time beyond the
    years 1 to 9999 that a datetime shows is refused (``ValueError``), moving nothing.
    """

    def __init__(
        self, start: float = 0.0, *, wall: datetime.datetime | float | None = None
    ) -> None:
        if isinstance(start, bool) or not isinstance(start, (int, float)):
            raise TypeError(f"start must be a number of seconds, not {type(start).__name__}")
        if not math.isfinite(start):
            raise ValueError(f"start must be finite, got {start!r}")
        self._now = float(start)
        self._wall_offset = _timestamp("wall", time.time() if wall is None else wall) - self._now
        _check_wall("wall", wall, self.wall())
        self._advancing = threading.Lock()  # two advances at once move time by both
        # Held strongly, as a promoter thread holds its scheduler: an executor dropped
        # without shutdown() still runs its delayed tasks when the clock reaches them.
        self._schedulers: set[Scheduler] = set()

    def now(self) -> float:
        """The current time of this clock, in seconds."""
        return self._now

    def wall(self) -> float:
        """The wall time of this clock, as ``time.time()`` gives it."""
        return self._wall_offset + self._now

    def wall_offset(self) -> float:
        return self._wall_offset

    def advance(self, seconds: float | datetime.timedelta) -> None:
        """Move time forward by ``seconds`` (a number or a ``timedelta``, as ``delay``
        takes) and promote, in this thread, everything that became due."""
        step = _arguments.seconds("seconds", seconds)
        self._move("seconds", seconds, lambda now, wall_offset: (now + step, wall_offset))

    def advance_to(self, moment: datetime.datetime) -> None:
        """Move time forward until the wall clock shows ``moment`` (an aware datetime; a
        naive one is local time) and promote, as ``advance()`` does. A moment the wall
        clock shows already is an error: time never goes back."""
        wall = _timestamp("moment", moment)

        def change(now: float, wall_offset: float) -> tuple[float, float]:
            # Exactly where WallTime places a task due at ``moment``: such a task is due.
            until = wall - wall_offset
            if until < now:
                shown = datetime.datetime.fromtimestamp(wall_offset + now, datetime.timezone.utc)
                raise ValueError(f"moment={moment!r} has passed: the clock shows {shown}")
            return until, wall_offset

        self._move("moment", moment, change)

    def step_wall(self, seconds: float | datetime.timedelta) -> None:
        """Step the wall time alone by ``seconds`` (negative: back), leaving the clock's
        own time where it is, as NTP or a resume from sleep steps the system clock; then
        promote, as ``advance()`` does, what the wall clock has made due."""
        step = _arguments.seconds("seconds", seconds, signed=True)
        self._move("seconds", seconds, lambda now, wall_offset: (now, wall_offset + step))

    def _move(
        self, name: str, value: object, change: Callable[[float, float], tuple[float, float]]
    ) -> None:
        """Set the time and the wall offset to ``change(now, wall_offset)``, then promote.
        ``name`` and ``value``: the argument that asked for it, as an error names it."""
        with self._advancing:
            now, wall_offset = change(self._now, self._wall_offset)
            # Checked before anything moves: a wall time no datetime shows would fail the
            # next expiry or waiting() that shows it, long after this call returned.
            _check_wall(name, value, wall_offset + now)
            self._now, self._wall_offset = now, wall_offset
            schedulers = list(self._schedulers)
        # Outside ``_advancing``: completing the futures of expired tasks runs their
        # callbacks, and one may advance this clock again. Each executor's expired futures
        # are complete before the next executor's promotion, whose policy may wait for them.
        error = None
        for scheduler in schedulers:
            try:
                scheduler.promote_due()
            except BaseException as exc:  # a callback's: it stops no other executor
                error = error or exc
        if error is not None:
            raise error

    def settle(self, timeout: float | None = None) -> None:
        """Wait until every executor on this clock has done all it can without the clock:
        no task is due or running, and every finished task's future is complete, its
        callbacks run. What is left waits for the clock: delayed tasks, retries waiting
        for their backoff, lanes' tasks waiting for a window or a cooldown. Then advance
        the clock, or assert. Raises ``TimeoutError`` if that takes longer than
        ``timeout`` seconds (of real time: a task that never returns, say)."""
        if timeout is not None:
            timeout = _arguments.seconds("timeout", timeout)
        with self._advancing:
            schedulers = list(self._schedulers)
        if any(_threads.owned_by(scheduler) for scheduler in schedulers):
            raise RuntimeError("settle() cannot wait in a task or a callback of an executor")
        give_up = None if timeout is None else time.monotonic() + timeout
        pause = 0.0002
        # Polls: a test helper, which must not cost the executor's own paths anything.
        while not all(scheduler.quiet() for scheduler in schedulers):
            if give_up is not None and time.monotonic() >= give_up:
                raise TimeoutError(f"the executors on {self!r} were still busy after {timeout} s")
            time.sleep(pause)
            pause = min(2 * pause, 0.005)

    def attach(self, scheduler: Scheduler) -> bool:
        self._schedulers.add(scheduler)
        return True

    def detach(self, scheduler: Scheduler) -> None:
        self._schedulers.discard(scheduler)

    def __repr__(self) -> str:
        wall = datetime.datetime.fromtimestamp(self.wall(), datetime.timezone.utc)
        return f"ManualClock(now={self._now!r}, wall={wall.isoformat()})"


# The wall times that an aware datetime shows in every time zone (none is a day off
# UTC): what a ManualClock's wall time may be, and how far wall_datetime() goes.
_UTC = datetime.timezone.utc
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=_UTC)
_DAY = datetime.timedelta(days=1)
_FIRST_WALL = (datetime.datetime.min.replace(tzinfo=_UTC) + _DAY - _EPOCH).total_seconds()
_LAST_WALL = (datetime.datetime.max.replace(tzinfo=_UTC) - _DAY - _EPOCH).total_seconds()


def wall_datetime(wall: float) -> datetime.datetime:
    """``wall`` (a ``time.time()``) as an aware datetime in UTC, to the nearest microsecond;
    a time beyond what every zone can show (a delay of 1e12 s) as the nearest one that is."""
    return datetime.datetime.fromtimestamp(min(max(wall, _FIRST_WALL), _LAST_WALL), _UTC)


def _check_wall(name: str, value: object, wall: float) -> None:
    if not _FIRST_WALL <= wall <= _LAST_WALL:
        shown = repr(value)
        if len(shown) > 40:
            shown = shown[:20] + "..."
        raise ValueError(
            f"{name}={shown} would set the wall clock to {wall!r} (a time.time()), beyond"
            " the years 1 to 9999 that a datetime shows"
        )


def _timestamp(name: str, moment: object) -> float:
    if isinstance(moment, datetime.datetime):
        try:
            return moment.timestamp()
        except (OverflowError, ValueError, OSError):  # a naive time the OS cannot place
            raise ValueError(f"{name}={moment!r} cannot be placed in time") from None
    if isinstance(moment, (int, float)) and not isinstance(moment, bool):
        if math.isfinite(moment):
            return float(moment)
        raise ValueError(f"{name} must be finite, got {moment!r}")
    raise TypeError(f"{name} must be a datetime or a time.time(), not {type(moment).__name__}")


class WallTime:
    """Where the wall clock's times fall on the executor's clock, and the tasks that wait
    for one (a ``run_at`` datetime, a calendar series' next run): kept on time when the
    wall clock is stepped.

    Such a task waits in the pending heap like any other, at the time on the executor's
    (monotonic) clock where its wall time falls as of the last look. The promoter looks
    again before each promotion, and at least every ``PERIOD`` seconds while such a task
    waits: when the wall clock has been stepped (by more than ``margin``), every such task
    is placed anew. So none starts before its wall time (a step back is seen before the
    next promotion), and a step forward makes one late by at most ``PERIOD``. A real
    clock's tasks are placed ``margin`` late: NTP slews the wall clock by up to 0.5 ms a
    second, and a slew smaller than the margin must not make a task early either.
    """

    PERIOD = 1.0

    def __init__(self, clock: Clock, manual: bool) -> None:
        self.clock = clock
        # A ManualClock's wall time moves only by step_wall(): exact, no margin needed.
        self.margin = 0.0 if manual else 0.001
        self.offset = clock.wall_offset()
        self.waiting = 0  # tasks waiting for a wall time, in the pending heap

    def place(self, wall: float) -> float:
        """The time on the executor's clock when the wall clock shows ``wall``."""
        return wall - self.offset + self.margin

    def stepped(self) -> bool:
        """Whether the wall clock was stepped since the last look: if so, the caller
        places every waiting task anew (under the scheduler's lock)."""
        offset = self.clock.wall_offset()
        if abs(offset - self.offset) <= self.margin:
            return False
        self.offset = offset
        return True
