"""Clocks: where the executor reads the time, and who wakes the pending heap.

Every time inside the executor is a float of seconds on one monotonic clock. A clock also
gives the wall time, so that a ``run_at`` datetime can be turned into a point on that clock.
"""

from __future__ import annotations

import datetime
import math
import threading
import time
from typing import Protocol

from . import _arguments, _threads


class Scheduler(Protocol):
    """A scheduler, as a clock drives it."""

    def promote_due(self) -> None: ...
    def quiet(self) -> bool: ...


class Clock(Protocol):
    def now(self) -> float: ...

    def wall(self) -> float: ...

    def attach(self, scheduler: Scheduler) -> bool:
        """Return True if this clock itself promotes the scheduler's due tasks."""
        ...

    def detach(self, scheduler: Scheduler) -> None:
        """The scheduler is closed and has nothing left to promote."""
        ...


class MonotonicClock:
    """Real time: ``time.monotonic`` for intervals, so wall-clock jumps move nothing."""

    now = staticmethod(time.monotonic)
    wall = staticmethod(time.time)

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
    """

    def __init__(self, start: float = 0.0) -> None:
        if isinstance(start, bool) or not isinstance(start, (int, float)):
            raise TypeError(f"start must be a number of seconds, not {type(start).__name__}")
        if not math.isfinite(start):
            raise ValueError(f"start must be finite, got {start!r}")
        self._now = float(start)
        self._wall_offset = time.time() - self._now
        self._advancing = threading.Lock()  # two advances at once move time by both
        # Held strongly, as a promoter thread holds its scheduler: an executor dropped
        # without shutdown() still runs its delayed tasks when the clock reaches them.
        self._schedulers: set[Scheduler] = set()

    def now(self) -> float:
        """The current time of this clock, in seconds."""
        return self._now

    def wall(self) -> float:
        return self._wall_offset + self._now

    def advance(self, seconds: float | datetime.timedelta) -> None:
        """Move time forward by ``seconds`` (a number or a ``timedelta``, as ``delay``
        takes) and promote, in this thread, everything that became due."""
        step = _arguments.seconds("seconds", seconds)
        with self._advancing:
            self._now += step
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
        return f"ManualClock(now={self._now!r})"
