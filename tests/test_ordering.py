"""Which due task a worker takes first: priorities, ties in submission order, Fifo."""

from __future__ import annotations

from concurrent.futures import Future

import pytest
from helpers import TIMEOUT, blocked_worker
from hypothesis import example, given, settings
from hypothesis import strategies as st

from priority_executor import Fifo, Priority, PriorityExecutor


def run_in_order(ex: PriorityExecutor, submissions: list[tuple[object, int]]) -> list[object]:
    """Submit (label, priority) pairs behind a blocked worker; return the labels in run order."""
    order: list[object] = []
    with blocked_worker(ex) as (release, _):
        futures = [ex.submit(order.append, label, priority=prio) for label, prio in submissions]
        assert ex.stats().ready == len(submissions)
        release.set()
    for future in futures:
        future.result(timeout=TIMEOUT)
    return order


@pytest.mark.timeout(30)
def test_classic_low_high_normal_runs_high_normal_low() -> None:
    with PriorityExecutor(max_workers=1) as ex:
        order = run_in_order(
            ex, [("low", Priority.LOW), ("high", Priority.HIGH), ("normal", Priority.NORMAL)]
        )
    assert order == ["high", "normal", "low"]


def test_priority_enum_values() -> None:
    assert Priority.LOW < Priority.NORMAL == 0 < Priority.HIGH
    assert isinstance(Priority.HIGH, int)


@pytest.mark.timeout(30)
def test_fifo_among_1000_equal_priority_tasks() -> None:
    with PriorityExecutor(max_workers=1) as ex:
        order = run_in_order(ex, [(i, 0) for i in range(1000)])
    assert order == list(range(1000))


@pytest.mark.timeout(30)
def test_fifo_among_equal_priorities_default_priority() -> None:
    """No scheduling keyword at all: the ThreadPoolExecutor order."""
    order: list[int] = []
    with PriorityExecutor(max_workers=1) as ex, blocked_worker(ex) as (release, _):
        futures = [ex.submit(order.append, i) for i in range(200)]
        release.set()
        for future in futures:
            future.result(timeout=TIMEOUT)
    assert order == list(range(200))


@pytest.mark.timeout(30)
def test_plain_int_priorities() -> None:
    with PriorityExecutor(max_workers=1) as ex:
        order = run_in_order(ex, [("a", 3), ("b", -2), ("c", 100), ("d", 0), ("e", 3), ("f", -50)])
    assert order == ["c", "a", "e", "d", "b", "f"]


@pytest.mark.timeout(30)
def test_int_and_intenum_priorities_mix() -> None:
    with PriorityExecutor(max_workers=1) as ex:
        order = run_in_order(
            ex,
            [
                ("normal", Priority.NORMAL),
                ("eleven", 11),
                ("high", Priority.HIGH),
                ("ten", 10),
                ("minus-eleven", -11),
                ("low", Priority.LOW),
                ("zero", 0),
            ],
        )
    assert order == ["eleven", "high", "ten", "normal", "zero", "low", "minus-eleven"]


@pytest.mark.timeout(30)
def test_huge_and_negative_int_priorities() -> None:
    with PriorityExecutor(max_workers=1) as ex:
        order = run_in_order(ex, [("small", -(2**70)), ("big", 2**70), ("mid", 0)])
    assert order == ["big", "mid", "small"]


@pytest.mark.timeout(30)
def test_interleaved_priorities_stay_fifo_within_each_level() -> None:
    submissions = [((i % 3, i), (i % 3) * 10) for i in range(300)]
    with PriorityExecutor(max_workers=1) as ex:
        order = run_in_order(ex, submissions)
    expected = sorted((label for label, _ in submissions), key=lambda lab: (-lab[0], lab[1]))
    assert order == expected


@pytest.mark.timeout(30)
def test_fifo_policy_ignores_priorities() -> None:
    with PriorityExecutor(max_workers=1, policy=Fifo()) as ex:
        order = run_in_order(ex, [("low", Priority.LOW), ("high", Priority.HIGH), ("n", 0)])
    assert order == ["low", "high", "n"]


@pytest.mark.timeout(30)
def test_high_priority_submitted_later_overtakes_queued_backlog() -> None:
    order: list[str] = []
    with PriorityExecutor(max_workers=1) as ex, blocked_worker(ex) as (release, _):
        backlog = [ex.submit(order.append, f"bg{i}") for i in range(50)]
        urgent = ex.submit(order.append, "urgent", priority=Priority.HIGH)
        release.set()
        urgent.result(timeout=TIMEOUT)
        for future in backlog:
            future.result(timeout=TIMEOUT)
    assert order[0] == "urgent"
    assert order[1:] == [f"bg{i}" for i in range(50)]


@pytest.mark.timeout(60)
@settings(max_examples=80, deadline=None)
@given(
    first=st.lists(st.integers(-2, 2), max_size=25),
    second=st.lists(st.integers(-2, 2), max_size=25),
    cancelled=st.sets(st.integers(0, 49)),
)
# Most of the first batch cancelled: the deque and the heap are compacted with tasks in both.
@example(first=[0] * 10 + [1, -1] * 5, second=[0, 2, -2] * 3, cancelled={*range(14), 21, 25})
def test_tasks_in_order_and_out_of_it_start_by_priority_then_submission(
    first: list[int], second: list[int], cancelled: set[int]
) -> None:
    """Ready tasks that came in order wait apart from the others (a deque beside the heap):
    whatever the mix, and whatever is cancelled between two drains of the intake (which
    compacts both), every start takes the best one of either part."""
    order: list[int] = []
    futures: list[Future[None]] = []
    priorities = first + second

    def submit_second_and_cancel() -> None:
        # Runs first, after the worker drained the first batch: the second one reaches
        # the deque and the heap beside what the first left there.
        futures.extend(
            ex.submit(order.append, len(first) + i, priority=p) for i, p in enumerate(second)
        )
        for index in cancelled:
            if index < len(futures):
                assert futures[index].cancel()

    kept = [i for i in range(len(priorities)) if i not in cancelled]
    ex = PriorityExecutor(max_workers=1)
    try:
        with blocked_worker(ex) as (release, _):
            trigger = ex.submit(submit_second_and_cancel, priority=100)
            futures.extend(ex.submit(order.append, i, priority=p) for i, p in enumerate(first))
            release.set()
        trigger.result(timeout=TIMEOUT)
        for index in kept:
            futures[index].result(timeout=TIMEOUT)
    finally:
        ex.shutdown(cancel_futures=True)
    assert order == sorted(kept, key=lambda i: (-priorities[i], i))
    assert ex.stats().completed == len(kept) + 2  # and the blocker, and the trigger
