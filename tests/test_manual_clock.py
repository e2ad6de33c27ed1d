"""Due times on a ManualClock (and one real-time check of the promoter's wake-up)."""

from __future__ import annotations

import datetime
import threading
import time
from concurrent.futures import Future

import pytest
from helpers import TIMEOUT, blocked_worker

from priority_executor import Priority, PriorityExecutor
from priority_executor.testing import ManualClock


def test_nothing_runs_before_it_is_due() -> None:
    clock = ManualClock()
    ran = threading.Event()
    with PriorityExecutor(2, clock=clock) as ex:
        future = ex.submit(ran.set, delay=10)
        assert ex.stats().scheduled == 1
        clock.advance(9)
        assert ex.stats().scheduled == 1
        assert ex.stats().ready == 0
        assert not ran.is_set()
        assert not future.done()
        clock.advance(0.5)
        assert ex.stats().scheduled == 1
        assert not future.done()
        clock.advance(0.5)
        assert future.result(timeout=TIMEOUT) is None
        assert ran.is_set()
    assert ex.stats().completed == 1


def test_advance_zero_runs_nothing_delayed() -> None:
    clock = ManualClock()
    with PriorityExecutor(2, clock=clock) as ex:
        future = ex.submit(int, 1, delay=0.001)
        clock.advance(0)
        assert ex.stats().scheduled == 1
        assert not future.done()
        clock.advance(0.001)
        assert future.result(timeout=TIMEOUT) == 1


def test_delay_zero_is_due_at_once() -> None:
    clock = ManualClock()
    with PriorityExecutor(2, clock=clock) as ex:
        assert ex.submit(int, 7, delay=0).result(timeout=TIMEOUT) == 7
        assert ex.submit(int, 8, delay=datetime.timedelta(0)).result(timeout=TIMEOUT) == 8


def test_delayed_tasks_run_in_due_order_as_time_passes() -> None:
    clock = ManualClock()
    ran: list[str] = []
    with PriorityExecutor(1, clock=clock) as ex:
        futures = {
            name: ex.submit(ran.append, name, delay=d) for name, d in [("c", 3), ("a", 1), ("b", 2)]
        }
        for step, name in enumerate(["a", "b", "c"], start=1):
            clock.advance(1)
            futures[name].result(timeout=TIMEOUT)
            assert ran == ["a", "b", "c"][:step]
            assert ex.stats().scheduled == 3 - step


def test_delay_as_timedelta() -> None:
    clock = ManualClock()
    with PriorityExecutor(2, clock=clock) as ex:
        future = ex.submit(int, 5, delay=datetime.timedelta(minutes=2))
        clock.advance(119)
        assert ex.stats().scheduled == 1
        assert not future.done()
        clock.advance(1)
        assert future.result(timeout=TIMEOUT) == 5


def test_delay_as_int_and_float() -> None:
    clock = ManualClock()
    with PriorityExecutor(2, clock=clock) as ex:
        f_int = ex.submit(int, 1, delay=2)
        f_float = ex.submit(int, 2, delay=1.5)
        clock.advance(1.5)
        assert f_float.result(timeout=TIMEOUT) == 2
        assert not f_int.done()
        clock.advance(0.5)
        assert f_int.result(timeout=TIMEOUT) == 1


def test_just_due_high_beats_overdue_low() -> None:
    """Both due when a worker frees up, the LOW one for longer: HIGH still runs first."""
    clock = ManualClock()
    order: list[str] = []
    with PriorityExecutor(1, clock=clock) as ex, blocked_worker(ex) as (release, _):
        low = ex.submit(order.append, "low", priority=Priority.LOW, delay=1)
        high = ex.submit(order.append, "high", priority=Priority.HIGH, delay=5)
        clock.advance(1)
        assert ex.stats().ready == 1  # LOW is due, the worker is busy
        clock.advance(100)  # LOW is now overdue by 100 s
        clock.advance(4)  # ...and HIGH just became due
        assert ex.stats().ready == 2
        release.set()
        low.result(timeout=TIMEOUT)
        high.result(timeout=TIMEOUT)
    assert order == ["high", "low"]


def test_among_equal_priorities_earlier_due_first() -> None:
    """Equal priority: the task due earlier runs first, even if it was submitted later."""
    clock = ManualClock()
    order: list[str] = []
    with PriorityExecutor(1, clock=clock) as ex, blocked_worker(ex) as (release, _):
        later = ex.submit(order.append, "due-at-2", delay=2)
        sooner = ex.submit(order.append, "due-at-1", delay=1)
        clock.advance(3)
        assert ex.stats().ready == 2
        release.set()
        later.result(timeout=TIMEOUT)
        sooner.result(timeout=TIMEOUT)
    assert order == ["due-at-1", "due-at-2"]


def test_run_at_naive_local_time() -> None:
    clock = ManualClock()
    with PriorityExecutor(2, clock=clock) as ex:
        when = datetime.datetime.now() + datetime.timedelta(seconds=100)
        assert when.tzinfo is None
        future = ex.submit(int, 3, run_at=when)
        clock.advance(98)
        assert ex.stats().scheduled == 1
        assert not future.done()
        clock.advance(4)
        assert future.result(timeout=TIMEOUT) == 3


@pytest.mark.parametrize(
    "tz",
    [
        datetime.timezone.utc,
        datetime.timezone(datetime.timedelta(hours=5, minutes=30)),
        datetime.timezone(datetime.timedelta(hours=-8)),
    ],
    ids=["utc", "plus0530", "minus08"],
)
def test_run_at_aware(tz: datetime.tzinfo) -> None:
    clock = ManualClock()
    with PriorityExecutor(2, clock=clock) as ex:
        when = datetime.datetime.now(tz) + datetime.timedelta(seconds=100)
        future = ex.submit(int, 4, run_at=when)
        clock.advance(98)
        assert ex.stats().scheduled == 1
        assert not future.done()
        clock.advance(4)
        assert future.result(timeout=TIMEOUT) == 4


def test_run_at_uses_the_clocks_wall_time_which_moves_with_advance() -> None:
    clock = ManualClock()
    with PriorityExecutor(2, clock=clock) as ex:
        clock.advance(1000)  # the clock's wall time is now ~1000 s ahead of real time
        real_now = datetime.datetime.now(datetime.timezone.utc)
        # 500 s ahead of real time is 500 s in the past for the clock: due now.
        past = ex.submit(int, 1, run_at=real_now + datetime.timedelta(seconds=500))
        assert past.result(timeout=TIMEOUT) == 1
        # 1100 s ahead of real time is ~100 s ahead for the clock.
        future = ex.submit(int, 2, run_at=real_now + datetime.timedelta(seconds=1100))
        clock.advance(98)
        assert not future.done()
        assert ex.stats().scheduled == 1
        clock.advance(4)
        assert future.result(timeout=TIMEOUT) == 2


@pytest.mark.parametrize("aware", [False, True])
def test_past_run_at_is_due_now(aware: bool) -> None:
    clock = ManualClock()
    tz = datetime.timezone.utc if aware else None
    with PriorityExecutor(2, clock=clock) as ex:
        when = datetime.datetime.now(tz) - datetime.timedelta(hours=1)
        future = ex.submit(int, 9, run_at=when)
        assert future.result(timeout=TIMEOUT) == 9  # no advance needed


def test_past_run_at_counts_as_overdue_in_the_order() -> None:
    """A run_at in the past keeps its earlier due time: among equal priorities it goes first."""
    clock = ManualClock()
    order: list[str] = []
    with PriorityExecutor(1, clock=clock) as ex, blocked_worker(ex) as (release, _):
        f_now = ex.submit(order.append, "now")
        past = datetime.datetime.now() - datetime.timedelta(seconds=60)
        f_past = ex.submit(order.append, "past", run_at=past)
        assert ex.stats().ready == 2
        release.set()
        f_now.result(timeout=TIMEOUT)
        f_past.result(timeout=TIMEOUT)
    assert order == ["past", "now"]


def test_task_due_sooner_than_an_earlier_one_runs_on_time() -> None:
    clock = ManualClock()
    with PriorityExecutor(2, clock=clock) as ex:
        far = ex.submit(int, 1, delay=100)
        near = ex.submit(int, 2, delay=1)
        clock.advance(1)
        assert near.result(timeout=TIMEOUT) == 2
        assert not far.done()
        assert ex.stats().scheduled == 1
        clock.advance(99)
        assert far.result(timeout=TIMEOUT) == 1


@pytest.mark.timeout(30)
def test_real_time_task_due_sooner_than_promoters_sleep_wakes_it() -> None:
    """Default clock: the promoter sleeps until +30 s; a task due in 50 ms must not wait."""
    ex = PriorityExecutor(2)
    try:
        far = ex.submit(int, 1, delay=30)
        time.sleep(0.05)  # let the promoter go to sleep on the 30 s task (not a due-time wait)
        start = time.monotonic()
        near = ex.submit(time.monotonic, delay=0.05)
        ran_at = near.result(timeout=5)
        assert ran_at - start >= 0.05
        assert ran_at - start < 2.0
        assert not far.done()
        assert ex.stats().scheduled == 1
    finally:
        ex.shutdown(wait=True, cancel_futures=True)
    assert far.cancelled()


@pytest.mark.timeout(30)
def test_real_time_delay_runs_no_earlier_than_due() -> None:
    with PriorityExecutor(2) as ex:
        start = time.monotonic()
        ran_at = ex.submit(time.monotonic, delay=0.1).result(timeout=5)
    assert 0.1 <= ran_at - start < 3.0


def test_one_clock_drives_two_executors() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex1, PriorityExecutor(1, clock=clock) as ex2:
        a1 = ex1.submit(int, 1, delay=1)
        a2 = ex2.submit(int, 2, delay=2)
        b1 = ex1.submit(int, 3, delay=3)
        clock.advance(1)
        assert a1.result(timeout=TIMEOUT) == 1
        assert not a2.done()
        assert ex2.stats().scheduled == 1
        clock.advance(1)
        assert a2.result(timeout=TIMEOUT) == 2
        assert not b1.done()
        clock.advance(1)
        assert b1.result(timeout=TIMEOUT) == 3
    assert ex1.stats().completed == 2
    assert ex2.stats().completed == 1


def test_clock_now_and_advance() -> None:
    clock = ManualClock()
    assert clock.now() == 0.0
    clock.advance(2.5)
    assert clock.now() == 2.5
    clock = ManualClock(start=100.0)
    assert clock.now() == 100.0


def test_advance_from_another_thread_promotes() -> None:
    clock = ManualClock()
    with PriorityExecutor(2, clock=clock) as ex:
        future: Future[int] = ex.submit(int, 6, delay=5)
        t = threading.Thread(target=clock.advance, args=(5,))
        t.start()
        t.join(TIMEOUT)
        assert future.result(timeout=TIMEOUT) == 6


def test_many_delayed_tasks_each_due_at_its_time() -> None:
    clock = ManualClock()
    with PriorityExecutor(4, clock=clock) as ex:
        futures = [ex.submit(int, i, delay=i) for i in range(1, 51)]
        for i in range(1, 51):
            clock.advance(1)
            assert futures[i - 1].result(timeout=TIMEOUT) == i
            assert all(not f.done() for f in futures[i:])
            assert ex.stats().scheduled == 50 - i
