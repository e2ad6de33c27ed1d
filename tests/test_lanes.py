"""Lanes: per-kind limits (max_running, max_starts per window, cooldown) on shared workers."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import sys
import threading
import time
from concurrent.futures import CancelledError, Executor, Future, ThreadPoolExecutor, wait
from datetime import timedelta
from typing import Any

import pytest
from helpers import TIMEOUT, blocked_worker, counts, stats_fields, wait_until

from priority_executor import ExecutorStats, Lane, PriorityExecutor
from priority_executor.testing import ManualClock


class Log:
    """Task bodies that record when they start (on the executor's clock) and, if asked,
    wait for the test to release them."""

    def __init__(self, clock: ManualClock | None = None) -> None:
        self.clock = clock
        self.lock = threading.Lock()
        self.started: list[tuple[str, float]] = []
        self.gates: dict[str, threading.Event] = {}
        self.active = 0
        self.peak = 0

    def job(self, label: str, *, hold: bool = False) -> Any:
        gate = self.gates[label] = threading.Event()
        if not hold:
            gate.set()

        def body() -> str:
            now = self.clock.now() if self.clock is not None else time.monotonic()
            with self.lock:
                self.started.append((label, now))
                self.active += 1
                self.peak = max(self.peak, self.active)
            try:
                assert gate.wait(TIMEOUT)
            finally:
                with self.lock:
                    self.active -= 1
            return label

        return body

    def release(self, label: str) -> None:
        self.gates[label].set()

    def labels(self) -> list[str]:
        with self.lock:
            return [label for label, _ in self.started]

    def wait_for(self, count: int) -> None:
        wait_until(lambda: len(self.started) >= count, what=f"{count} starts")


def settle(ex: PriorityExecutor) -> None:
    """Wait until no task is ready or running: the workers did all they can for now."""
    wait_until(lambda: not ex.stats().ready and not ex.stats().running, what="idle workers")


# -- the API --------------------------------------------------------------------------------


def test_a_lane_is_an_executor_with_the_executors_surface() -> None:
    with PriorityExecutor(2) as ex:
        lane = ex.lane("io")
        assert isinstance(lane, Executor)
        assert isinstance(lane, Lane)
        assert lane.name == "io"
        assert lane.submit(pow, 2, 5).result(timeout=TIMEOUT) == 32
        assert list(lane.map(str, range(3))) == ["0", "1", "2"]
        assert "io" in repr(lane)
        assert ex.lane(max_running=2, max_starts=3, per=2).name is None


def test_named_lanes_are_one_per_name_and_keep_their_options() -> None:
    with PriorityExecutor(1) as ex:
        lane = ex.lane("github", max_starts=10, per=60)
        assert ex.lane("github") is lane
        assert ex.lane("github", max_starts=10) is lane
        with pytest.raises(ValueError, match="max_starts"):
            ex.lane("github", max_starts=20)
        with pytest.raises(ValueError, match="cooldown"):
            ex.lane("github", cooldown=1)
        assert ex.lane() is not ex.lane()
        lane.submit(int).result(timeout=TIMEOUT)  # the refusals changed nothing


def test_an_idle_named_lane_without_options_is_forgotten() -> None:
    with PriorityExecutor(1) as ex:
        ex.lane("tenant").submit(int).result(timeout=TIMEOUT)
        gc.collect()
        # Nothing references it, and it had nothing to lose: a lane of that name may be
        # made anew, with options.
        assert "tenant" not in ex.lanes()
        assert ex.lane("tenant", max_running=3).submit(int).result(timeout=TIMEOUT) == 0


def test_a_named_lane_made_with_options_keeps_them_until_its_shutdown() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        ex.lane("device", max_running=1, cooldown=5).submit(int).result(timeout=TIMEOUT)
        clock.advance(60)  # long past the cooldown
        gc.collect()
        with pytest.raises(ValueError, match="cooldown"):
            ex.lane("device", cooldown=1)
        device = ex.lane("device")
        assert (device.max_running, device.cooldown) == (1, 5.0)
        device.submit(int).result(timeout=TIMEOUT)
        # Dropped, the lane keeps its limit: the next task waits for the cooldown.
        del device
        gc.collect()
        log = Log(clock)
        ex.lane("device").submit(log.job("next"))
        clock.settle()
        assert log.labels() == []
        clock.advance(5)
        log.wait_for(1)
        # Shut down, it frees its name.
        ex.lane("device").shutdown()
        assert "device" not in ex.lanes()
        assert ex.lane("device", cooldown=1).submit(int).result(timeout=TIMEOUT) == 0


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"max_running": 0}, ValueError, "max_running"),
        ({"max_running": True}, TypeError, "max_running"),
        ({"max_running": 1.5}, TypeError, "max_running"),
        ({"max_starts": 0}, ValueError, "max_starts"),
        ({"max_starts": 5, "per": 0}, ValueError, "per"),
        ({"max_starts": 5, "per": -1}, ValueError, "per"),
        ({"max_starts": 5, "per": float("nan")}, ValueError, "per"),
        ({"max_starts": 5, "per": "1s"}, TypeError, "per"),
        ({"cooldown": -0.1}, ValueError, "cooldown"),
        ({"cooldown": True}, TypeError, "cooldown"),
        ({"priority": True}, TypeError, "priority"),
        ({"priority": 1.0}, TypeError, "priority"),
        ({"name": 42}, TypeError, "name"),
    ],
)
def test_bad_lane_options_raise_at_lane_and_change_nothing(
    options: dict[str, Any], error: type[Exception], match: str
) -> None:
    with PriorityExecutor(1) as ex:
        name = options.pop("name", "x")
        with pytest.raises(error, match=match):
            ex.lane(name, **options)
        assert ex.lane("x", max_running=2).submit(int).result(timeout=TIMEOUT) == 0


def test_timedelta_options() -> None:
    with PriorityExecutor(1) as ex:
        lane = ex.lane(max_starts=2, per=timedelta(seconds=3), cooldown=timedelta(0))
        assert lane.submit(int).result(timeout=TIMEOUT) == 0


def test_priority_none_means_the_lanes_default_and_a_calls_own_wins() -> None:
    clock = ManualClock()
    log = Log(clock)
    with PriorityExecutor(1, clock=clock) as ex:
        urgent = ex.lane(priority=5)
        with blocked_worker(ex):
            ex.submit(log.job("plain"))
            urgent.submit(log.job("lane default"))
            urgent.submit(log.job("own low"), priority=-1)
            ex.submit(log.job("plain high"), priority=9)
            assert [w.priority for w in ex.waiting()] == [9, 5, 0, -1]
        log.wait_for(4)
    assert log.labels() == ["plain high", "lane default", "plain", "own low"]


# -- limits ---------------------------------------------------------------------------------


def test_max_running_bounds_the_lanes_concurrency_and_no_other_lane_waits() -> None:
    log = Log()
    with PriorityExecutor(4) as ex:
        lane = ex.lane(max_running=1)
        held = [lane.submit(log.job(f"lane{i}", hold=True)) for i in range(3)]
        log.wait_for(1)
        # The lane's other tasks are throttled: they hold back no other task.
        others = [ex.submit(log.job(f"other{i}")) for i in range(20)]
        for future in others:
            future.result(timeout=TIMEOUT)
        stats = ex.stats()
        assert (stats.throttled, stats.running) == (2, 1)
        assert stats_fields(ex) == stats_fields(ex)  # a consistent snapshot
        assert lane.stats().throttled == 2
        for i in range(3):
            log.release(f"lane{i}")
        assert [f.result(timeout=TIMEOUT) for f in held] == ["lane0", "lane1", "lane2"]
    assert [label for label in log.labels() if label.startswith("lane")] == [
        "lane0",
        "lane1",
        "lane2",
    ]


def test_max_running_two_runs_two_at_once() -> None:
    log = Log()
    with PriorityExecutor(6) as ex:
        lane = ex.lane(max_running=2)
        futures = [lane.submit(log.job(f"t{i}", hold=True)) for i in range(6)]
        log.wait_for(2)
        wait_until(lambda: ex.stats().throttled == 4, what="four throttled")
        assert log.active == 2
        for i in range(6):
            log.release(f"t{i}")
        for future in futures:
            future.result(timeout=TIMEOUT)
    assert log.peak == 2


def test_throttled_tasks_start_in_policy_order_within_their_lane() -> None:
    log = Log()
    with PriorityExecutor(2) as ex:
        lane = ex.lane(max_running=1)
        first = lane.submit(log.job("first", hold=True))
        log.wait_for(1)
        lane.submit(log.job("low"), priority=-5)
        lane.submit(log.job("high"), priority=5)
        lane.submit(log.job("normal"))
        wait_until(lambda: ex.stats().throttled == 3, what="three throttled")
        assert [w.state for w in ex.waiting()] == ["throttled"] * 3
        log.release("first")
        first.result(timeout=TIMEOUT)
        log.wait_for(4)
    assert log.labels() == ["first", "high", "normal", "low"]


def test_max_starts_is_a_sliding_window() -> None:
    clock = ManualClock()
    log = Log(clock)
    with PriorityExecutor(2, clock=clock) as ex:
        lane = ex.lane(max_starts=2, per=10)
        lane.submit(log.job("a"))
        log.wait_for(1)
        clock.advance(4)
        for label in "bcde":
            lane.submit(log.job(label))
        log.wait_for(2)
        settle(ex)
        assert ex.stats().throttled == 3
        clock.advance(5.9)  # t = 9.9: "a" still in the window
        settle(ex)
        assert len(log.started) == 2
        clock.advance(0.1)  # t = 10: "a" left it
        log.wait_for(3)
        settle(ex)
        assert len(log.started) == 3
        clock.advance(4)  # t = 14: "b" left it
        log.wait_for(4)
        clock.advance(6)
        log.wait_for(5)
    assert log.started == [("a", 0), ("b", 4), ("c", 10), ("d", 14), ("e", 20)]


def test_cooldown_counts_from_the_lanes_latest_end() -> None:
    clock = ManualClock()
    log = Log(clock)
    with PriorityExecutor(2, clock=clock) as ex:
        lane = ex.lane("device", max_running=1, cooldown=timedelta(seconds=0.5))
        first = lane.submit(log.job("first", hold=True))
        second = lane.submit(log.job("second"))
        log.wait_for(1)
        clock.advance(3)
        log.release("first")  # ends at t = 3
        first.result(timeout=TIMEOUT)
        settle(ex)
        assert not second.done()
        assert ex.stats().throttled == 1
        clock.advance(0.4)
        settle(ex)
        assert not second.done()
        clock.advance(0.1)
        assert second.result(timeout=TIMEOUT) == "second"
    assert log.started == [("first", 0), ("second", 3.5)]


def test_a_lane_gives_its_room_once() -> None:
    clock = ManualClock()
    log = Log(clock)
    ex = PriorityExecutor(1, clock=clock)
    try:
        lane = ex.lane("device", max_running=1, cooldown=0.5)
        first, *_ = [lane.submit(log.job(label, hold=True)) for label in ("a", "b", "c", "d")]
        log.wait_for(1)
        log.release("a")  # ends at t = 0: b, c and d are throttled by the cooldown
        first.result(timeout=TIMEOUT)
        wait_until(lambda: lane.stats().throttled == 3, what="three throttled")
        clock.advance(0.5)  # room for one: b starts, c and d wait for it to end
        log.wait_for(2)
        assert log.labels() == ["a", "b"]
        assert [w.state for w in lane.waiting()] == ["throttled", "throttled"]
    finally:
        for label in log.gates:
            log.release(label)
        ex.shutdown(cancel_futures=True)


def states(lane: Lane) -> list[str]:
    return [w.state for w in lane.waiting()]


def cooling_down(ex: PriorityExecutor, log: Log, cooldown: float) -> tuple[Lane, Future[Any]]:
    """A lane of one task at a time whose task a ended at t = 0, with b and c throttled by
    its cooldown. Returns the lane and b's future."""
    lane = ex.lane(max_running=1, cooldown=cooldown)
    lane.submit(log.job("a")).result(timeout=TIMEOUT)
    b = lane.submit(log.job("b"))
    lane.submit(log.job("c"))
    wait_until(lambda: lane.stats().throttled == 2, what="two throttled")
    return lane, b


def test_a_claim_in_the_lane_leaves_the_room_with_the_task_it_was_given_to() -> None:
    clock = ManualClock()
    log = Log(clock)
    with PriorityExecutor(1, clock=clock) as ex:
        lane, _ = cooling_down(ex, log, 0.5)
        with blocked_worker(ex):
            clock.advance(0.5)  # room for one: b, which waits for the worker
            assert states(lane) == ["ready", "throttled"]
            later = lane.submit(log.job("later"), delay=5)
            assert later.cancel()  # the lane looks again: b still holds the room
            wait_until(lambda: lane.stats().cancelled == 1, what="the cancel")
            assert states(lane) == ["ready", "throttled"]
        log.wait_for(2)
        settle(ex)
        clock.advance(0.5)  # after b's end
        log.wait_for(3)
    assert log.started == [("a", 0), ("b", 0.5), ("c", 1.0)]


def test_a_rescheduled_task_keeps_the_room_it_was_given() -> None:
    clock = ManualClock()
    log = Log(clock)
    with PriorityExecutor(1, clock=clock) as ex:
        lane, b = cooling_down(ex, log, 0.5)
        with blocked_worker(ex):
            clock.advance(0.5)  # room for one: b, which waits for the worker
            assert ex.reschedule(b, priority=3)  # its copy takes over that room
            assert states(lane) == ["ready", "throttled"]
        log.wait_for(2)
        settle(ex)
        assert states(lane) == ["throttled"]
        clock.advance(0.5)
        log.wait_for(3)
    assert log.started == [("a", 0), ("b", 0.5), ("c", 1.0)]


def test_a_window_sliding_while_the_room_waits_for_a_worker_gives_more_room() -> None:
    clock = ManualClock()
    log = Log(clock)
    with PriorityExecutor(1, clock=clock) as ex:
        lane = ex.lane(max_starts=2, per=1)
        lane.submit(log.job("a")).result(timeout=TIMEOUT)
        clock.advance(0.5)
        lane.submit(log.job("b")).result(timeout=TIMEOUT)  # the window is full until t = 1
        for label in ("c", "d", "e"):
            lane.submit(log.job(label))
        wait_until(lambda: lane.stats().throttled == 3, what="three throttled")
        with blocked_worker(ex):
            clock.advance(0.5)  # a's start leaves the window: room for c
            assert states(lane) == ["ready", "throttled", "throttled"]
            clock.advance(0.5)  # b's too, while c still holds its room: room for d
            assert states(lane) == ["ready", "ready", "throttled"]
        log.wait_for(4)
        settle(ex)
        clock.advance(1)
        log.wait_for(5)
    assert log.started == [("a", 0), ("b", 0.5), ("c", 1.5), ("d", 1.5), ("e", 2.5)]


def test_a_task_given_room_that_starts_late_fills_the_window_from_its_start() -> None:
    clock = ManualClock()
    log = Log(clock)
    with PriorityExecutor(2, clock=clock) as ex:
        lane = ex.lane(max_starts=1, per=1)
        lane.submit(log.job("a")).result(timeout=TIMEOUT)
        b = lane.submit(log.job("b", hold=True))
        lane.submit(log.job("c"))
        wait_until(lambda: lane.stats().throttled == 2, what="two throttled")
        with blocked_worker(ex), blocked_worker(ex):
            clock.advance(1)  # room for b, which waits for a worker
            clock.advance(1)
        log.wait_for(2)  # b starts at t = 2, and runs on: c waits until t = 3, and only for that
        clock.advance(0.5)
        assert states(lane) == ["throttled"]
        clock.advance(0.5)
        log.wait_for(3)
        assert b.running()
        log.release("b")
    assert log.started == [("a", 0), ("b", 2), ("c", 3)]


def test_a_task_given_room_that_is_throttled_again_gives_it_back() -> None:
    clock = ManualClock()
    log = Log(clock)
    with PriorityExecutor(1, clock=clock) as ex:
        lane, _ = cooling_down(ex, log, 1)
        with blocked_worker(ex):
            clock.advance(1)  # room for b, which waits for the worker
            lane.submit(log.job("first"), priority=1)  # comes first, and takes that room
        log.wait_for(2)
        # first ended at t = 1: the worker finds b in the cooldown, and throttles it again
        wait_until(lambda: lane.stats().throttled == 2, what="b throttled again")
        clock.advance(1)
        log.wait_for(3)
        settle(ex)
        clock.advance(1)
        log.wait_for(4)
    assert log.started == [("a", 0), ("first", 1), ("b", 2), ("c", 3)]


def test_a_window_passing_releases_within_milliseconds_on_the_real_clock() -> None:
    with PriorityExecutor(2) as ex:
        lane = ex.lane(max_starts=1, per=0.2)
        start = time.monotonic()
        futures = [lane.submit(time.monotonic) for _ in range(4)]
        starts = [future.result(timeout=TIMEOUT) - start for future in futures]
    for i in range(1, 4):
        assert starts[i] - starts[i - 1] >= 0.2 - 1e-3
    assert starts[3] < 0.6 + 0.5  # generous: a loaded machine


def test_limits_combine() -> None:
    clock = ManualClock()
    log = Log(clock)
    with PriorityExecutor(3, clock=clock) as ex:
        lane = ex.lane(max_running=2, max_starts=3, per=10, cooldown=1)
        futures = [lane.submit(log.job(f"t{i}", hold=True)) for i in range(5)]
        log.wait_for(2)  # max_running
        wait_until(lambda: ex.stats().throttled == 3, what="three throttled")
        log.release("t0")
        futures[0].result(timeout=TIMEOUT)
        wait_until(lambda: ex.stats().running == 1, what="one running")
        assert ex.stats().throttled == 3  # the cooldown
        clock.advance(1)  # t = 1: the cooldown passed; the third start of the window
        log.wait_for(3)
        log.release("t1")
        log.release("t2")
        futures[2].result(timeout=TIMEOUT)
        settle(ex)
        clock.advance(1)  # t = 2: the cooldown passed, but the window is full until t = 10
        settle(ex)
        assert len(log.started) == 3
        clock.advance(8)  # t = 10: the two starts at t = 0 left the window
        log.wait_for(5)
        for i in range(3, 5):
            log.release(f"t{i}")
        for future in futures:
            future.result(timeout=TIMEOUT)
    assert [t for _, t in log.started] == [0, 0, 1, 10, 10]


# -- with deadlines, cancel, shutdown, series, backends -------------------------------------


def test_a_throttled_task_can_be_cancelled_and_expires() -> None:
    clock = ManualClock()
    log = Log(clock)
    with PriorityExecutor(2, clock=clock) as ex:
        lane = ex.lane(max_running=1)
        busy = lane.submit(log.job("busy", hold=True))
        log.wait_for(1)
        cancelled = lane.submit(log.job("cancelled"))
        expiring = lane.submit(log.job("expiring"), expires=5)
        last = lane.submit(log.job("last"))
        wait_until(lambda: ex.stats().throttled == 3)
        assert cancelled.cancel()
        assert cancelled.done()
        clock.advance(5)
        assert expiring.cancelled()
        assert lane.stats().throttled == 1
        log.release("busy")
        assert last.result(timeout=TIMEOUT) == "last"
        assert busy.result(timeout=TIMEOUT) == "busy"
    assert log.labels() == ["busy", "last"]
    stats = lane.stats()
    assert (stats.completed, stats.cancelled, stats.expired) == (2, 1, 1)
    assert ex.stats().expired == 1


def test_shutdown_with_cancel_futures_cancels_throttled_tasks() -> None:
    log = Log()
    ex = PriorityExecutor(2)
    lane = ex.lane(max_running=1)
    busy = lane.submit(log.job("busy", hold=True))
    log.wait_for(1)
    throttled = [lane.submit(log.job(f"t{i}")) for i in range(3)]
    wait_until(lambda: ex.stats().throttled == 3)
    ex.shutdown(wait=False, cancel_futures=True)
    assert all(future.cancelled() for future in throttled)
    log.release("busy")
    ex.shutdown()
    assert busy.result() == "busy"
    assert ex.stats().cancelled == 3


def test_shutdown_waits_for_throttled_tasks() -> None:
    log = Log()
    ex = PriorityExecutor(2)
    lane = ex.lane(max_running=1)
    busy = lane.submit(log.job("busy", hold=True))
    log.wait_for(1)
    throttled = [lane.submit(log.job(f"t{i}")) for i in range(3)]
    wait_until(lambda: ex.stats().throttled == 3)
    threading.Timer(0.05, log.release, ("busy",)).start()
    ex.shutdown(wait=True)
    assert busy.done()
    assert [future.result(timeout=0) for future in throttled] == ["t0", "t1", "t2"]


def test_closing_a_lane_leaves_the_executor_and_other_lanes_running() -> None:
    log = Log()
    with PriorityExecutor(2) as ex:
        other = ex.lane("other")
        with ex.lane("closing", max_running=1) as lane:
            busy = lane.submit(log.job("busy", hold=True))
            log.wait_for(1)
            waiting = lane.submit(log.job("waiting"))
            series = lane.submit_recurring(log.job("series"), interval=60, delay=60)
            threading.Timer(0.05, log.release, ("busy",)).start()
        # The with block waited for the lane's tasks, and cancelled its series.
        assert busy.done()
        assert waiting.result(timeout=0) == "waiting"
        assert series.cancelled()
        with pytest.raises(RuntimeError, match="lane"):
            lane.submit(int)
        assert other.submit(int).result(timeout=TIMEOUT) == 0
        assert ex.submit(int).result(timeout=TIMEOUT) == 0
        # Its name stays taken: a lookup without its limits is refused.
        with pytest.raises(RuntimeError, match="'closing' was shut down"):
            ex.lane("closing")


def test_closing_a_lane_with_cancel_futures_cancels_only_its_waiting_tasks() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        lane = ex.lane()
        with blocked_worker(ex):
            mine = [lane.submit(int), lane.submit(int, delay=5)]
            theirs = ex.submit(int)
            lane.shutdown(wait=False, cancel_futures=True)
            assert all(future.cancelled() for future in mine)
        assert theirs.result(timeout=TIMEOUT) == 0
        assert lane.stats().cancelled == 2


def test_a_series_in_a_lane_obeys_its_limits() -> None:
    clock = ManualClock()
    log = Log(clock)
    with PriorityExecutor(2, clock=clock) as ex:
        lane = ex.lane(max_starts=1, per=10)
        series = lane.submit_recurring(log.job("run"), interval=1)
        log.wait_for(1)
        for _ in range(30):
            clock.advance(1)
            settle(ex)
        series.cancel()
    assert [t for _, t in log.started] == [0, 10, 20, 30]


def test_a_backend_handed_off_task_counts_as_running() -> None:
    log = Log()
    with ThreadPoolExecutor(4) as backend, PriorityExecutor(4, backend=backend) as ex:
        lane = ex.lane(max_running=1)
        futures = [lane.submit(log.job(f"t{i}", hold=True)) for i in range(3)]
        log.wait_for(1)
        wait_until(lambda: ex.stats().throttled == 2)
        assert log.active == 1
        for i in range(3):
            log.release(f"t{i}")
        assert [future.result(timeout=TIMEOUT) for future in futures] == ["t0", "t1", "t2"]
    assert log.peak == 1


def test_waiting_shows_throttled_tasks_with_their_lane() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        lane = ex.lane("api", max_starts=1, per=60)
        lane.submit(int).result(timeout=TIMEOUT)
        throttled = lane.submit(str, priority=3)
        later = lane.submit(int, delay=5)
        settle(ex)
        snapshot = ex.waiting()
        assert [(w.future, w.state, w.lane) for w in snapshot] == [
            (throttled, "throttled", "api"),
            (later, "scheduled", "api"),
        ]
        other = ex.submit(int, delay=1)
        assert [w.future for w in lane.waiting()] == [throttled, later]
        assert [w.future for w in ex.waiting()] == [throttled, other, later]
        clock.advance(60)
        assert throttled.result(timeout=TIMEOUT) == ""
        ex.shutdown(cancel_futures=True)
    with pytest.raises(CancelledError):
        later.result(timeout=0)


def test_a_task_no_worker_looked_at_yet_is_counted_cancelled_rescheduled_and_run() -> None:
    # A due task of a lane waits in the executor's intake until a worker looks: it is the
    # lane's all the same, for its stats, cancel(), reschedule() and the lane's shutdown.
    with PriorityExecutor(1) as ex:
        lane = ex.lane(max_running=1)
        with blocked_worker(ex) as (release, _):
            kept, cancelled, moved = (lane.submit(int, i) for i in (1, 2, 3))
            assert cancelled.cancel()
            assert ex.reschedule(moved, priority=5)
            # One may start when a worker comes; the other is held back by max_running.
            assert lane.stats() == stats_of(ready=1, throttled=1, cancelled=1)
            last = lane.submit(int, 4)
            lane.shutdown(wait=False)
            release.set()
            results = [future.result(timeout=TIMEOUT) for future in (kept, moved, last)]
            assert results == [1, 3, 4]
        lane.shutdown(wait=True)
        assert lane.stats() == stats_of(completed=3, cancelled=1)


def stats_of(**nonzero: int) -> ExecutorStats:
    return ExecutorStats(**counts(**nonzero), retries=0)


def test_lane_stats_count_only_the_lanes_tasks() -> None:
    with PriorityExecutor(2) as ex:
        lane = ex.lane()
        lane.submit(int).result(timeout=TIMEOUT)
        failing = lane.submit(int, "x")
        with pytest.raises(ValueError):
            failing.result(timeout=TIMEOUT)
        ex.submit(int).result(timeout=TIMEOUT)
        stats = lane.stats()
        assert (stats.completed, stats.failed) == (1, 1)
        assert ex.stats().completed == 2


def test_each_task_is_in_exactly_one_field_under_load() -> None:
    with PriorityExecutor(4) as ex:
        lanes = [ex.lane(max_running=1), ex.lane(max_starts=50, per=0.05), ex.lane(cooldown=0)]
        futures = [lanes[i % 3].submit(int, i) for i in range(3000)]
        futures += [ex.submit(int, i) for i in range(1000)]
        for _ in range(20):
            assert sum(stats_fields(ex).values()) == len(futures)
        for future in futures:
            future.result(timeout=TIMEOUT)
    assert ex.stats().completed == 4000
    assert sum(lane.stats().completed for lane in lanes) == 3000


@pytest.mark.parametrize("cancel_futures", [False, True])
def test_submits_cancels_and_shutdown_racing_keep_every_limit_and_lose_nothing(
    cancel_futures: bool,
) -> None:
    ex = PriorityExecutor(6)
    lanes = [ex.lane(f"lane{i}", max_running=i + 1) for i in range(3)]
    lanes.append(ex.lane("window", max_starts=200, per=0.05, max_running=2))
    active = [0] * len(lanes)
    peaks = [0] * len(lanes)
    lock = threading.Lock()

    def body(i: int) -> int:
        with lock:
            active[i] += 1
            peaks[i] = max(peaks[i], active[i])
        time.sleep(0.0005)
        with lock:
            active[i] -= 1
        return i

    futures: list[Any] = []
    futures_lock = threading.Lock()

    def producer(seed: int) -> None:
        for n in range(300):
            i = (seed + n) % len(lanes)
            try:
                future = lanes[i].submit(body, i, expires=0.2 if n % 7 == 0 else None)
            except RuntimeError:
                return  # shut down
            if n % 5 == 0:
                future.cancel()
            with futures_lock:
                futures.append(future)

    producers = [threading.Thread(target=producer, args=(seed,)) for seed in range(4)]
    for thread in producers:
        thread.start()
    time.sleep(0.05)
    ex.shutdown(wait=True, cancel_futures=cancel_futures)
    for thread in producers:
        thread.join(TIMEOUT)
    assert all(future.done() for future in futures)
    assert all(peak <= i + 1 for i, peak in enumerate(peaks[:3]))
    assert peaks[3] <= 2
    stats = ex.stats()
    assert stats.scheduled == stats.ready == stats.throttled == stats.running == 0
    assert stats.completed + stats.cancelled + stats.expired == len(futures)
    assert sum(sum(dataclasses.astuple(lane.stats())) for lane in lanes) == len(futures)


def test_a_hundred_thousand_idle_named_lanes_cost_no_memory() -> None:
    # One lane per tenant, each used once: a lane without options is forgotten once idle,
    # one with options once shut down, but for its name, which stays taken (one block: the
    # str), so memory does not grow with the number of tenants ever seen by more than their
    # names. Counted in the interpreter's allocated blocks (tracemalloc would triple the
    # test's time): 100k live lanes would hold over a million.
    with PriorityExecutor(2) as ex:
        ex.lane("warm-up", max_running=1).submit(int).result(timeout=TIMEOUT)
        gc.collect()
        before = sys.getallocatedblocks()
        for batch in range(100):
            futures = []
            for i in range(1000):
                if i % 2:
                    futures.append(ex.lane(f"tenant-{batch}-{i}").submit(int))
                else:
                    with ex.lane(f"tenant-{batch}-{i}", max_running=1) as lane:
                        futures.append(lane.submit(int))
            assert not wait(futures, timeout=TIMEOUT).not_done
            del futures
        settle(ex)
        gc.collect()
        after = sys.getallocatedblocks()
        names = 50_000  # of the lanes made with options, shut down
        assert after <= 1.1 * before + names, f"{after - before} blocks left by 100k idle lanes"
        assert ex.stats().completed == 100_001
        assert list(ex.lanes()) == ["warm-up"]


@pytest.mark.parametrize("round_", range(10))
def test_a_runs_end_never_waits_behind_a_worker_that_waits_for_it(round_: int) -> None:
    # The end of a lane's run is posted without the lock, and counted by the next worker
    # to take it. While the other worker holds the lock and finds only the lane's throttled
    # tasks, a posted end must still be counted: that worker wakes a parked one. Producers
    # kept a few tasks ahead (max_waiting) make the other worker look for each new one; a
    # poller taking the lock makes workers park behind one another.
    producers, each = 8, 150
    ex = PriorityExecutor(2, max_waiting=5)
    lane = ex.lane(max_running=1)
    futures: list[Any] = []
    stop = threading.Event()

    def produce() -> None:
        with contextlib.suppress(RuntimeError):  # shut down below, if this test fails
            futures.extend((ex if i % 5 else lane).submit(int, i) for i in range(each))

    def poll() -> None:
        while not stop.is_set():
            ex.stats()

    threads = [threading.Thread(target=produce) for _ in range(producers)]
    poller = threading.Thread(target=poll)
    for thread in (*threads, poller):
        thread.start()
    try:
        for thread in threads:
            thread.join(TIMEOUT / 2)
            assert not thread.is_alive(), "submits blocked: the lane's tasks stopped starting"
        total = sum(future.result(timeout=TIMEOUT) for future in futures)
        assert total == producers * sum(range(each))
    finally:
        stop.set()
        poller.join(TIMEOUT)
        ex.shutdown(wait=False, cancel_futures=True)  # not wait: a hang fails, and no more


@pytest.mark.parametrize("round_", range(5))
def test_a_lanes_shutdown_racing_its_submits_waits_for_every_submit_that_returned(
    round_: int,
) -> None:
    # Each submit either raises, or returns a future whose task runs before the lane's
    # shutdown(wait=True) returns: none runs after it.
    with PriorityExecutor(3) as ex:
        lane = ex.lane(max_running=2)
        shut = threading.Event()
        late: list[int] = []
        accepted: list[Any] = []
        go = threading.Barrier(5, timeout=TIMEOUT)

        def task(i: int) -> None:
            if shut.is_set():
                late.append(i)

        def produce(base: int) -> None:
            go.wait()
            for i in range(base, base + 2000):
                try:
                    accepted.append(lane.submit(task, i))
                except RuntimeError:
                    return

        threads = [threading.Thread(target=produce, args=(k * 10_000,)) for k in range(4)]
        for thread in threads:
            thread.start()
        go.wait()
        time.sleep(0.002)  # a real race: some submits come before the shutdown, some after
        lane.shutdown(wait=True)
        shut.set()
        for thread in threads:
            thread.join(TIMEOUT)
        assert late == []
        assert all(future.done() for future in accepted)
        assert lane.stats().completed == len(accepted)


@pytest.mark.timeout(TIMEOUT)
def test_whoever_sees_a_run_done_finds_its_lanes_room_back() -> None:
    # A run's end reaches its lane without the lock, before its future completes: whatever
    # reads the lane under the lock afterwards counts it first, and has a worker come for
    # the task it lets start, while the worker that ran the first one is still busy with
    # the first future's callbacks.
    with PriorityExecutor(max_workers=2) as ex:
        lane = ex.lane(max_running=1)
        for done_before in range(0, 100, 2):
            release, hold, go = threading.Event(), threading.Event(), threading.Event()
            first = lane.submit(release.wait, TIMEOUT)
            first.add_done_callback(lambda _, held=hold: held.wait(TIMEOUT))
            second = lane.submit(go.wait, TIMEOUT)
            wait_until(lambda: lane.stats().throttled == 1)
            release.set()
            first.result(timeout=TIMEOUT)
            assert [task.state for task in lane.waiting()] in ([], ["ready"])
            wait_until(lambda: lane.stats().running == 1, what="the second run to start")
            assert lane.stats().completed == done_before + 1
            go.set()
            second.result(timeout=TIMEOUT)  # run by the other worker
            hold.set()
        wait_until(lambda: lane.stats().completed == 100)
