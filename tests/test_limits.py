"""A lane's limits as arithmetic (``_limits.Limits``), on their own: every answer against a
count made from the raw history of starts and ends; and smooth rates through a lane, on the
ManualClock."""

from __future__ import annotations

import math
import threading
from typing import Any

import pytest
from helpers import TIMEOUT, wait_until
from hypothesis import given, settings
from hypothesis import strategies as st

from priority_executor import PriorityExecutor, Smooth
from priority_executor._limits import Limits
from priority_executor.testing import ManualClock

# Times on a grid of 1/8 s, exact in binary floating point: a window's edge is then exact.
TICK = 0.125


class History:
    """What a lane's limits must answer, counted from every start and end so far."""

    def __init__(
        self, max_running: int | None, rates: list[tuple[int, float]], cooldown: float | None
    ):
        self.max_running, self.rates, self.cooldown = max_running, rates, cooldown
        self.starts: list[float] = []
        self.running = 0
        self.last_end = -math.inf

    def room(self, now: float, taken: int = 0) -> float:
        if self.cooldown is not None and self.last_end + self.cooldown > now:
            return 0
        room: float = math.inf
        if self.max_running is not None:
            room = self.max_running - self.running - taken
        for limit, per in self.rates:
            inside = sum(1 for s in self.starts if s + per > now)
            room = min(room, limit - inside - taken)
        return room

    def more_room_at(self, now: float, taken: int) -> float:
        """The first time from now at which one more start fits, ``taken`` starting now."""
        if self.max_running is not None and self.running + taken >= self.max_running:
            return math.inf
        starts = [*self.starts, *[now] * taken]
        candidates = {now, *(s + per for s in starts for _, per in self.rates)}
        if self.cooldown is not None:
            candidates.add(self.last_end + self.cooldown)
        for t in sorted(c for c in candidates if c >= now):
            if self.cooldown is not None and self.last_end + self.cooldown > t:
                continue
            if all(sum(1 for s in starts if s + per > t) < limit for limit, per in self.rates):
                return t
        raise AssertionError("no time gives room")  # pragma: no cover


limits_options = st.tuples(
    st.none() | st.integers(1, 4),
    st.lists(st.tuples(st.integers(1, 4), st.integers(1, 16).map(lambda n: n * TICK)), max_size=3),
    st.none() | st.integers(0, 8).map(lambda n: n * TICK),
)
steps = st.lists(
    st.tuples(st.sampled_from(["start", "end", "wait"]), st.integers(0, 8)), max_size=40
)


@settings(max_examples=300, deadline=None)
@given(limits_options, steps, st.integers(0, 3))
def test_limits_answer_as_the_history_of_starts_and_ends_counts(
    options: tuple[Any, Any, Any], script: list[tuple[str, int]], taken: int
) -> None:
    max_running, rates, cooldown = options
    limits = Limits(max_running, tuple(rates), cooldown)
    history = History(max_running, rates, cooldown)
    now = 0.0
    for action, n in script:
        if action == "wait":
            now += n * TICK
        elif action == "start" and history.room(now) > 0:  # the engine starts only then
            limits.started(now)
            history.starts.append(now)
            history.running += 1
        elif action == "end" and history.running:
            limits.ended(now)
            history.running -= 1
            history.last_end = now
        assert limits.room(now) == history.room(now)
        assert limits.more_room_at(now, taken) == history.more_room_at(now, taken)
        held = limits.holding(now, taken)
        if history.room(now, taken) > 0:
            assert held is None
        else:
            assert held is not None
            assert held[1] == history.more_room_at(now, taken) or held[0] == "max_running"


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 10), st.integers(1, 8), st.integers(1, 4), steps)
def test_a_smooth_rate_spaces_its_starts_and_bursts_at_most_burst(
    limit: int, per_ticks: int, burst: int, script: list[tuple[str, int]]
) -> None:
    per = per_ticks * TICK
    limits = Limits(None, (Smooth(limit, per, burst=burst),), None)
    interval = per / limit
    starts: list[float] = []
    now = 0.0
    for action, n in script:
        if action == "wait":
            now += n * TICK
        for _ in range(n):
            if limits.room(now) <= 0:
                assert limits.more_room_at(now, 0) > now
                break
            limits.started(now)
            starts.append(now)
    # However the starts came, any span of time t holds at most burst + t / interval.
    for i, first in enumerate(starts):
        for j in range(i, len(starts)):
            span = starts[j] - first
            assert j - i + 1 <= burst + span / interval + 1e-9


def test_bad_smooth_rates_raise_naming_the_argument() -> None:
    with pytest.raises(ValueError, match="limit"):
        Smooth(0)
    with pytest.raises(ValueError, match="burst"):
        Smooth(5, burst=0)
    with pytest.raises(ValueError, match="per"):
        Smooth(5, 0)
    with pytest.raises(TypeError, match="limit"):
        Smooth(1.5)  # type: ignore[arg-type]


def test_a_smooth_lane_starts_one_task_each_interval_on_the_manual_clock() -> None:
    clock = ManualClock()
    started: list[float] = []
    lock = threading.Lock()

    def record() -> None:
        with lock:
            started.append(clock.now())

    with PriorityExecutor(4, clock=clock) as ex:
        lane = ex.lane(rates=[Smooth(4, 1.0)])  # one each 0.25 s
        assert lane.rates == (Smooth(4, 1.0),)
        futures = [lane.submit(record) for _ in range(8)]
        for _ in range(14):  # to 1.75 s; a smooth rate never catches up on a pause
            clock.settle()
            clock.advance(0.125)
        for future in futures:
            future.result(timeout=TIMEOUT)
    begin = started[0]
    assert [round(t - begin, 6) for t in sorted(started)] == [0.25 * i for i in range(8)]


def test_a_smooth_lane_with_a_burst_starts_the_burst_at_once_then_spaces_the_rest() -> None:
    clock = ManualClock()
    with PriorityExecutor(4, clock=clock) as ex:
        lane = ex.lane("spaced", rates=[Smooth(2, 1.0, burst=3)])
        events = [threading.Event() for _ in range(5)]
        futures = [lane.submit(event.set) for event in events]
        wait_until(lambda: sum(e.is_set() for e in events) == 3, what="the burst to start")
        clock.settle()
        assert lane.stats().throttled == 2
        (w,) = [w for w in lane.waiting() if w.state == "throttled"][:1]
        assert w.held_by == "max_starts"
        clock.advance(0.5)
        wait_until(lambda: sum(e.is_set() for e in events) == 4, what="one more at 0.5 s")
        clock.advance(0.5)
        for future in futures:
            future.result(timeout=TIMEOUT)
        assert repr(lane).count("Smooth(2, 1.0, burst=3)") == 1
