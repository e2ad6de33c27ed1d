"""Future.cancel(): before start it wins and the task never runs; waiters hear of it at once."""

from __future__ import annotations

import concurrent.futures as cf
import gc
import sys
import threading
import tracemalloc
import weakref
from concurrent.futures import Future
from typing import Callable, TypeVar

import pytest
from helpers import TIMEOUT, blocked_worker, in_thread

from priority_executor import PriorityExecutor
from priority_executor.testing import ManualClock

T = TypeVar("T")


def test_cancel_ready_task_behind_blocked_worker() -> None:
    ran: list[str] = []
    with PriorityExecutor(1) as ex, blocked_worker(ex) as (release, blocker):
        victim = ex.submit(ran.append, "victim")
        other = ex.submit(ran.append, "other")
        assert ex.stats().ready == 2
        assert victim.cancel() is True
        assert victim.cancelled()
        assert victim.done()
        assert ex.stats().ready == 1
        assert ex.stats().cancelled == 1
        release.set()
        other.result(timeout=TIMEOUT)
        blocker.result(timeout=TIMEOUT)
    assert ran == ["other"]
    with pytest.raises(cf.CancelledError):
        victim.result(timeout=0)
    stats = ex.stats()
    assert (stats.completed, stats.cancelled, stats.ready, stats.running) == (2, 1, 0, 0)


def test_cancel_is_idempotent_and_counts_once() -> None:
    with PriorityExecutor(1) as ex, blocked_worker(ex) as (release, _):
        victim = ex.submit(int)
        assert victim.cancel() is True
        assert victim.cancel() is True
        assert ex.stats().cancelled == 1
        release.set()
    assert ex.stats().cancelled == 1
    assert ex.stats().completed == 1


def test_cancel_delayed_task() -> None:
    clock = ManualClock()
    ran = threading.Event()
    with PriorityExecutor(2, clock=clock) as ex:
        victim = ex.submit(ran.set, delay=5)
        keeper = ex.submit(int, 1, delay=5)
        assert ex.stats().scheduled == 2
        assert victim.cancel() is True
        assert victim.cancelled()
        stats = ex.stats()
        assert (stats.scheduled, stats.cancelled) == (1, 1)
        clock.advance(10)
        assert keeper.result(timeout=TIMEOUT) == 1
    assert not ran.is_set()
    assert victim.cancelled()
    stats = ex.stats()
    assert (stats.scheduled, stats.ready, stats.completed, stats.cancelled) == (0, 0, 1, 1)


def test_cancel_running_task_returns_false() -> None:
    started, release = threading.Event(), threading.Event()

    def task() -> str:
        started.set()
        assert release.wait(TIMEOUT)
        return "finished"

    with PriorityExecutor(1) as ex:
        future = ex.submit(task)
        assert started.wait(TIMEOUT)
        assert future.running()
        assert future.cancel() is False
        assert not future.cancelled()
        assert ex.stats().running == 1
        release.set()
        assert future.result(timeout=TIMEOUT) == "finished"
    assert ex.stats().cancelled == 0
    assert ex.stats().completed == 1


def test_cancel_finished_task_returns_false() -> None:
    with PriorityExecutor(1) as ex:
        future = ex.submit(int, 3)
        assert future.result(timeout=TIMEOUT) == 3
        assert future.cancel() is False
        assert future.result() == 3


def _cancel_while_waiting(victim: Future[object], waiter: Callable[[], T], what: str) -> T:
    """Run ``waiter()`` in a thread, cancel ``victim``: the waiter must return at once."""
    box: dict[str, T] = {}
    done = threading.Event()

    def target() -> None:
        box["result"] = waiter()
        done.set()

    thread = in_thread(target)
    victim.cancel()
    assert done.wait(5), f"{what} was not woken by the cancellation"
    thread.join(TIMEOUT)
    return box["result"]


def test_wait_sees_cancel_of_queued_task_at_once() -> None:
    """The worker never reaches the cancelled task while we wait: it is blocked."""
    with PriorityExecutor(1) as ex, blocked_worker(ex) as (release, blocker):
        victim = ex.submit(int)
        finished, not_finished = _cancel_while_waiting(
            victim,
            lambda: cf.wait([victim, blocker], timeout=TIMEOUT, return_when=cf.FIRST_COMPLETED),
            "wait()",
        )
        assert finished == {victim}
        assert not_finished == {blocker}
        assert not blocker.done()
        release.set()


def test_wait_sees_already_cancelled_queued_task() -> None:
    with PriorityExecutor(1) as ex, blocked_worker(ex) as (release, blocker):
        victim = ex.submit(int)
        victim.cancel()
        finished, not_finished = cf.wait([victim], timeout=5)
        assert finished == {victim}
        assert not not_finished
        finished, not_finished = cf.wait([victim, blocker], timeout=0)
        assert finished == {victim}
        release.set()
    assert not_finished == {blocker}


def test_wait_sees_cancel_of_delayed_task_at_once() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        victim = ex.submit(int, delay=3600)
        other = ex.submit(int, delay=7200)
        finished, _ = _cancel_while_waiting(
            victim,
            lambda: cf.wait([victim, other], timeout=TIMEOUT, return_when=cf.FIRST_COMPLETED),
            "wait()",
        )
        assert finished == {victim}
        # Already cancelled before wait() is called: reported without waiting.
        finished, not_finished = cf.wait([victim], timeout=5)
        assert finished == {victim}
        assert not not_finished
        other.cancel()


def test_as_completed_sees_cancel_of_queued_task_at_once() -> None:
    with PriorityExecutor(1) as ex, blocked_worker(ex) as (release, blocker):
        victim = ex.submit(int)
        first = _cancel_while_waiting(
            victim,
            lambda: next(cf.as_completed([blocker, victim], timeout=TIMEOUT)),
            "as_completed()",
        )
        assert first is victim
        assert not blocker.done()
        release.set()


def test_as_completed_sees_cancel_of_delayed_task_at_once() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        victim = ex.submit(int, delay=3600)
        other = ex.submit(int, delay=7200)
        victim.cancel()
        assert next(cf.as_completed([other, victim], timeout=5)) is victim
        other.cancel()


def test_cancelled_task_skipped_by_worker_others_still_run_in_order() -> None:
    order: list[int] = []
    with PriorityExecutor(1) as ex, blocked_worker(ex) as (release, _):
        futures = [ex.submit(order.append, i) for i in range(100)]
        for i in range(0, 100, 2):
            assert futures[i].cancel()
        release.set()
        for i in range(1, 100, 2):
            futures[i].result(timeout=TIMEOUT)
    assert order == list(range(1, 100, 2))
    assert ex.stats().cancelled == 50
    assert ex.stats().completed == 51


def test_cancel_all_queued_then_executor_still_works() -> None:
    with PriorityExecutor(1) as ex, blocked_worker(ex) as (release, _):
        futures = [ex.submit(int) for _ in range(1000)]
        assert all(f.cancel() for f in futures)
        assert ex.stats().ready == 0
        release.set()
        assert ex.submit(int, 42).result(timeout=TIMEOUT) == 42


def _submit_and_cancel_delayed(ex: PriorityExecutor, n: int) -> None:
    submit = ex.submit
    for _ in range(n):
        submit(int, delay=3600).cancel()


# Observed growth is a few tens of kB after 100k tasks; a task with its future is ~1 kB, so
# keeping every task would be ~100 MB, and keeping only a heap slot for each ~0.8 MB.
MEMORY_BOUND = 1_000_000
# The same in blocks of the object allocator: a task with its future is a dozen or more.
BLOCKS_BOUND = 5_000


@pytest.mark.timeout(90)
def test_100k_cancelled_delayed_tasks_give_their_memory_back() -> None:
    """100k delayed tasks submitted and cancelled, futures dropped: what is left is near
    what there was before (measured with tracemalloc)."""
    clock = ManualClock()
    n = 100_000
    with PriorityExecutor(2, clock=clock) as ex:
        keeper = ex.submit(int, 1, delay=7200)  # keeps the pending heap non-empty
        _submit_and_cancel_delayed(ex, 1000)  # warm up: allocator pools, code paths
        gc.collect()
        tracemalloc.start()
        try:
            before, _ = tracemalloc.get_traced_memory()
            _submit_and_cancel_delayed(ex, n)
            gc.collect()
            after, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        growth = after - before
        stats = ex.stats()
        assert stats.cancelled == n + 1000
        assert stats.scheduled == 1
        assert growth < MEMORY_BOUND, f"{growth} bytes left after {n} cancelled tasks"
        clock.advance(7200)
        assert keeper.result(timeout=TIMEOUT) == 1


@pytest.mark.timeout(60)
def test_100k_delayed_tasks_all_submitted_then_cancelled_leave_no_blocks() -> None:
    """The pending heap holds 100k tasks, then all are cancelled: it must be compacted."""
    clock = ManualClock()
    n = 100_000
    with PriorityExecutor(2, clock=clock) as ex:
        keeper = ex.submit(int, 1, delay=7200)
        _submit_and_cancel_delayed(ex, 1000)
        gc.collect()
        before = sys.getallocatedblocks()
        submit = ex.submit
        futures = [submit(int, delay=3600 + i % 1000) for i in range(n)]
        assert ex.stats().scheduled == n + 1
        for future in futures:
            assert future.cancel()
        del futures, future
        gc.collect()
        growth = sys.getallocatedblocks() - before
        stats = ex.stats()
        assert (stats.cancelled, stats.scheduled) == (n + 1000, 1)
        assert growth < BLOCKS_BOUND, f"{growth} blocks left after {n} cancelled tasks"
        clock.advance(7200)
        assert keeper.result(timeout=TIMEOUT) == 1


@pytest.mark.timeout(60)
def test_cancelled_ready_tasks_give_their_memory_back() -> None:
    n = 20_000
    with PriorityExecutor(1) as ex, blocked_worker(ex) as (release, _):
        for future in [ex.submit(int) for _ in range(1000)]:
            future.cancel()  # warm up
        gc.collect()
        before = sys.getallocatedblocks()
        futures = [ex.submit(int) for _ in range(n)]
        for future in futures:
            future.cancel()
        del futures, future
        gc.collect()
        growth = sys.getallocatedblocks() - before
        release.set()
        assert growth < BLOCKS_BOUND, f"{growth} blocks left after {n} cancelled tasks"
        assert ex.stats().cancelled == n + 1000


class Payload:
    """A weakly referenceable argument, to see whether the executor still holds it."""


@pytest.mark.parametrize("delayed", [True, False], ids=["delayed", "queued"])
def test_cancelled_tasks_release_their_futures_and_arguments(delayed: bool) -> None:
    """A heap that is mostly cancelled entries gets compacted: once all 1,000 are
    cancelled, most of them (their futures, their arguments) must have been let go."""
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex, blocked_worker(ex) as (release, _):
        try:
            refs = []
            for _ in range(1000):
                payload = Payload()
                future = ex.submit(id, payload, delay=60 if delayed else None)
                assert future.cancel()
                refs.append((weakref.ref(future), weakref.ref(payload)))
            del future, payload
            gc.collect()
            alive = sum(1 for f_ref, p_ref in refs if f_ref() is not None or p_ref() is not None)
            assert alive < 500, f"{alive} of 1000 cancelled tasks are still referenced"
            assert ex.stats().cancelled == 1000
        finally:
            release.set()
