"""Live control: executor.waiting(), a snapshot of what waits to start, and
executor.reschedule(), which changes a task that has not started."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from datetime import datetime, timedelta
from typing import Any

import pytest
from helpers import (
    TIMEOUT,
    Boom,
    assert_room_for,
    blocked_in,
    blocked_worker,
    in_thread,
    shutdown_bounded,
    stats_fields,
    submit_in_background,
    wait_until,
)
from test_interleavings import Pause, pause_before

from priority_executor import PriorityExecutor, Retry, WaitingTask, _control
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


# -- reschedule ----------------------------------------------------------------------------


def waiting_of(ex: PriorityExecutor, future: Future[Any]) -> WaitingTask:
    (entry,) = [w for w in ex.waiting() if w.future is future]
    return entry


def test_reschedule_a_scheduled_task_later_earlier_and_to_now() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        future = ex.submit(int, delay=10)
        assert ex.reschedule(future, delay=20)
        clock.advance(15)
        assert waiting_of(ex, future).due_in == pytest.approx(5)
        assert ex.reschedule(future, delay=timedelta(seconds=2))
        assert waiting_of(ex, future).due_in == pytest.approx(2)
        assert ex.stats().scheduled == 1
        assert ex.reschedule(future, delay=0)  # due now: ready at once, no advance()
        assert future.result(timeout=TIMEOUT) == 0
        assert stats_fields(ex) == {**dict.fromkeys(stats_fields(ex), 0), "completed": 1}


def test_reschedule_a_ready_task_into_the_future_and_back() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex, blocked_worker(ex) as (release, _):
        future = ex.submit(int)
        assert ex.stats().ready == 1
        assert ex.reschedule(future, run_at=clock_wall(clock, 30))
        assert (ex.stats().ready, ex.stats().scheduled) == (0, 1)
        assert waiting_of(ex, future).state == "scheduled"
        assert waiting_of(ex, future).due_in == pytest.approx(30, abs=1e-3)  # microseconds
        clock.advance(31)
        assert (ex.stats().ready, ex.stats().scheduled) == (1, 0)
        release.set()
        assert future.result(timeout=TIMEOUT) == 0


def clock_wall(clock: ManualClock, seconds: float) -> datetime:
    return datetime.fromtimestamp(clock.wall() + seconds)


def test_a_new_priority_reorders_the_ready_heap() -> None:
    ran: list[str] = []
    with PriorityExecutor(1, clock=ManualClock()) as ex:
        with blocked_worker(ex):
            futures = {name: ex.submit(ran.append, name) for name in ("a", "b", "c", "d")}
            assert ex.reschedule(futures["c"], priority=5)
            assert ex.reschedule(futures["a"], priority=-5)
            # Among equal priorities a rescheduled task counts as submitted now.
            assert ex.reschedule(futures["b"], priority=0)
            order = [w.future for w in ex.waiting()]
            assert order == [futures[name] for name in ("c", "d", "b", "a")]
            assert [w.priority for w in ex.waiting()] == [5, 0, 0, -5]
        for future in futures.values():
            future.result(timeout=TIMEOUT)
    assert ran == ["c", "d", "b", "a"]


def test_reschedule_expires_on_a_task_without_then_with_a_deadline() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex, blocked_worker(ex):
        plain = ex.submit(int)
        pending = ex.submit(int, delay=5)
        assert ex.reschedule(plain, expires=10)
        assert ex.reschedule(pending, expires=timedelta(seconds=8))
        assert waiting_of(ex, plain).expires_in == pytest.approx(10)
        assert ex.reschedule(plain, expires=20)  # replaces the deadline: 10 s no longer holds
        clock.advance(10)
        assert not plain.done()
        assert pending.cancelled()  # its new deadline passed before it could start
        clock.advance(10)
        assert plain.cancelled()
        assert ex.stats().expired == 2


def test_a_moved_due_time_keeps_the_deadline_that_a_task_had() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        future = ex.submit(int, delay=5, expires=10)
        assert ex.reschedule(future, delay=8)
        assert waiting_of(ex, future).expires_in == pytest.approx(10)
        with pytest.raises(ValueError, match="expires must fall after"):
            ex.reschedule(future, delay=10)  # at its deadline
        clock.advance(8)
        assert future.result(timeout=TIMEOUT) == 0


def test_reschedule_a_throttled_task() -> None:
    ran: list[str] = []
    clock = ManualClock()
    with PriorityExecutor(2, clock=clock) as ex:
        lane = ex.lane(max_running=1)
        started, release = threading.Event(), threading.Event()

        def busy() -> None:
            started.set()
            assert release.wait(TIMEOUT)

        running = lane.submit(busy)
        assert started.wait(TIMEOUT)
        futures = {name: lane.submit(ran.append, name) for name in ("a", "b", "c")}
        wait_until(lambda: ex.stats().throttled == 3, what="three throttled")
        assert ex.reschedule(futures["c"], priority=5)  # reordered within its lane
        assert [w.future for w in lane.waiting()] == [futures[n] for n in ("c", "a", "b")]
        assert all(w.state == "throttled" for w in lane.waiting())
        assert ex.reschedule(futures["a"], delay=10)  # out of the lane's heap, to wait
        assert (lane.stats().throttled, lane.stats().scheduled) == (2, 1)
        release.set()
        running.result(timeout=TIMEOUT)
        futures["b"].result(timeout=TIMEOUT)
        assert ran == ["c", "b"]
        clock.advance(10)
        futures["a"].result(timeout=TIMEOUT)
    assert ran == ["c", "b", "a"]
    assert lane.stats().completed == 4


def test_reschedule_a_series_priority_for_every_run_and_its_waiting_run() -> None:
    clock = ManualClock()
    runs = []
    with PriorityExecutor(1, clock=clock) as ex:
        series = ex.submit_recurring(lambda: runs.append(clock.now()), interval=10, delay=10)
        assert ex.reschedule(series, priority=3, delay=2)
        clock.advance(2)
        wait_until(lambda: len(runs) == 1 and ex.stats().scheduled == 1, what="the first run")
        assert waiting_of(ex, series).priority == 3  # the next run keeps it
        assert waiting_of(ex, series).due_in == pytest.approx(10)
        assert ex.reschedule(series, delay=1)
        clock.advance(1)
        wait_until(lambda: len(runs) == 2 and ex.stats().scheduled == 1, what="the second run")
        assert runs == [2, 3]
        with pytest.raises(ValueError, match="expires"):
            ex.reschedule(series, expires=5)
        series.cancel()
        assert not ex.reschedule(series, priority=1)


def test_reschedule_a_retry_waiting_for_its_backoff() -> None:
    clock = ManualClock()
    attempts = []

    def flaky() -> str:
        attempts.append(clock.now())
        if len(attempts) == 1:
            raise Boom
        return "done"

    with PriorityExecutor(1, clock=clock, retry=Retry(2, backoff=30)) as ex:
        future = ex.submit(flaky)
        wait_until(lambda: ex.stats().scheduled == 1, what="the retry")
        assert ex.reschedule(future, delay=1)
        clock.advance(1)
        assert future.result(timeout=TIMEOUT) == "done"
    assert attempts == [0, 1]


def test_reschedule_of_a_started_or_ended_task_returns_false() -> None:
    with PriorityExecutor(1, clock=ManualClock()) as ex:
        with blocked_worker(ex) as (_, running):
            assert not ex.reschedule(running, priority=1)
            cancelled = ex.submit(int)
            assert cancelled.cancel()
            assert not ex.reschedule(cancelled, delay=1)
        done = ex.submit(int)
        assert done.result(timeout=TIMEOUT) == 0
        assert not ex.reschedule(done, priority=2)
        assert not ex.reschedule(done)
        waiting = ex.submit(int, delay=1)
        assert ex.reschedule(waiting)  # nothing given: nothing changes
        assert waiting_of(ex, waiting).due_in == pytest.approx(1)
        waiting.cancel()


@pytest.mark.parametrize(
    ("kwargs", "error", "names"),
    [
        ({"priority": 1.5}, TypeError, "priority"),
        ({"priority": True}, TypeError, "priority"),
        ({"delay": -1}, ValueError, "delay"),
        ({"delay": float("nan")}, ValueError, "delay"),
        ({"delay": "soon"}, TypeError, "delay"),
        ({"run_at": 5}, TypeError, "run_at"),
        ({"delay": 1, "run_at": "x"}, ValueError, "delay and run_at"),
        ({"expires": -1}, ValueError, "expires"),
        ({"expires": "later"}, TypeError, "expires"),
        ({"delay": 5, "expires": 5}, ValueError, "expires"),
        ({"delay": 50}, ValueError, "expires"),  # past the task's deadline
    ],
)
def test_bad_reschedule_input_names_the_argument_and_changes_nothing(
    kwargs: dict[str, Any], error: type[Exception], names: str
) -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        future = ex.submit(int, delay=3, expires=30, priority=2)
        before = ex.waiting()
        with pytest.raises(error, match=names):
            ex.reschedule(future, **kwargs)
        assert ex.waiting() == before
        clock.advance(3)
        assert future.result(timeout=TIMEOUT) == 0
        assert ex.submit(int).result(timeout=TIMEOUT) == 0


def test_reschedule_of_a_foreign_future_is_a_value_error() -> None:
    with PriorityExecutor(1) as ex, PriorityExecutor(1) as other:
        theirs = other.submit(int)
        for future in (Future(), theirs):
            with pytest.raises(ValueError, match="future must be one that this executor"):
                ex.reschedule(future, priority=1)
        lane_future = ex.lane().submit(int, delay=3600)
        assert ex.reschedule(lane_future, delay=0)  # a lane's task is the executor's
        assert lane_future.result(timeout=TIMEOUT) == 0


def test_reschedule_earlier_than_the_promoters_sleep_wakes_it() -> None:
    """Real clock: the promoter sleeps until the hour is up, and must wake for the task."""
    with PriorityExecutor(1) as ex:
        held = ex.submit(int, delay=3600)
        wait_until(lambda: ex._scheduler.promoter.sleeps_until < float("inf"), what="a sleep")
        assert ex.reschedule(held, delay=0.05)
        assert held.result(timeout=TIMEOUT) == 0
        # A task that was due at once started no promoter thread: reschedule starts it.
        with PriorityExecutor(1) as fresh, blocked_worker(fresh) as (release, _):
            ready = fresh.submit(int)
            assert fresh.reschedule(ready, delay=0.05)
            release.set()
            assert ready.result(timeout=TIMEOUT) == 0


def test_a_cancel_after_reschedule_reaches_the_rescheduled_task() -> None:
    with PriorityExecutor(1, clock=ManualClock()) as ex:
        future = ex.submit(int, delay=5)
        calls: list[Future[Any]] = []
        future.add_done_callback(calls.append)
        for delay in (1, 2, 3):
            assert ex.reschedule(future, delay=delay)
        assert future.cancel()
        assert calls == [future]
        assert ex.stats().cancelled == 1 and ex.stats().scheduled == 0
        assert ex.waiting() == []


# Races: each is decided by who takes the scheduler's lock first. The pause holds one side
# right before it takes the lock while the other runs to the end (see test_interleavings).


def paused_reschedule(ex: PriorityExecutor, future: Future[Any], **kwargs: Any) -> Any:
    """Start reschedule() in a thread, paused once its arguments are checked, before it
    takes the lock. Returns (pause, outcome, thread)."""
    pause = Pause()
    original = _control.reschedule

    def paused(*args: Any, **kwargs: Any) -> Any:
        _control.reschedule = original  # this call only
        pause()
        return original(*args, **kwargs)

    _control.reschedule = paused
    outcome: dict[str, Any] = {}
    thread = in_thread(lambda: outcome.update(result=ex.reschedule(future, **kwargs)))
    assert pause.reached.wait(TIMEOUT)
    return pause, outcome, thread


def finish(pause: Pause, outcome: dict[str, Any], thread: threading.Thread) -> Any:
    pause.go_on.set()
    thread.join(TIMEOUT)
    assert not thread.is_alive()
    return outcome["result"]


def test_race_start_before_reschedule() -> None:
    with PriorityExecutor(1) as ex:
        with blocked_worker(ex) as (release, _):
            future = ex.submit(int)
            pause, outcome, thread = paused_reschedule(ex, future, delay=3600)
            release.set()
            assert future.result(timeout=TIMEOUT) == 0
        assert finish(pause, outcome, thread) is False
        assert ex.stats().scheduled == 0


def test_race_reschedule_before_start() -> None:
    with PriorityExecutor(1, clock=ManualClock()) as ex, blocked_worker(ex) as (release, blocker):
        future = ex.submit(int)
        pause = Pause()
        scheduler = ex._scheduler
        scheduler.take = pause_before(scheduler.take, pause)  # type: ignore[method-assign]
        release.set()
        blocker.result(timeout=TIMEOUT)
        assert pause.reached.wait(TIMEOUT)  # the worker, about to take the task
        assert ex.reschedule(future, delay=3600)
        pause.go_on.set()
        wait_until(lambda: ex.stats().running == 0, what="the worker to look")
        assert not future.done()
        assert ex.stats().scheduled == 1
        future.cancel()


def test_race_cancel_before_reschedule() -> None:
    with PriorityExecutor(1, clock=ManualClock()) as ex:
        future = ex.submit(int, delay=5)
        pause, outcome, thread = paused_reschedule(ex, future, delay=1)
        assert future.cancel()
        assert finish(pause, outcome, thread) is False
        assert ex.stats().cancelled == 1 and ex.waiting() == []


def test_race_cancel_while_reschedule_holds_the_lock() -> None:
    """The cancel's done-callback finds the lock taken, posts the cancellation, and
    reschedule completes it as it releases the lock: on the rescheduled task."""
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        future = ex.submit(int, delay=5)
        scheduler = ex._scheduler
        pause = Pause()
        scheduler.queue = pause_before(scheduler.queue, pause)  # type: ignore[method-assign]
        outcome: dict[str, Any] = {}
        thread = in_thread(lambda: outcome.update(result=ex.reschedule(future, delay=1)))
        assert pause.reached.wait(TIMEOUT)
        assert future.cancel()
        assert finish(pause, outcome, thread) is True
        assert ex.stats().cancelled == 1 and ex.waiting() == []
        clock.advance(5)
        assert ex.stats().completed == 0


def test_race_expiry_before_reschedule() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        future = ex.submit(int, delay=5, expires=10)
        pause, outcome, thread = paused_reschedule(ex, future, priority=3)
        clock.advance(10)
        assert future.cancelled()
        assert finish(pause, outcome, thread) is False
        assert ex.stats().expired == 1 and ex.waiting() == []


def test_race_reschedule_before_expiry() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        future = ex.submit(int, delay=50, expires=60)
        scheduler = ex._scheduler
        pause = Pause()
        scheduler.promote_due = pause_before(scheduler.promote_due, pause)  # type: ignore[method-assign]
        advancing = in_thread(clock.advance, 60)
        assert pause.reached.wait(TIMEOUT)  # time has moved; its deadline not yet applied
        assert ex.reschedule(future, expires=100)
        pause.go_on.set()
        advancing.join(TIMEOUT)
        assert not advancing.is_alive()
        assert future.result(timeout=TIMEOUT) == 0  # due since 50, deadline at 160
        assert ex.stats().expired == 0


@pytest.mark.parametrize("round_", range(5))
def test_reschedule_under_running_workers_loses_and_repeats_nothing(round_: int) -> None:
    runs: list[int] = []
    with PriorityExecutor(2) as ex:
        futures = [ex.submit(runs.append, n, priority=n % 3) for n in range(400)]

        def shuffle(offset: int) -> None:
            for i, future in enumerate(futures[offset::3]):
                if i % 2:
                    ex.reschedule(future, priority=-i)
                else:
                    ex.reschedule(future, delay=0.001 * (i % 4), expires=TIMEOUT)

        movers = [in_thread(shuffle, k) for k in range(3)]
        for mover in movers:
            mover.join(TIMEOUT)
        for future in futures:
            future.result(timeout=TIMEOUT)
    assert sorted(runs) == list(range(400))
    assert ex.stats().completed == 400


# -- max_waiting ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "error"), [(0, ValueError), (-3, ValueError), (1.5, TypeError), (True, TypeError)]
)
def test_bad_max_waiting_raises_at_the_constructor(value: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="max_waiting"):
        PriorityExecutor(1, max_waiting=value)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("round_", range(10))
@pytest.mark.parametrize("limit", [1, 5])  # 1: every submit races the others for the room
def test_max_waiting_bounds_what_waits_under_many_producers_and_loses_nothing(
    limit: int, round_: int
) -> None:
    producers, each = 8, 150
    ran: list[int] = []
    highest = 0
    with PriorityExecutor(2, max_waiting=limit) as ex:
        stop = threading.Event()

        def monitor() -> None:
            nonlocal highest
            while not stop.is_set():
                stats = ex.stats()
                highest = max(highest, stats.scheduled + stats.ready + stats.throttled)
                # Lets the other threads have the GIL: else each hand-off to a producer
                # woken for room waits for the switch interval, and a round takes seconds.
                time.sleep(0)

        watcher = in_thread(monitor)
        lane = ex.lane(max_running=1)

        def produce(base: int) -> None:
            for i in range(each):
                target = lane if i % 5 == 0 else ex
                target.submit(ran.append, base + i, priority=i % 3)

        threads = [in_thread(produce, k * 1000) for k in range(producers)]
        for thread in threads:
            # 1,200 hand-offs of one room: well under a second alone, many seconds on a
            # machine busy with other work. The bound is for a hang only.
            thread.join(6 * TIMEOUT)
            assert not thread.is_alive()
        ex.shutdown(wait=True)
        stop.set()
        watcher.join(TIMEOUT)
    assert 0 < highest <= limit
    assert sorted(ran) == sorted(k * 1000 + i for k in range(producers) for i in range(each))


def test_a_blocked_submit_goes_on_when_a_task_starts_or_leaves() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock, max_waiting=2) as ex:
        series = ex.submit_recurring(int, interval=5, delay=5)  # counts once, run after run
        lane = ex.lane()
        delayed = lane.submit(int, delay=5)
        outcome, thread = submit_in_background(lambda: ex.submit(int, delay=10))
        wait_until(lambda: blocked_in(ex) == 1, what="the submit to block")
        clock.advance(5)  # both start: room for it
        thread.join(TIMEOUT)
        assert "future" in outcome
        assert delayed.result(timeout=TIMEOUT) == 0
        wait_until(lambda: ex.stats().scheduled == 2, what="the series' next run")
        outcome, thread = submit_in_background(lambda: lane.submit(int))
        wait_until(lambda: blocked_in(ex) == 1, what="the lane's submit to block")
        assert outcome == {}
        assert series.cancel()  # its waiting run leaves the waiting states: room
        thread.join(TIMEOUT)
        assert outcome["future"].result(timeout=TIMEOUT) == 0
        clock.advance(10)


@pytest.mark.parametrize("cancel_futures", [False, True])
def test_shutdown_releases_a_blocked_submit_with_runtime_error(cancel_futures: bool) -> None:
    clock = ManualClock()
    ex = PriorityExecutor(1, clock=clock, max_waiting=1)
    held = ex.submit(int, delay=10)
    try:
        blocked = [
            submit_in_background(submit)
            for submit in (
                lambda: ex.submit(int),
                lambda: ex.lane("x").submit_recurring(int, interval=1),
            )
        ]
        wait_until(lambda: blocked_in(ex) == 2, what="both submits to block")
        ex.shutdown(wait=False, cancel_futures=cancel_futures)
        for outcome, thread in blocked:
            thread.join(TIMEOUT)
            assert isinstance(outcome["error"], RuntimeError)
        assert blocked_in(ex) == 0
        assert held.cancelled() is cancel_futures
        clock.advance(10)
        shutdown_bounded(ex)  # the submit that returned still runs, at its time
        assert ex.stats().completed == (0 if cancel_futures else 1)
        assert ex.stats().scheduled == ex.stats().ready == 0
    finally:
        held.cancel()  # else, should an assertion fail, it would keep the process alive


def test_every_way_out_of_the_waiting_states_gives_its_room_back() -> None:
    clock = ManualClock()
    limit = 3
    flaky = iter([Boom("first attempt")])

    def fails_once() -> int:
        for exc in flaky:
            raise exc
        return 7

    with PriorityExecutor(1, clock=clock, max_waiting=limit) as ex:
        assert_room_for(ex, limit)
        started = [ex.submit(int, delay=1) for _ in range(limit)]
        clock.advance(1)
        assert [future.result(timeout=TIMEOUT) for future in started] == [0] * limit
        assert_room_for(ex, limit)
        with blocked_worker(ex) as (release, _):
            late = [ex.submit(int, expires=1) for _ in range(limit - 1)]
            clock.advance(1)
            wait_until(lambda: all(future.done() for future in late), what="the expiries")
            release.set()
        assert_room_for(ex, limit)
        moved = [ex.submit(int, delay=5) for _ in range(limit)]
        assert all(ex.reschedule(future, priority=3, delay=7) for future in moved)
        assert all(future.cancel() for future in moved)
        assert_room_for(ex, limit)
        series = ex.submit_recurring(int, interval=1, delay=1)
        clock.advance(1)
        wait_until(lambda: ex.stats().scheduled == 1, what="the series' next run")
        assert series.cancel()
        assert_room_for(ex, limit)
        retried = ex.lane(retry=Retry(2, backoff=1)).submit(fails_once)
        wait_until(lambda: ex.stats().scheduled == 1, what="the retry to wait")
        clock.advance(1)
        assert retried.result(timeout=TIMEOUT) == 7
        assert_room_for(ex, limit)
        lane = ex.lane(max_running=1)
        with blocked_worker(ex) as (release, _):
            queued = [lane.submit(int) for _ in range(limit - 1)]
            lane.shutdown(wait=False, cancel_futures=True)
            assert all(future.cancelled() for future in queued)
        assert_room_for(ex, limit)
        throttled = ex.lane(max_starts=1, per=10)
        runs = [throttled.submit(int) for _ in range(limit)]
        for done in range(1, limit):
            wait_until(
                lambda n=done: runs[n - 1].done() and ex.stats().throttled == limit - n,
                what="a start and the lane's throttle",
            )
            clock.advance(10)
        assert [future.result(timeout=TIMEOUT) for future in runs] == [0] * limit
        assert_room_for(ex, limit)


class RacingForRoom(list):  # type: ignore[type-arg]
    """The gate's count of entering submits, forcing two woken submitters to race: the
    first pauses once it has counted itself; the second counts itself only then, and
    pauses once it has seen no room, before it takes its count back."""

    def __init__(self, first: str, second: str) -> None:
        super().__init__()
        self.first, self.second = first, second
        self.first_counted, self.second_saw_none = Pause(), Pause()

    def append(self, entry: Any) -> None:
        name = threading.current_thread().name
        if name == self.second:
            assert self.first_counted.reached.wait(TIMEOUT)
        super().append(entry)
        if name == self.first:
            self.first_counted()

    def pop(self, *args: Any) -> Any:
        if threading.current_thread().name == self.second:
            self.second_saw_none()
        return super().pop(*args)


def test_two_submits_racing_for_the_last_room_never_both_park() -> None:
    """Room comes for one of two blocked submits; each counts itself before it looks, so
    both see none (each counts the other). The first takes its count back and parks
    again, seeing the second's count; the second, the last to take its count back, sees
    the room and takes it."""
    clock = ManualClock()
    ex = PriorityExecutor(1, clock=clock, max_waiting=1)
    held = ex.submit(int, delay=10)
    try:
        first = submit_in_background(lambda: ex.submit(int, delay=10), name="first")
        wait_until(lambda: blocked_in(ex) == 1, what="the first submit to block")
        second = submit_in_background(lambda: ex.submit(int, delay=10), name="second")
        wait_until(lambda: blocked_in(ex) == 2, what="the second submit to block")
        gate = ex._scheduler.gate
        assert gate is not None
        race = gate.entering = RacingForRoom("first", "second")
        assert held.cancel()  # room for one: both are woken
        assert race.second_saw_none.reached.wait(TIMEOUT)
        race.first_counted.go_on.set()
        # The first saw no room, nor, once it took its count back, the second's: parked.
        waiters = gate._parked._waiters  # type: ignore[attr-defined]
        wait_until(lambda: len(waiters) == 1, what="the first submit to park again")
        race.second_saw_none.go_on.set()
        second[1].join(TIMEOUT)
        assert "future" in second[0]
        assert first[0] == {} and blocked_in(ex) == 1
    finally:
        ex.shutdown(wait=False, cancel_futures=True)
    first[1].join(TIMEOUT)
    assert isinstance(first[0]["error"], RuntimeError)


def test_a_task_submitting_into_a_full_executor_is_admitted() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock, max_waiting=1) as ex:
        go = threading.Event()

        def parent() -> Future[int]:
            assert go.wait(TIMEOUT)
            return ex.submit(int)  # the executor is full: a blocked worker would stay so

        running = ex.submit(parent)
        wait_until(lambda: ex.stats().running == 1, what="the parent to start")
        filler = ex.submit(int, delay=5)  # now full
        go.set()
        child = running.result(timeout=TIMEOUT)
        assert child.result(timeout=TIMEOUT) == 0
        clock.advance(5)
        assert filler.result(timeout=TIMEOUT) == 0


def test_map_with_max_waiting_completes() -> None:
    with PriorityExecutor(2, max_waiting=3) as ex:
        assert list(ex.map(abs, range(-50, 0))) == list(range(50, 0, -1))
        assert list(ex.lane().map(abs, range(-20, 0), priority=2)) == list(range(20, 0, -1))


def test_a_lanes_shutdown_releases_its_blocked_submit() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock, max_waiting=1) as ex:
        held = ex.submit(int, delay=1)
        lane = ex.lane("closing")
        outcome, thread = submit_in_background(lambda: lane.submit(int))
        wait_until(lambda: blocked_in(ex) == 1, what="the lane's submit to block")
        lane.shutdown(wait=False)
        thread.join(TIMEOUT)
        assert "lane's shutdown" in str(outcome["error"])
        clock.advance(1)
        assert held.result(timeout=TIMEOUT) == 0
