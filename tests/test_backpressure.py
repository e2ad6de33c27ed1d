"""Backpressure as callers need it: a bound per lane as well as per executor, a submit that
gives up after ``waiting_timeout`` (or at once) with ``QueueFull``, and a submit from an
asyncio event loop that never stalls the loop; and what ``waiting()`` and ``repr()`` say
of a throttled task."""

from __future__ import annotations

import asyncio
import math
import queue
import threading
import time
from concurrent.futures import Future
from datetime import timedelta
from typing import Any

import pytest
from helpers import (
    TIMEOUT,
    Target,
    assert_room_for,
    blocked_in,
    blocked_worker,
    call_bounded,
    in_thread,
    submit_in_background,
    wait_until,
)

from priority_executor import PriorityExecutor, QueueFull, Retry
from priority_executor.testing import ManualClock

# -- a bound per lane --------------------------------------------------------------------------


def test_a_crawler_bounds_each_host_and_a_slow_hosts_backlog_does_not_hold_back_a_fast_one() -> (
    None
):
    """Migrating a crawler from ThreadPoolExecutor: one lane per host, two fetches at a time
    and at most five more waiting per host. A slow host fills its own bound only: its next
    page waits for room, while every page of a fast host is submitted and fetched."""
    slow_host_answers = threading.Event()

    def fetch(url: str) -> str:
        if url.startswith("https://slow.example/"):
            assert slow_host_answers.wait(TIMEOUT)
        return f"<html>{url}</html>"

    with PriorityExecutor(max_workers=4) as executor:
        hosts = {
            host: executor.lane(host, max_running=2, max_waiting=5)
            for host in ("slow.example", "fast.example")
        }

        def crawl(host: str, pages: range) -> list[Future[str]]:
            return [hosts[host].submit(fetch, f"https://{host}/{page}") for page in pages]

        try:
            slow = call_bounded(lambda: crawl("slow.example", range(7)), "the slow host's pages")
            wait_until(lambda: hosts["slow.example"].stats().running == 2, what="two slow fetches")
            outcome, thread = submit_in_background(lambda: crawl("slow.example", range(7, 8))[0])
            wait_until(lambda: blocked_in(hosts["slow.example"]) == 1, what="page 7 to wait")
            fast = call_bounded(lambda: crawl("fast.example", range(40)), "the fast host's pages")
            assert [page.result(timeout=TIMEOUT) for page in fast] == [
                f"<html>https://fast.example/{page}</html>" for page in range(40)
            ]
            assert outcome == {}  # still waiting for room on the slow host
        finally:
            slow_host_answers.set()
        thread.join(TIMEOUT)
        slow.append(outcome["future"])
        assert [page.result(timeout=TIMEOUT) for page in slow] == [
            f"<html>https://slow.example/{page}</html>" for page in range(8)
        ]


def test_a_lanes_task_needs_room_in_its_lane_and_in_the_executor() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock, max_waiting=3, waiting_timeout=0) as executor:
        reports = executor.lane("reports", max_waiting=2, waiting_timeout=0)
        queued = [reports.submit(int, delay=1) for _ in range(2)]
        with pytest.raises(QueueFull, match=r"max_waiting=2 of lane 'reports' is reached"):
            reports.submit(int, delay=1)
        assert queued.pop(0).cancel()
        queued += [executor.submit(int, delay=1) for _ in range(2)]  # room in the lane only
        with pytest.raises(QueueFull, match=r"max_waiting=3 of the executor is reached"):
            reports.submit(int, delay=1)
        assert executor.stats().scheduled == 3  # nothing was queued by either refusal
        clock.advance(1)
        assert [future.result(timeout=TIMEOUT) for future in queued] == [0, 0, 0]
        assert reports.submit(abs, -2).result(timeout=TIMEOUT) == 2


@pytest.mark.parametrize("round_", range(5))
def test_lane_bounds_hold_under_many_producers_and_lose_nothing(round_: int) -> None:
    producers, each, limit = 6, 120, 3
    ran: list[int] = []
    highest = {"a": 0, "b": 0}
    with PriorityExecutor(2, max_waiting=5) as executor:
        lanes = {name: executor.lane(name, max_running=1, max_waiting=limit) for name in highest}
        stop = threading.Event()

        def monitor() -> None:
            while not stop.is_set():
                for name, lane in lanes.items():
                    stats = lane.stats()
                    waiting = stats.scheduled + stats.ready + stats.throttled
                    highest[name] = max(highest[name], waiting)
                time.sleep(0)

        watcher = in_thread(monitor)

        def produce(base: int) -> None:
            for i in range(each):
                target = lanes["ab"[i % 2]] if i % 3 else executor
                target.submit(ran.append, base + i, priority=i % 3)

        threads = [in_thread(produce, k * 1000) for k in range(producers)]
        for thread in threads:
            thread.join(TIMEOUT)
            assert not thread.is_alive()
        executor.shutdown(wait=True)
        stop.set()
        watcher.join(TIMEOUT)
    assert 0 < highest["a"] <= limit and 0 < highest["b"] <= limit
    assert sorted(ran) == sorted(k * 1000 + i for k in range(producers) for i in range(each))


def test_every_way_out_of_a_lanes_waiting_states_gives_its_room_back() -> None:
    clock = ManualClock()
    limit = 3
    flaky = iter([RuntimeError("first attempt")])

    def fails_once() -> int:
        for exc in flaky:
            raise exc
        return 7

    with PriorityExecutor(2, clock=clock) as executor:
        lane = executor.lane("jobs", max_running=1, max_waiting=limit)
        assert_room_for(lane, limit)
        started = [lane.submit(int, delay=1) for _ in range(limit)]
        clock.advance(1)
        assert [future.result(timeout=TIMEOUT) for future in started] == [0] * limit
        assert_room_for(lane, limit)
        with blocked_worker(executor), blocked_worker(executor):
            late = [lane.submit(int, expires=1) for _ in range(limit)]
            clock.advance(1)
            wait_until(lambda: all(future.done() for future in late), what="the expiries")
        assert_room_for(lane, limit)
        moved = [lane.submit(int, delay=5) for _ in range(limit)]
        assert all(executor.reschedule(future, priority=3, delay=7) for future in moved)
        assert all(future.cancel() for future in moved)
        assert_room_for(lane, limit)
        series = lane.submit_recurring(int, interval=1, delay=1)
        clock.advance(1)
        wait_until(lambda: lane.stats().scheduled == 1, what="the series' next run")
        assert series.cancel()
        assert_room_for(lane, limit)
        throttled = [lane.submit(time.sleep, 0.01) for _ in range(limit)]
        assert [future.result(timeout=TIMEOUT) for future in throttled] == [None] * limit
        assert_room_for(lane, limit)
        retried = executor.lane("retried", max_waiting=1, retry=Retry(2, backoff=1))
        first = retried.submit(fails_once)
        wait_until(lambda: retried.stats().scheduled == 1, what="the retry to wait")
        clock.advance(1)
        assert first.result(timeout=TIMEOUT) == 7
        assert_room_for(retried, 1)


# -- giving up: waiting_timeout ---------------------------------------------------------------


@pytest.mark.parametrize("bound", ["executor", "lane"])
def test_a_submit_gives_up_after_waiting_timeout_and_queues_nothing(bound: str) -> None:
    clock = ManualClock()  # the timeout is in real seconds, as Future.result(timeout=)
    if bound == "executor":
        executor = PriorityExecutor(1, clock=clock, max_waiting=1, waiting_timeout=0.05)
        target: Target = executor
    else:
        executor = PriorityExecutor(1, clock=clock)
        target = executor.lane(max_waiting=1, waiting_timeout=timedelta(milliseconds=50))
    with executor:
        held = target.submit(int, delay=10)
        started = time.monotonic()
        with pytest.raises(QueueFull, match=r"no room came within waiting_timeout=0\.05 s"):
            call_bounded(lambda: target.submit(int), "a submit with waiting_timeout=0.05")
        waited = time.monotonic() - started
        assert 0.04 <= waited < 5
        assert [task.future for task in executor.waiting()] == [held]
        assert held.cancel()
        assert target.submit(int).result(timeout=TIMEOUT) == 0  # room again: it goes through


def test_a_submit_with_a_timeout_goes_on_when_room_comes_in_time() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock, max_waiting=1, waiting_timeout=TIMEOUT) as executor:
        held = executor.submit(int, delay=5)
        outcome, thread = submit_in_background(lambda: executor.submit(int))
        wait_until(lambda: blocked_in(executor) == 1, what="the submit to wait for room")
        clock.advance(5)  # the held task starts: room
        thread.join(TIMEOUT)
        assert outcome["future"].result(timeout=TIMEOUT) == held.result(timeout=TIMEOUT) == 0


@pytest.mark.parametrize("bound", ["executor", "lane"])
def test_waiting_timeout_zero_sheds_load_at_once_with_a_queue_full(bound: str) -> None:
    clock = ManualClock()
    if bound == "executor":
        executor = PriorityExecutor(2, clock=clock, max_waiting=2, waiting_timeout=0)
        target: Target = executor
    else:
        executor = PriorityExecutor(2, clock=clock)
        target = executor.lane("thumbnails", max_waiting=2, waiting_timeout=0)
    with executor:
        accepted, shed = [], 0
        for n in range(5):
            try:
                accepted.append(target.submit(abs, -n, delay=1))
            except queue.Full:  # what a bounded queue.Queue's put(timeout=) raises too
                shed += 1
        assert (len(accepted), shed) == (2, 3)
        assert executor.stats().scheduled == 2
        clock.advance(1)
        assert [future.result(timeout=TIMEOUT) for future in accepted] == [0, 1]
        assert target.submit(abs, -7).result(timeout=TIMEOUT) == 7  # it goes on


def test_queue_full_is_not_a_runtime_error_which_means_shut_down() -> None:
    assert issubclass(QueueFull, queue.Full)
    assert not issubclass(QueueFull, RuntimeError)


# -- an asyncio service: loop.run_in_executor ---------------------------------------------------


@pytest.mark.parametrize("bound", ["executor", "lane"])
def test_an_asyncio_service_is_never_stalled_by_a_full_executor(bound: str) -> None:
    """A service hands blocking calls to the executor with ``loop.run_in_executor``. A
    submit that found no room would block the loop, and every request it serves: it raises
    ``QueueFull`` instead, and the service waits for room in another thread."""
    release = threading.Event()
    # On a loop that a blocked submit stalls, only this releases the handlers.
    rescue = threading.Timer(0.6, release.set)
    gaps: list[float] = []

    def handle(request: int) -> int:
        assert release.wait(TIMEOUT)
        return request

    async def heartbeat(stop: asyncio.Event) -> None:
        last = time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(0.005)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    async def service(target: Target) -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        beating = asyncio.ensure_future(heartbeat(stop))
        rescue.start()
        running = [loop.run_in_executor(target, handle, n) for n in range(2)]
        while target.stats().running < 2:
            await asyncio.sleep(0.001)
        queued = [loop.run_in_executor(target, handle, n) for n in range(2, 4)]  # now full
        with pytest.raises(QueueFull, match="asyncio event loop"):
            loop.run_in_executor(target, handle, 4)
        # How a coroutine waits for room: in a thread of its own, not the loop's.
        waiting_for_room = asyncio.ensure_future(asyncio.to_thread(target.submit, handle, 4))
        release.set()
        fifth = await asyncio.wrap_future(await waiting_for_room)
        assert [*await asyncio.gather(*running, *queued), fifth] == [0, 1, 2, 3, 4]
        stop.set()
        await beating

    try:
        if bound == "executor":
            with PriorityExecutor(2, max_waiting=2) as executor:
                asyncio.run(service(executor))
        else:
            with PriorityExecutor(2) as executor:
                asyncio.run(service(executor.lane("requests", max_waiting=2)))
    finally:
        rescue.cancel()
        release.set()
    assert gaps and max(gaps) < 0.3


# -- shutdown, and the executor's own threads ----------------------------------------------------


@pytest.mark.parametrize("closing", ["the lane", "the executor"])
@pytest.mark.parametrize("timeout", [None, TIMEOUT])
def test_shutdown_releases_a_submit_waiting_for_its_lanes_room(
    closing: str, timeout: float | None
) -> None:
    clock = ManualClock()
    executor = PriorityExecutor(1, clock=clock)
    uploads = executor.lane("uploads", max_waiting=1, waiting_timeout=timeout)
    held = uploads.submit(int, delay=10)
    try:
        outcome, thread = submit_in_background(lambda: uploads.submit(int))
        wait_until(lambda: blocked_in(uploads) == 1, what="the submit to wait for room")
        (uploads if closing == "the lane" else executor).shutdown(wait=False)
        thread.join(TIMEOUT)
        assert type(outcome["error"]) is RuntimeError
        assert blocked_in(uploads) == 0
    finally:
        clock.advance(10)
        executor.shutdown(wait=True)
    assert held.result(timeout=TIMEOUT) == 0


def test_a_task_submitting_into_its_full_lane_and_executor_is_admitted() -> None:
    """A worker that waited for room would hold up the very workers that make it."""
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock, max_waiting=1, waiting_timeout=0) as executor:
        pages = executor.lane("pages", max_waiting=1, waiting_timeout=0)
        go = threading.Event()

        def parent() -> Future[int]:
            assert go.wait(TIMEOUT)
            return pages.submit(int)  # past both bounds

        running = pages.submit(parent)
        wait_until(lambda: executor.stats().running == 1, what="the parent to start")
        filler = pages.submit(int, delay=5)  # fills both bounds
        go.set()
        assert running.result(timeout=TIMEOUT).result(timeout=TIMEOUT) == 0
        clock.advance(5)
        assert filler.result(timeout=TIMEOUT) == 0


# -- options -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"waiting_timeout": 1}, ValueError, "waiting_timeout=1 .*give max_waiting too"),
        ({"max_waiting": 0}, ValueError, "max_waiting must be at least 1"),
        ({"max_waiting": 2.0}, TypeError, "max_waiting must be an int"),
        ({"max_waiting": 1, "waiting_timeout": -1}, ValueError, "waiting_timeout must be"),
        ({"max_waiting": 1, "waiting_timeout": math.inf}, ValueError, "waiting_timeout must be"),
        ({"max_waiting": 1, "waiting_timeout": True}, TypeError, "waiting_timeout must be"),
        ({"max_waiting": 1, "waiting_timeout": "1"}, TypeError, "waiting_timeout must be"),
    ],
)
def test_bad_bounds_raise_at_the_call_and_change_nothing(
    options: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        PriorityExecutor(1, **options)
    with PriorityExecutor(1) as executor:
        with pytest.raises(error, match=match):
            executor.lane("api", **options)
        assert executor.lanes() == {}
        assert executor.lane("api").submit(abs, -1).result(timeout=TIMEOUT) == 1


def test_a_lanes_bound_is_an_option_it_keeps_and_shows() -> None:
    with PriorityExecutor(1) as executor:
        api = executor.lane("api", max_waiting=100, waiting_timeout=timedelta(seconds=0.5))
        assert (api.max_waiting, api.waiting_timeout) == (100, 0.5)
        assert repr(api) == "<Lane 'api' max_waiting=100 waiting_timeout=0.5>"
        assert executor.lane("api") is api
        assert executor.lane("api", max_waiting=100) is api
        with pytest.raises(ValueError, match="lane 'api' has max_waiting=100, not 10"):
            executor.lane("api", max_waiting=10)
        blocking = executor.lane("blocking", max_waiting=3)
        assert (blocking.max_waiting, blocking.waiting_timeout) == (3, None)
        assert (executor.lane().max_waiting, executor.lane().waiting_timeout) == (None, None)
        assert set(executor.lanes()) == {"api", "blocking"}


# -- why is my task waiting? ---------------------------------------------------------------------


def test_waiting_says_which_limit_holds_a_throttled_task_and_when_it_may_start() -> None:
    clock = ManualClock()
    with PriorityExecutor(2, clock=clock) as executor:
        api = executor.lane("api", max_starts=2, per=10)
        device = executor.lane("device", max_running=1, cooldown=3)
        calls = [api.submit(int) for _ in range(3)]
        readings = [device.submit(int) for _ in range(2)]
        clock.settle()
        assert repr(executor).endswith("running=0 ready=0 throttled=2 scheduled=0>")
        why = {task.lane: (task.state, task.held_by, task.starts_in) for task in executor.waiting()}
        assert why == {
            "api": ("throttled", "max_starts", 10.0),
            "device": ("throttled", "cooldown", 3.0),
        }
        clock.advance(2)
        assert [(task.lane, task.starts_in) for task in executor.waiting()] == [
            ("api", 8.0),
            ("device", 1.0),
        ]
        clock.advance(8)
        clock.settle()
        assert [future.result(timeout=TIMEOUT) for future in calls + readings] == [0] * 5
        assert executor.waiting() == []


def test_tasks_beyond_their_lanes_room_say_what_holds_them_before_a_worker_looks() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as executor:
        api = executor.lane("api", max_starts=2, per=10)
        with blocked_worker(executor):
            calls = [api.submit(abs, -n) for n in range(3)]
            # The first two start as soon as a worker is free, and fill the window.
            assert [(task.state, task.held_by, task.starts_in) for task in executor.waiting()] == [
                ("ready", None, None),
                ("ready", None, None),
                ("throttled", "max_starts", 10.0),
            ]
        assert [call.result(timeout=TIMEOUT) for call in calls[:2]] == [0, 1]
        clock.advance(10)
        assert calls[2].result(timeout=TIMEOUT) == 2


def test_a_task_held_by_max_running_waits_for_a_run_to_end() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as executor:
        database = executor.lane("database", max_running=1)
        done = threading.Event()
        first = database.submit(done.wait, TIMEOUT)
        wait_until(lambda: executor.stats().running == 1, what="the first query to start")
        second = database.submit(int)  # held back, though no worker has looked at it yet
        later = executor.submit(int, priority=1)
        [ready, throttled] = executor.waiting()
        assert (ready.future, ready.state, ready.held_by, ready.starts_in) == (
            later,
            "ready",
            None,
            None,
        )
        assert (throttled.future, throttled.state, throttled.held_by, throttled.starts_in) == (
            second,
            "throttled",
            "max_running",
            None,
        )
        assert "running=1 ready=1 throttled=1 scheduled=0" in repr(executor)
        done.set()
        assert first.result(timeout=TIMEOUT) is True
        assert second.result(timeout=TIMEOUT) == later.result(timeout=TIMEOUT) == 0


def test_a_lane_call_that_finds_the_lane_or_refuses_its_options_adds_no_bound() -> None:
    # Only a lane really made with max_waiting makes submits look for room: a call that
    # returns an existing lane, or refuses its options, leaves the executor as it was.
    with PriorityExecutor(2) as executor:
        executor.lane("api", max_running=1)
        with pytest.raises(ValueError, match="max_running"):
            executor.lane("api", max_running=2, max_waiting=3)
        assert executor.lane("api").max_waiting is None
        assert not executor._scheduler.gated
        bounded = executor.lane("bounded", max_waiting=3)
        assert executor._scheduler.gated
        assert bounded.submit(int).result(timeout=TIMEOUT) == 0
