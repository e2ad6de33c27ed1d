"""``_work_queue``: ThreadPoolExecutor's private queue, drained as its clients drain it
(google-cloud-pubsub's ThreadScheduler, dask.distributed's worker)."""

from __future__ import annotations

import concurrent.futures as cf
import functools
import queue
import sys
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures.thread import _WorkItem
from typing import TYPE_CHECKING, Any, Callable, cast

import pytest
from helpers import (
    TIMEOUT,
    blocked_in,
    blocked_worker,
    call_bounded,
    counts,
    in_thread,
    stats_fields,
    submit_in_background,
    wait_until,
)

from priority_executor import PriorityExecutor
from priority_executor.testing import ManualClock

if TYPE_CHECKING:
    from priority_executor._work_queue import WorkQueue

try:
    from google.cloud.pubsub_v1.subscriber.scheduler import (  # type: ignore[import-untyped,import-not-found,unused-ignore]
        ThreadScheduler,
    )
except ImportError:  # an optional client: pip install google-cloud-pubsub
    ThreadScheduler = None


def work_queue(ex: PriorityExecutor) -> WorkQueue:
    return cast("WorkQueue", ex._work_queue)


def call_of(item: Any) -> tuple[Callable[..., Any], tuple[Any, ...], Mapping[str, Any]]:
    """A work item's call, as the running Python's ``_WorkItem`` holds it."""
    assert isinstance(item, _WorkItem)
    if sys.version_info >= (3, 14):
        return item.task  # type: ignore[no-any-return]
    return item.fn, tuple(item.args), item.kwargs


def run_item(item: Any) -> None:
    """Run a work item as ThreadPoolExecutor's worker does."""
    if sys.version_info >= (3, 14):
        from concurrent.futures.thread import WorkerContext

        item.run(WorkerContext(None, ()))
    else:
        item.run()


def drain(ex: PriorityExecutor) -> list[Any]:
    """What pubsub's ThreadScheduler.shutdown() does: take items out until Empty."""
    items = []
    while True:
        try:
            items.append(work_queue(ex).get(block=False))
        except queue.Empty:
            return items


def test_tasks_come_out_in_the_order_they_would_start_as_work_items() -> None:
    clock = ManualClock()
    ran: list[str] = []
    with PriorityExecutor(1, clock=clock) as ex, blocked_worker(ex):
        lane = ex.lane(max_running=1)
        ex.submit(ran.append, "normal", priority=0)
        later = ex.submit(ran.append, "later", delay=10)
        high = ex.submit(ran.append, "high", priority=5)
        sooner = ex.submit(ran.append, "sooner", delay=5)
        first_of_lane = lane.submit(ran.append, "lane 1")
        second_of_lane = lane.submit(ran.append, "lane 2")  # beyond the lane's room
        kwargs = ex.submit(ran.append, "kwargs", priority=0)
        expected = [w.future for w in ex.waiting()]
        assert expected[0] is high
        assert expected[-2:] == [sooner, later]
        assert second_of_lane in expected[expected.index(kwargs) :]  # throttled after ready
        assert work_queue(ex).qsize() == 7 and not work_queue(ex).empty()
        items = drain(ex)
        assert [item.future for item in items] == expected
        assert [call_of(item) for item in items][:3] == [
            (ran.append, ("high",), {}),
            (ran.append, ("normal",), {}),
            (ran.append, ("lane 1",), {}),
        ]
        assert first_of_lane is items[2].future
        assert work_queue(ex).qsize() == 0 and work_queue(ex).empty()
        assert ex.waiting() == []
        # Handed out, not cancelled: the client decides, as with ThreadPoolExecutor's items.
        assert not any(item.future.done() for item in items)
        assert stats_fields(ex) == counts(running=1, cancelled=7)
    assert ran == []


def test_with_fair_share_tasks_come_out_in_the_order_they_would_start() -> None:
    with PriorityExecutor(1) as ex, blocked_worker(ex):
        heavy, light = ex.lane(weight=3), ex.lane(weight=1)
        for i in range(6):
            heavy.submit(int, i)
            light.submit(int, i)
            ex.submit(int, i)
        expected = [w.future for w in ex.waiting()]
        assert [item.future for item in drain(ex)] == expected
        assert ex.stats().cancelled == 18


def test_an_item_keeps_the_calls_keywords_as_a_dict() -> None:
    with PriorityExecutor(1) as ex, blocked_worker(ex):
        ex.submit(print, 1, sep="value")
        item = work_queue(ex).get_nowait()
        fn, args, kwargs = call_of(item)
        assert (fn, args, kwargs) == (print, (1,), {"sep": "value"})
        assert type(kwargs) is dict


def test_empty_when_nothing_waits() -> None:
    with PriorityExecutor(1) as ex:
        with pytest.raises(queue.Empty):
            work_queue(ex).get(block=False)
        with pytest.raises(queue.Empty):
            work_queue(ex).get_nowait()
        with pytest.raises(queue.Empty):
            work_queue(ex).get(timeout=0)
        assert work_queue(ex).qsize() == 0 and work_queue(ex).empty()
        assert len(work_queue(ex).queue) == 0
        with blocked_worker(ex):
            ex.submit(int)
            work_queue(ex).get_nowait()
            with pytest.raises(queue.Empty):
                work_queue(ex).get_nowait()


def test_a_client_can_run_an_item_it_took_out() -> None:
    with PriorityExecutor(1) as ex, blocked_worker(ex):
        future = ex.submit(pow, 2, 5)
        item = work_queue(ex).get_nowait()
        run_item(item)
        assert future.result(timeout=0) == 32
        # Counted where it left the executor: the executor did not run it.
        assert stats_fields(ex) == counts(running=1, cancelled=1)


def test_a_clients_cancel_of_an_item_is_reported_to_wait_at_once() -> None:
    with PriorityExecutor(1) as ex, blocked_worker(ex):
        future = ex.submit(int)
        item = work_queue(ex).get_nowait()
        assert item.future is future and not future.done()
        assert not cf.wait([future], timeout=0).done
        assert future.cancel()
        assert cf.wait([future], timeout=0).done == {future}
        assert list(cf.as_completed([future], timeout=0)) == [future]
        assert stats_fields(ex) == counts(running=1, cancelled=1)


def test_a_future_cancelled_as_it_was_taken_out_is_reported_too() -> None:
    # The cancel comes after the claim, before the client holds the item.
    with PriorityExecutor(1) as ex, blocked_worker(ex):
        future = ex.submit(int)
        item = work_queue(ex).get_nowait()
        future.cancel()
        done = cf.wait([item.future], timeout=0).done
        assert done == {future}


def test_an_item_taken_out_is_no_longer_the_executors() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex, blocked_worker(ex):
        future = ex.submit(int, delay=5)
        work_queue(ex).get_nowait()
        assert ex.reschedule(future, priority=3) is False
        assert future.cancel()  # the client's to cancel
        clock.advance(10)
        ex.shutdown(wait=False, cancel_futures=True)
        assert stats_fields(ex) == counts(running=1, cancelled=1)


def test_put_takes_the_shutdown_sentinel_only_and_it_changes_nothing() -> None:
    with PriorityExecutor(2) as ex:
        work_queue(ex).put(None)
        work_queue(ex).put(None, block=False)
        work_queue(ex).put_nowait(None)
        with pytest.raises(TypeError, match="only None, the shutdown sentinel"):
            work_queue(ex).put(object())  # type: ignore[arg-type]
        assert work_queue(ex).empty()
        with pytest.raises(queue.Empty):
            work_queue(ex).get_nowait()  # the sentinel never comes out of a non-blocking get
        assert ex.submit(pow, 3, 2).result(timeout=TIMEOUT) == 9
        assert stats_fields(ex) == counts(completed=1)


def test_a_blocking_get_waits_for_a_task() -> None:
    with PriorityExecutor(1) as ex, blocked_worker(ex):
        box: list[Any] = []
        thread = in_thread(lambda: box.append(work_queue(ex).get()))
        time.sleep(0.02)  # it waits (no due time involved)
        assert box == []
        future = ex.submit(int)
        thread.join(TIMEOUT)
        assert not thread.is_alive()
        assert box[0].future is future


def test_a_blocking_get_times_out_with_empty() -> None:
    with PriorityExecutor(1) as ex:
        start = time.monotonic()
        with pytest.raises(queue.Empty):
            work_queue(ex).get(timeout=0.05)
        assert time.monotonic() - start >= 0.05
        with pytest.raises(ValueError, match="non-negative"):
            work_queue(ex).get(timeout=-1)


def test_a_blocking_get_on_a_shut_down_executor_returns_the_sentinel() -> None:
    ex = PriorityExecutor(1)
    ex.submit(int).result(timeout=TIMEOUT)
    ex.shutdown()
    assert call_bounded(lambda: work_queue(ex).get(), "get()") is None
    assert work_queue(ex).get(timeout=1) is None
    with pytest.raises(queue.Empty):
        work_queue(ex).get_nowait()


def test_a_blocking_get_waiting_when_shutdown_ends_the_work_returns_the_sentinel() -> None:
    ex = PriorityExecutor(1)
    box: list[Any] = ["not returned"]
    thread = in_thread(lambda: box.__setitem__(0, work_queue(ex).get()))
    ex.shutdown()
    thread.join(TIMEOUT)
    assert not thread.is_alive()
    assert box == [None]


def test_queue_clear_drops_what_has_not_started_and_reports_it() -> None:
    clock = ManualClock()
    ran: list[int] = []
    with PriorityExecutor(1, clock=clock) as ex, blocked_worker(ex) as (release, blocker):
        lane = ex.lane(max_running=1)
        futures = [ex.submit(ran.append, 1), ex.submit(ran.append, 2, delay=10)]
        futures += [lane.submit(ran.append, 3), lane.submit(ran.append, 4)]
        assert len(work_queue(ex).queue) == 4
        work_queue(ex).queue.clear()
        assert all(future.cancelled() for future in futures)
        assert cf.wait(futures, timeout=0).done == set(futures)
        assert work_queue(ex).empty() and ex.waiting() == []
        assert stats_fields(ex) == counts(running=1, cancelled=4)
        with pytest.raises(queue.Empty):
            work_queue(ex).get_nowait()
        release.set()
        blocker.result(timeout=TIMEOUT)
        clock.advance(20)
    assert ran == []


def test_a_dask_style_close_clears_the_queue_then_shuts_down() -> None:
    # dask.distributed's Worker.close(): clear the queue, then shut down waiting for what
    # runs only. With a ManualClock nothing else would ever end the delayed tasks.
    clock = ManualClock()
    ex = PriorityExecutor(2, clock=clock)
    with blocked_worker(ex) as (release, blocker):
        running = ex.submit(int, 7)
        waiting = [ex.submit(int, i, delay=1 + i) for i in range(5)]
        wait_until(lambda: running.done())
        work_queue(ex).queue.clear()
        release.set()
        call_bounded(lambda: ex.shutdown(wait=True), "shutdown(wait=True) after clear()")
    assert running.result() == 7 and blocker.result() is None
    assert all(future.cancelled() for future in waiting)
    assert stats_fields(ex) == counts(completed=2, cancelled=5)


def test_a_recurring_series_is_not_a_work_item() -> None:
    clock = ManualClock()
    runs: list[int] = []
    with PriorityExecutor(1, clock=clock) as ex:
        series = ex.submit_recurring(runs.append, 1, interval=10, delay=10)
        assert work_queue(ex).qsize() == 0 and len(work_queue(ex).queue) == 0
        with pytest.raises(queue.Empty):
            work_queue(ex).get_nowait()
        work_queue(ex).queue.clear()
        assert not series.done()
        clock.advance(10)
        clock.settle(TIMEOUT)
        assert runs == [1]
    assert series.cancelled()  # shutdown ends a series


def test_taking_a_task_out_frees_its_room_under_max_waiting() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock, max_waiting=1) as ex:
        lane = ex.lane(max_waiting=1)
        for target in (ex, lane):
            first = target.submit(int, delay=5)
            outcome, thread = submit_in_background(functools.partial(target.submit, int, delay=5))
            wait_until(functools.partial(blocked_in, target), what="a submit to wait for room")
            item = work_queue(ex).get_nowait()
            assert item.future is first
            thread.join(TIMEOUT)
            assert not thread.is_alive() and "error" not in outcome
            assert outcome["future"].cancel()


def test_the_race_a_worker_wins_the_task_is_never_handed_out() -> None:
    with PriorityExecutor(1) as ex:
        started, release = threading.Event(), threading.Event()

        def task() -> bool:
            started.set()
            return release.wait(TIMEOUT)

        future = ex.submit(task)
        assert started.wait(TIMEOUT)
        with pytest.raises(queue.Empty):
            work_queue(ex).get_nowait()
        release.set()
        assert future.result(timeout=TIMEOUT) is True


def test_the_race_the_drain_wins_the_task_never_starts() -> None:
    ran: list[int] = []
    with PriorityExecutor(1) as ex:
        with blocked_worker(ex) as (release, _):
            future = ex.submit(ran.append, 1)
            item = work_queue(ex).get_nowait()
            release.set()
        ex.submit(int).result(timeout=TIMEOUT)  # the worker went past where it stood
        assert item.future is future and not future.done()
    assert ran == []


@pytest.mark.parametrize("delayed", [False, True], ids=["ready", "coming-due"])
def test_under_load_each_task_is_started_or_handed_out_never_both(delayed: bool) -> None:
    clock = ManualClock()
    n = 2000
    ran: list[int] = []
    with PriorityExecutor(4, clock=clock) as ex:
        go = threading.Event()

        def task(i: int) -> int:
            ran.append(i)  # list.append is atomic
            return i

        futures: list[Future[int]] = []
        drained: list[list[Any]] = [[], []]

        def drainer(into: list[Any]) -> None:
            go.wait(TIMEOUT)
            while True:
                try:
                    into.append(work_queue(ex).get(block=False))
                except queue.Empty:
                    return

        threads = [in_thread(drainer, into) for into in drained]
        # Every worker held until the drainers start, then all take tasks at once.
        blockers = [ex.submit(go.wait, TIMEOUT, priority=1) for _ in range(4)]
        wait_until(lambda: ex.stats().running == 4, what="the workers to be held")
        for i in range(n):
            futures.append(ex.submit(task, i, delay=1 if delayed else None))
        go.set()
        if delayed:
            clock.advance(1)  # every task due at once: workers and drainers take them
        for thread in threads:
            thread.join(TIMEOUT * 3)
            assert not thread.is_alive()
        items = drained[0] + drained[1]
        handed = {item.future for item in items}
        assert len(handed) == len(items)  # no task handed out twice
        taken = {call_of(item)[1][0] for item in items}
        for future in futures:
            if future in handed:
                assert not future.done()
            else:
                future.result(timeout=TIMEOUT)
    assert len(ran) == len(set(ran))
    assert set(ran).isdisjoint(taken)
    assert set(ran) | taken == set(range(n))
    assert all(blocker.result() for blocker in blockers)
    assert stats_fields(ex) == counts(completed=len(ran) + 4, cancelled=len(taken))


def test_a_drain_after_shutdown_hands_out_what_waits_and_lets_the_executor_finish() -> None:
    clock = ManualClock()
    ex = PriorityExecutor(1, clock=clock)
    delayed = ex.submit(int, delay=60)
    ex.shutdown(wait=False)
    items = drain(ex)
    assert [item.future for item in items] == [delayed]
    # Nothing left to wait for: no one will ever advance the clock, and it need not.
    call_bounded(lambda: ex.shutdown(wait=True), "shutdown(wait=True)")
    assert not delayed.done()
    assert work_queue(ex).get(timeout=1) is None


def test_draining_many_tasks_takes_no_time_per_task_in_the_queues_length() -> None:
    n = 5000
    with PriorityExecutor(1) as ex, blocked_worker(ex):
        for i in range(n):
            ex.submit(int, i, priority=i % 7)
        start = time.monotonic()
        items = drain(ex)
        # A snapshot per get() would take minutes here; the drain takes well under a second.
        assert time.monotonic() - start < 10
    priorities = [call_of(item)[1][0] % 7 for item in items]
    assert len(items) == n and priorities == sorted(priorities, reverse=True)


# -- google-cloud-pubsub ---------------------------------------------------------------------


@pytest.mark.skipif(
    ThreadScheduler is None,
    reason="google-cloud-pubsub is not installed (pip install google-cloud-pubsub)",
)
@pytest.mark.parametrize("cls", [ThreadPoolExecutor, PriorityExecutor])
def test_pubsubs_thread_scheduler_hands_back_the_messages_not_started(cls: type[Any]) -> None:
    executor = cls(max_workers=1)
    scheduler = ThreadScheduler(executor=executor)
    started, release = threading.Event(), threading.Event()
    handled: list[str] = []

    def callback(message: str) -> None:
        handled.append(message)
        if message == "first":
            started.set()
            release.wait(TIMEOUT)

    scheduler.schedule(callback, "first")
    assert started.wait(TIMEOUT)
    for message in ("second", "third", "fourth"):
        scheduler.schedule(callback, message)
    dropped = call_bounded(lambda: scheduler.shutdown(await_msg_callbacks=False), "shutdown")
    assert dropped == ["second", "third", "fourth"]
    with pytest.warns(RuntimeWarning, match="after executor shutdown"):
        scheduler.schedule(callback, "fifth")
    release.set()
    call_bounded(lambda: executor.shutdown(wait=True), "the executor's shutdown")
    assert handled == ["first"]
