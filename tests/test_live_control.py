"""Live control: executor.waiting(), a snapshot of what waits to start."""

from __future__ import annotations

import threading

import pytest
from helpers import TIMEOUT, blocked_worker

from priority_executor import PriorityExecutor, WaitingTask
from priority_executor.testing import ManualClock


def test_waiting_is_empty_on_an_idle_executor() -> None:
    with PriorityExecutor(1, clock=ManualClock()) as ex:
        assert ex.waiting() == []


def test_waiting_orders_ready_by_policy_then_scheduled_by_due_time() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        with blocked_worker(ex):
            low = ex.submit(int, priority=-1)
            high = ex.submit(int, priority=5)
            normal = ex.submit(int, expires=30)
            later = ex.submit(int, delay=20, priority=9)
            sooner = ex.submit(int, delay=10, expires=15)
            series = ex.submit_recurring(int, interval=1, delay=5)
            clock.advance(2)
            snapshot = ex.waiting()
            assert [w.future for w in snapshot] == [high, normal, low, series, sooner, later]
            assert [w.state for w in snapshot] == ["ready"] * 3 + ["scheduled"] * 3
            assert all(isinstance(w, WaitingTask) and w.lane is None for w in snapshot)
            assert [w.priority for w in snapshot] == [5, 0, -1, 0, 0, 9]
            assert [w.due_in for w in snapshot] == pytest.approx([-2, -2, -2, 3, 8, 18])
            expires = [w.expires_in for w in snapshot]
            assert expires == [None, pytest.approx(28), None, None, pytest.approx(13), None]
            assert snapshot[0].fn is int
            with pytest.raises(AttributeError):
                snapshot[0].priority = 1  # type: ignore[misc]
            series.cancel()
            sooner.cancel()
            assert [w.future for w in ex.waiting()] == [high, normal, low, later]
        assert high.result(timeout=TIMEOUT) == 0
        later.cancel()


def test_waiting_shows_no_started_task_and_a_series_once_per_run() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        series = ex.submit_recurring(int, interval=1)
        for _ in range(5):
            clock.advance(1)
            entries = [w for w in ex.waiting() if w.future is series]
            assert len(entries) <= 1
        series.cancel()
        ex.shutdown(wait=True)
        assert ex.waiting() == []


@pytest.mark.parametrize("round_", range(30))
def test_waiting_under_concurrent_submits_never_shows_a_task_twice_or_started(
    round_: int,
) -> None:
    started: set[int] = set()
    guard = threading.Lock()
    problems: list[str] = []

    def work(n: int) -> None:
        with guard:
            started.add(n)

    with PriorityExecutor(2) as ex:
        stop = threading.Event()

        def watch() -> None:
            while not stop.is_set():
                with guard:
                    started_before = set(started)  # read first: these started before it
                snapshot = ex.waiting()
                futures = [id(w.future) for w in snapshot]
                if len(futures) != len(set(futures)):
                    problems.append("a task twice")
                for w in snapshot:
                    if seen_futures.get(w.future, -1) in started_before:
                        problems.append("a started task")

        seen_futures: dict[object, int] = {}
        watcher = threading.Thread(target=watch)
        watcher.start()

        def produce(base: int) -> None:
            for i in range(200):
                n = base + i
                future = ex.submit(work, n, priority=i % 3)
                seen_futures[future] = n

        producers = [threading.Thread(target=produce, args=(k * 1000,)) for k in range(4)]
        for t in producers:
            t.start()
        for t in producers:
            t.join(TIMEOUT)
        ex.shutdown(wait=True)
        stop.set()
        watcher.join(TIMEOUT)
    assert problems == []
    assert len(started) == 800
