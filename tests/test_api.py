"""Details of the public API: the executor's repr, what the constructor and ``map()`` refuse
at the call, ``ManualClock.advance()`` with a timedelta, what clients read from a pool they
are given, and how the process pool that the executor creates starts its processes."""

from __future__ import annotations

import datetime
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import remote
from helpers import TIMEOUT, blocked_worker, stats_fields

from priority_executor import Fifo, PriorityExecutor, PriorityFirst
from priority_executor.testing import ManualClock


def test_repr_shows_size_policy_and_counts() -> None:
    clock = ManualClock()
    with PriorityExecutor(2, policy=Fifo(), clock=clock) as ex:
        assert repr(ex) == (
            "<PriorityExecutor max_workers=2 policy=Fifo() running=0 ready=0 throttled=0"
            " scheduled=0>"
        )
        with blocked_worker(ex) as (release, _):
            ex.submit(int, delay=5)
            assert repr(ex).endswith("running=1 ready=0 throttled=0 scheduled=1>")
            release.set()
        clock.advance(5)


def test_repr_of_the_default_policy() -> None:
    with PriorityExecutor(3) as ex:
        assert f"max_workers=3 policy={PriorityFirst()!r} " in repr(ex)


@pytest.mark.parametrize("max_workers", [4, None])
def test_max_workers_is_readable_as_threadpoolexecutors_private_attribute(
    max_workers: int | None,
) -> None:
    with PriorityExecutor(max_workers) as ex:
        expected = max_workers or ThreadPoolExecutor()._max_workers
        assert type(ex._max_workers) is int and ex._max_workers == expected
        # As many tasks run at once as it says.
        barrier = threading.Barrier(ex._max_workers + 1)
        for _ in range(ex._max_workers):
            ex.submit(barrier.wait, TIMEOUT)
        barrier.wait(TIMEOUT)


@pytest.mark.parametrize("max_workers", ["4", 4.0, True, [4]])
def test_max_workers_of_another_type_is_a_type_error_naming_it(max_workers: Any) -> None:
    with pytest.raises(TypeError, match="max_workers must be an int"):
        PriorityExecutor(max_workers)


def test_a_policy_class_instead_of_an_instance_is_a_type_error_naming_it() -> None:
    with pytest.raises(TypeError, match=r"policy must be an instance such as Fifo\(\)"):
        PriorityExecutor(policy=Fifo)


@pytest.mark.parametrize("priority", [True, "high", 1.5])
def test_map_refuses_a_bad_priority_before_submitting_anything(priority: Any) -> None:
    taken: list[int] = []

    def inputs() -> Iterator[int]:
        for i in range(3):
            taken.append(i)
            yield i

    with PriorityExecutor(1) as ex:
        with pytest.raises(TypeError, match="priority must be an int"):
            ex.map(str, inputs(), priority=priority)
        assert taken == []
    assert set(stats_fields(ex).values()) == {0}


def test_map_refuses_a_non_callable_even_with_nothing_to_map() -> None:
    with PriorityExecutor(1) as ex, pytest.raises(TypeError, match="fn must be callable"):
        ex.map(42, [])


def test_manual_clock_advances_by_a_timedelta() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        future = ex.submit(int, delay=datetime.timedelta(minutes=1))
        clock.advance(datetime.timedelta(seconds=59))
        assert clock.now() == 59 and not future.done()
        clock.advance(datetime.timedelta(seconds=1))
        assert future.result(TIMEOUT) == 0


@pytest.mark.parametrize(
    ("step", "error"),
    [(datetime.timedelta(seconds=-1), ValueError), ("1", TypeError), (True, TypeError)],
)
def test_manual_clock_refuses_what_delay_refuses(step: Any, error: type[Exception]) -> None:
    clock = ManualClock()
    with pytest.raises(error, match="seconds"):
        clock.advance(step)
    assert clock.now() == 0


def test_an_owned_process_pool_does_not_fork() -> None:
    # A forked child would see this process' memory, as it is now; a child started by a
    # fork server or spawned imports the module afresh.
    remote.remember("set in the parent")
    try:
        with PriorityExecutor(1, backend="process") as ex:
            assert ex.submit(remote.remembered).result(TIMEOUT) is None
    finally:
        remote.remember(None)
