"""What a lane allows, as arithmetic: ``max_running``, each rate, a cooldown.

``Limits`` knows no scheduler and no task: it is told of starts and ends, and answers "how
many more may start now?" (``room``), "when does time alone give room for one more,
``taken`` starts from now?" (``more_room_at``) and "which limit holds the next start back,
until when?" (``holding``), as pure functions of its counts and times. The lane engine
(``_lane_engine``) composes one per lane, and ``tests/test_limits.py`` checks it on its own
against a count made from the raw history of starts.

``taken``: starts granted and not made yet (the lane gave its room to tasks that no worker
has taken yet). Each is counted as if it started now: it will start no earlier.

A rate is a sliding window, at most ``limit`` starts in any ``per`` seconds; or ``Smooth``,
starts spaced ``per / limit`` apart with up to ``burst`` at once after a pause (the generic
cell rate algorithm: a leaky bucket that holds ``burst``).
"""

from __future__ import annotations

import math
from collections import deque
from typing import Union

from ._waiting import HeldBy


class Smooth:
    """A rate whose starts are spaced evenly: at most ``limit`` per ``per`` seconds, one each
    ``per / limit`` seconds, and up to ``burst`` at once after a pause long enough.

    ``rates=[Smooth(400, 1.0)]`` starts one task every 2.5 ms, where ``(400, 1.0)`` may start
    all 400 in the first instant of a second and none in the rest of it.
    """

    __slots__ = ("burst", "limit", "per")

    def __init__(self, limit: int, per: float = 1.0, *, burst: int = 1) -> None:
        from ._arguments import check_int, seconds

        if check_int("limit", limit) < 1:
            raise ValueError(f"Smooth: limit must be at least 1, not {limit}")
        if check_int("burst", burst) < 1:
            raise ValueError(f"Smooth: burst must be at least 1, not {burst}")
        self.limit = limit
        self.per = seconds("per", per, positive=True)
        self.burst = burst

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Smooth):
            return NotImplemented
        return (self.limit, self.per, self.burst) == (other.limit, other.per, other.burst)

    def __hash__(self) -> int:
        return hash((Smooth, self.limit, self.per, self.burst))

    def __repr__(self) -> str:
        burst = "" if self.burst == 1 else f", burst={self.burst}"
        return f"Smooth({self.limit}, {self.per!r}{burst})"


Rate = Union[tuple[int, float], Smooth]


class _Window:
    """At most ``limit`` starts in any ``per`` seconds."""

    __slots__ = ("limit", "per", "starts")

    def __init__(self, limit: int, per: float, starts: deque[float]) -> None:
        self.limit = limit
        self.per = per
        self.starts = starts  # those within the last ``per`` seconds, oldest first

    @property
    def rate(self) -> Rate:
        return (self.limit, self.per)

    def room(self, now: float) -> int:
        starts, per = self.starts, self.per
        while starts and starts[0] + per <= now:
            starts.popleft()
        return self.limit - len(starts)  # below zero after the limit was lowered

    def room_at(self, now: float, taken: int) -> float:
        """When the window has room for one more start, ``taken`` more starting now."""
        starts = self.starts
        over = len(starts) + taken - self.limit  # which start must leave first
        if over < 0:
            return now
        return (starts[over] if over < len(starts) else now) + self.per

    def started(self, now: float) -> None:
        self.starts.append(now)

    def history(self) -> deque[float]:
        return self.starts


class _Metered:
    """``Smooth``: the generic cell rate algorithm. ``due`` is the theoretical time of the
    next start at the steady pace; a start is allowed while it is no more than
    ``burst - 1`` intervals ahead of now."""

    __slots__ = ("burst", "due", "interval", "rate")

    def __init__(self, rate: Smooth) -> None:
        self.rate = rate
        self.interval = rate.per / rate.limit
        self.burst = rate.burst
        self.due = -math.inf

    def room(self, now: float) -> int:
        ahead = max(self.due, now) - now  # how far the pace is ahead of now
        return max(0, self.burst - math.ceil(round(ahead / self.interval, 9)))

    def room_at(self, now: float, taken: int) -> float:
        due = max(self.due, now) + taken * self.interval
        return max(now, due - (self.burst - 1) * self.interval)

    def started(self, now: float) -> None:
        self.due = max(self.due, now) + self.interval

    def history(self) -> deque[float]:
        return deque()


class Limits:
    """A lane's limits and what its runs used of them: the lane's own runs and those of the
    lanes inside it."""

    __slots__ = ("cooldown", "last_end", "max_running", "rates", "running")

    def __init__(
        self, max_running: int | None, rates: tuple[Rate, ...], cooldown: float | None
    ) -> None:
        self.max_running = max_running
        self.rates: tuple[_Window | _Metered, ...] = tuple(_make(rate, deque()) for rate in rates)
        self.cooldown = cooldown
        self.running = 0
        self.last_end = -math.inf

    @property
    def timed(self) -> bool:
        """Whether time alone may give room (then the lane may need a timer)."""
        return bool(self.rates) or self.cooldown is not None

    def rate_specs(self) -> tuple[Rate, ...]:
        return tuple(rate.rate for rate in self.rates)

    def room(self, now: float) -> float:
        """How many more may start now (``math.inf``: no limit)."""
        cooldown = self.cooldown
        if cooldown is not None and self.last_end + cooldown > now:
            return 0
        room: float = math.inf
        if self.max_running is not None:
            room = self.max_running - self.running
        for rate in self.rates:
            room = min(room, rate.room(now))
        return room

    def more_room_at(self, now: float, taken: int) -> float:
        """When time alone gives room for one start beyond ``taken`` (starting now); after
        ``now`` if there is none now, ``math.inf`` if only a run's end can give it."""
        if self.max_running is not None and self.running + taken >= self.max_running:
            return math.inf
        when = now
        if self.cooldown is not None:
            when = max(when, self.last_end + self.cooldown)
        for rate in self.rates:
            when = max(when, rate.room_at(now, taken))
        return when

    def holding(self, now: float, taken: int) -> tuple[HeldBy, float] | None:
        """Which limit holds back one more start, ``taken`` starting now, and when it
        lets it (``math.inf`` for max_running: a run's end does); None if none does."""
        if self.max_running is not None and self.running + taken >= self.max_running:
            return "max_running", math.inf
        held: tuple[HeldBy, float] | None = None
        if self.cooldown is not None and self.last_end + self.cooldown > now:
            held = "cooldown", self.last_end + self.cooldown
        for rate in self.rates:
            when = rate.room_at(now, taken)
            if when > now and (held is None or when > held[1]):
                held = "max_starts", when
        return held

    def started(self, now: float) -> None:
        self.running += 1
        for rate in self.rates:
            rate.started(now)

    def ended(self, now: float) -> None:
        self.running -= 1
        self.last_end = now

    def set_rates(self, rates: tuple[Rate, ...], now: float) -> None:
        """New rates, at once: a new window counts the starts within it that the longest
        window so far kept (and no older one, which none kept); a new smooth rate starts
        at its full burst."""
        history: deque[float] = deque()
        for rate in self.rates:
            if isinstance(rate, _Window) and (not history or rate.per > self._longest):
                history = rate.history()
        self.rates = tuple(
            _make(rate, deque(s for s in history if s + rate[1] > now))
            if isinstance(rate, tuple)
            else _make(rate, deque())
            for rate in rates
        )

    @property
    def _longest(self) -> float:
        return max((r.per for r in self.rates if isinstance(r, _Window)), default=0.0)


def _make(rate: Rate, starts: deque[float]) -> _Window | _Metered:
    if isinstance(rate, Smooth):
        return _Metered(rate)
    return _Window(rate[0], rate[1], starts)
