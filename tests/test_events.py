"""Events and timings: what subscribers are told of each task, in order, and how long a
finished task waited, by cause (README: "Seeing what it does")."""

from __future__ import annotations

import datetime
import gc
import logging
import sys
import threading
import weakref
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from typing import Any

import pytest
from helpers import TIMEOUT, Boom, blocked_worker, executor_threads, unique_prefix, wait_until

from priority_executor import (
    Cron,
    Event,
    PriorityExecutor,
    QueueFull,
    Retry,
    record_metrics,
    record_spans,
    timings,
)
from priority_executor import _events as events_module
from priority_executor.events import (
    Blocked,
    Dropped,
    Due,
    Expired,
    Finished,
    LaneConfigured,
    Rejected,
    Released,
    Rescheduled,
    RetryScheduled,
    Skipped,
    Started,
    Submitted,
    TaskEvent,
    Throttled,
    TimedOut,
)
from priority_executor.testing import ManualClock

UTC = datetime.timezone.utc


class Log:
    """A subscriber that keeps every event, and the threads it was called in."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.threads: set[str] = set()

    def __call__(self, event: Event) -> None:
        self.threads.add(threading.current_thread().name)
        self.events.append(event)

    def kinds(self, task: int | None = None) -> list[str]:
        return [
            type(e).__name__
            for e in self.events
            if task is None or (isinstance(e, TaskEvent) and e.task == task)
        ]

    def of(self, kind: type[Event]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


def noop() -> None:
    pass


def fail() -> None:
    raise Boom


# -- each event, in the order a task meets them ------------------------------------------


def test_a_delayed_task_is_submitted_due_started_and_finished_in_that_order() -> None:
    clock = ManualClock()
    log = Log()
    with PriorityExecutor(max_workers=1, clock=clock) as executor:
        executor.subscribe(log)
        future = executor.submit(noop, priority=3, delay=2)
        clock.advance(2)
        future.result(TIMEOUT)
    assert log.kinds() == ["Submitted", "Due", "Started", "Finished"]
    submitted, due, started, finished = log.events
    assert isinstance(submitted, Submitted)
    assert (submitted.name, submitted.due, submitted.at) == ("noop", 2.0, 0.0)
    assert isinstance(started, Started) and started.attempt == 1
    assert isinstance(finished, Finished) and finished.outcome == "completed"
    assert {e.task for e in log.of(TaskEvent)} == {submitted.task}
    assert {(e.priority, e.lane) for e in log.of(TaskEvent)} == {(3, None)}
    assert [e.at for e in log.events] == [0.0, 2.0, 2.0, 2.0]
    # The wall time is the clock's time on the wall clock.
    assert due.wall - due.at == pytest.approx(clock.wall() - clock.now())


def test_a_run_past_its_time_limit_times_out_then_finishes_when_its_call_returns() -> None:
    clock = ManualClock()
    log = Log()
    started, release = threading.Event(), threading.Event()

    def hang() -> None:
        started.set()
        assert release.wait(TIMEOUT)

    with PriorityExecutor(max_workers=1, clock=clock) as executor:
        executor.subscribe(log)
        future = executor.options(time_limit=2).submit(hang, priority=4)
        assert started.wait(TIMEOUT)
        clock.advance(2)
        assert future.done()
        release.set()
        wait_until(lambda: executor.stats().failed == 1, what="the overrun counted failed")
    assert log.kinds() == ["Submitted", "Due", "Started", "TimedOut", "Finished"]
    (timed_out,) = log.of(TimedOut)
    assert (timed_out.attempt, timed_out.limit, timed_out.at) == (1, 2.0, 2.0)
    assert timed_out.priority == 4
    assert [e.outcome for e in log.of(Finished)] == ["failed"]


def test_a_timed_out_attempt_is_retried() -> None:
    clock = ManualClock()
    log = Log()
    calls: list[int] = []
    started, release = threading.Event(), threading.Event()

    def first_hangs() -> str:
        calls.append(1)
        if len(calls) == 1:
            started.set()
            assert release.wait(TIMEOUT)
        return "done"

    retry = Retry(2, backoff=1, jitter=0)
    with PriorityExecutor(max_workers=2, clock=clock, retry=retry) as executor:
        executor.subscribe(log)
        future = executor.options(time_limit=2).submit(first_hangs)
        assert started.wait(TIMEOUT)
        clock.advance(2)
        release.set()
        wait_until(lambda: bool(log.of(RetryScheduled)), what="the retry")
        clock.advance(1)
        assert future.result(TIMEOUT) == "done"
    assert log.kinds() == [
        "Submitted",
        "Due",
        "Started",
        "TimedOut",
        "RetryScheduled",
        "Due",
        "Started",
        "Finished",
    ]
    (scheduled,) = log.of(RetryScheduled)
    assert (scheduled.attempt, scheduled.error) == (2, "TaskTimeoutError")


def test_a_dependent_is_blocked_then_released_when_its_upstreams_are_done() -> None:
    clock = ManualClock()
    log = Log()
    with PriorityExecutor(max_workers=1, clock=clock) as executor:
        executor.subscribe(log)
        upstream: Future[None] = Future()
        other: Future[None] = Future()
        dependent = executor.options(after=[upstream], after_any=[other]).submit(noop, delay=1)
        clock.advance(3)
        upstream.set_result(None)
        clock.advance(2)
        other.set_exception(Boom())  # after_any: done, whatever its outcome
        # Its delay, counted from its submit, has passed: it is due at once.
        dependent.result(TIMEOUT)
        times = timings(dependent)
    assert log.kinds() == ["Submitted", "Blocked", "Released", "Due", "Started", "Finished"]
    assert [e.at for e in log.events] == [0.0, 0.0, 5.0, 5.0, 5.0, 5.0]
    assert times is not None and (times.blocked, times.delay, times.queue) == (5.0, 0.0, 0.0)


def test_a_dependent_released_before_its_due_time_waits_for_it() -> None:
    clock = ManualClock()
    log = Log()
    with PriorityExecutor(max_workers=1, clock=clock) as executor:
        executor.subscribe(log)
        upstream: Future[None] = Future()
        dependent = executor.options(after=[upstream]).submit(noop, delay=4)
        clock.advance(1)
        upstream.set_result(None)
        clock.advance(3)
        dependent.result(TIMEOUT)
    assert log.kinds() == ["Submitted", "Blocked", "Released", "Due", "Started", "Finished"]
    assert [e.at for e in log.events] == [0.0, 0.0, 1.0, 4.0, 4.0, 4.0]
    times = timings(dependent)
    assert times is not None and (times.blocked, times.delay) == (1.0, 3.0)


def test_a_dependent_whose_upstream_failed_is_never_released() -> None:
    log = Log()
    with PriorityExecutor(max_workers=1) as executor:
        executor.subscribe(log)
        upstream = executor.submit(fail)
        dependent = executor.options(after=[upstream]).submit(noop)
        with pytest.raises(CancelledError):
            dependent.result(TIMEOUT)
    (blocked,) = log.of(Blocked)
    assert log.kinds(blocked.task) == ["Submitted", "Blocked", "Finished"]
    assert not log.of(Released)
    assert [e.outcome for e in log.of(Finished) if e.task == blocked.task] == ["cancelled"]


def test_a_blocked_task_cancelled_rescheduled_or_shut_down() -> None:
    clock = ManualClock()
    log = Log()
    executor = PriorityExecutor(max_workers=1, clock=clock)
    executor.subscribe(log)
    upstream: Future[None] = Future()
    cancelled = executor.options(after=[upstream]).submit(noop)
    moved = executor.options(after=[upstream]).submit(noop)
    left = executor.options(after=[upstream]).submit(noop)
    assert cancelled.cancel()
    assert executor.reschedule(moved, priority=7)
    upstream.set_result(None)
    moved.result(TIMEOUT)
    upstream2: Future[None] = Future()
    last = executor.options(after=[upstream2]).submit(noop)
    executor.shutdown(cancel_futures=True)
    assert last.cancelled() and left.done()
    first, second, third, fourth = sorted({e.task for e in log.of(TaskEvent)})
    assert log.kinds(first) == ["Submitted", "Blocked", "Finished"]
    assert log.kinds(second) == [
        "Submitted",
        "Blocked",
        "Rescheduled",
        "Released",
        "Due",
        "Started",
        "Finished",
    ]
    assert next(e.priority for e in log.events if isinstance(e, Released)) == 7
    assert log.kinds(third) == ["Submitted", "Blocked", "Released", "Due", "Started", "Finished"]
    assert log.kinds(fourth) == ["Submitted", "Blocked", "Finished"]
    assert [e.outcome for e in log.of(Finished) if e.task in (first, fourth)] == [
        "cancelled",
        "cancelled",
    ]


def test_a_task_due_at_once_and_one_that_raises() -> None:
    log = Log()
    with PriorityExecutor(max_workers=1) as executor:
        executor.subscribe(log)
        executor.submit(noop).result(TIMEOUT)
        with pytest.raises(Boom):
            executor.submit(fail).result(TIMEOUT)
    first, second = sorted({e.task for e in log.of(TaskEvent)})
    assert log.kinds(first) == ["Submitted", "Due", "Started", "Finished"]
    assert log.kinds(second) == ["Submitted", "Due", "Started", "Finished"]
    assert [e.outcome for e in log.of(Finished)] == ["completed", "failed"]


def test_timings_in_real_time_and_through_a_backend() -> None:
    log = Log()
    with ThreadPoolExecutor(1) as pool, PriorityExecutor(max_workers=1, backend=pool) as ex:
        ex.subscribe(log)
        future = ex.submit(pow, 2, 5)
        assert future.result(TIMEOUT) == 32
    times = timings(future)
    assert times is not None and times.due is not None and times.started is not None
    assert times.submitted == times.due <= times.started <= times.finished  # type: ignore[operator]
    assert times.queue == pytest.approx(times.started - times.due)
    assert times.delay == times.throttled == times.backoff == 0.0
    assert log.kinds() == ["Submitted", "Due", "Started", "Finished"]


def test_callbacks_run_in_the_dispatcher_thread_never_in_a_submitter_or_worker() -> None:
    log = Log()
    prefix = unique_prefix("events")
    with PriorityExecutor(max_workers=2, thread_name_prefix=prefix) as executor:
        executor.subscribe(log)
        for _ in range(20):
            executor.submit(noop)
    assert log.threads == {f"{prefix}_events"}
    assert len(log.of(Finished)) == 20


def test_cancel_expiry_and_shutdown_cancel_futures() -> None:
    clock = ManualClock()
    log = Log()
    with PriorityExecutor(max_workers=1, clock=clock) as executor:
        executor.subscribe(log)
        cancelled = executor.submit(noop, delay=5)
        assert cancelled.cancel()
        with blocked_worker(executor):
            late = executor.submit(noop, expires=1)
            clock.advance(1)
            with pytest.raises(CancelledError):
                late.result(TIMEOUT)
            waiting = executor.submit(noop, delay=10)
            executor.shutdown(wait=False, cancel_futures=True)
        assert waiting.cancelled()
    # In the order of their submits (the blocker's starts before blocked_worker returns).
    cancelled_id, blocker, late_id, waiting_id = (e.task for e in log.of(Submitted))
    assert log.kinds(cancelled_id) == ["Submitted", "Finished"]
    assert log.kinds(late_id) == ["Submitted", "Due", "Expired"]
    assert log.kinds(waiting_id) == ["Submitted", "Finished"]
    outcomes = {e.task: e.outcome for e in log.of(Finished)}
    assert outcomes[cancelled_id] == outcomes[waiting_id] == "cancelled"
    assert outcomes[blocker] == "completed"
    # Every event is delivered by the time shutdown(wait=True) returns.
    assert log.kinds(blocker)[-1] == "Finished"


def test_throttled_names_the_limit_and_the_lane() -> None:
    clock = ManualClock()
    log = Log()
    release = threading.Event()
    with PriorityExecutor(max_workers=2, clock=clock) as executor:
        executor.subscribe(log)
        lane = executor.lane("api", max_running=1)
        first = lane.submit(release.wait, TIMEOUT)
        wait_until(lambda: executor.stats().running == 1, what="the first to run")
        second = lane.submit(noop)
        wait_until(lambda: log.of(Throttled), what="a worker to throttle the second")
        clock.advance(3)  # time it spends held back by the lane
        release.set()
        first.result(TIMEOUT)
        second.result(TIMEOUT)
    (throttled,) = log.of(Throttled)
    assert (throttled.limit, throttled.held_in, throttled.lane) == ("max_running", "api", "api")
    second_id = throttled.task
    assert log.kinds(second_id) == ["Submitted", "Due", "Throttled", "Started", "Finished"]
    times = timings(second)
    assert times is not None and times.throttled == pytest.approx(3.0)


def test_a_retry_is_scheduled_with_its_attempt_wait_and_error() -> None:
    clock = ManualClock()
    log = Log()
    with PriorityExecutor(max_workers=1, clock=clock, retry=Retry(2, backoff=1.5)) as executor:
        executor.subscribe(log)
        future = executor.submit(fail)
        clock.settle()
        clock.advance(1.5)
        with pytest.raises(Boom):
            future.result(TIMEOUT)
    assert log.kinds() == [
        "Submitted",
        "Due",
        "Started",
        "RetryScheduled",
        "Due",
        "Started",
        "Finished",
    ]
    (retry,) = log.of(RetryScheduled)
    assert (retry.attempt, retry.wait, retry.error) == (2, 1.5, "Boom")
    assert [e.attempt for e in log.of(Started)] == [1, 2]
    times = timings(future)
    assert times is not None
    assert (times.backoff, times.delay, times.started) == (1.5, 0.0, 1.5)


def test_a_calendar_run_past_its_grace_is_skipped() -> None:
    pytest.importorskip("cronsim")
    clock = ManualClock(wall=datetime.datetime(2026, 1, 1, 9, 1, tzinfo=UTC))
    log = Log()
    with PriorityExecutor(max_workers=1, clock=clock) as executor:
        executor.subscribe(log)
        series = executor.submit_recurring(
            noop, interval=Cron("*/5 * * * *", tz=UTC, misfire_grace=60)
        )
        clock.step_wall(datetime.timedelta(minutes=30, seconds=30))
        clock.settle()
        assert executor.stats().skipped == 1
        clock.advance_to(datetime.datetime(2026, 1, 1, 9, 35, tzinfo=UTC))
        clock.settle()
        series.cancel()
    assert log.kinds() == [
        "Submitted",
        "Due",
        "Started",
        "Skipped",
        "Due",
        "Started",
        "Finished",
        "Finished",
    ]
    assert [e.outcome for e in log.of(Finished)] == ["completed", "cancelled"]
    assert len(log.of(Skipped)) == 1


def test_rejected_rescheduled_and_lane_configured() -> None:
    clock = ManualClock()
    log = Log()
    with PriorityExecutor(max_workers=1, clock=clock, max_waiting=1, waiting_timeout=0) as executor:
        executor.subscribe(log)
        waiting = executor.submit(noop, delay=5)
        with pytest.raises(QueueFull):
            executor.submit(noop)
        assert executor.reschedule(waiting, delay=7, priority=2)
        lane = executor.lane("db", max_running=2)
        lane.configure(max_running=3)
        clock.advance(7)
        waiting.result(TIMEOUT)
    kept, rejected_id = (e.task for e in log.of(Submitted)[:1]), None
    (rejected,) = log.of(Rejected)
    assert log.kinds(rejected.task) == ["Rejected"]
    (rescheduled,) = log.of(Rescheduled)
    assert (rescheduled.due, rescheduled.priority) == (7.0, 2)
    assert log.kinds(rescheduled.task) == [
        "Submitted",
        "Rescheduled",
        "Due",
        "Started",
        "Finished",
    ]
    configured = log.of(LaneConfigured)
    assert [(e.lane, e.options["max_running"]) for e in configured] == [("db", 2), ("db", 3)]
    del kept, rejected_id


def test_a_series_is_submitted_once_then_each_run_is_due_started_finished() -> None:
    clock = ManualClock()
    log = Log()
    with PriorityExecutor(max_workers=1, clock=clock) as executor:
        executor.subscribe(log)
        series = executor.submit_recurring(noop, interval=10)
        clock.settle()
        clock.advance(10)
        clock.settle()
        series.cancel()
    assert log.kinds() == [
        "Submitted",
        "Due",
        "Started",
        "Finished",
        "Due",
        "Started",
        "Finished",
        "Finished",
    ]
    assert [e.outcome for e in log.of(Finished)] == ["completed", "completed", "cancelled"]


# -- subscribers -------------------------------------------------------------------------


def test_a_lane_subscriber_gets_its_lane_and_its_inner_lanes_only() -> None:
    outer_log, all_log = Log(), Log()
    with PriorityExecutor(max_workers=1) as executor:
        outer = executor.lane("outer")
        inner = executor.lane("inner", parent=outer)
        other = executor.lane("other")
        executor.subscribe(outer_log, lane=outer)
        executor.subscribe(all_log)
        for target in (outer, inner, other, executor):
            target.submit(noop).result(TIMEOUT)
    assert {e.lane for e in outer_log.of(TaskEvent)} == {"outer", "inner"}
    assert {e.lane for e in all_log.of(TaskEvent)} == {"outer", "inner", "other", None}


def test_a_raising_subscriber_is_logged_and_stops_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = Log()

    def broken(event: Event) -> None:
        raise Boom("subscriber")

    with PriorityExecutor(max_workers=1) as executor:
        executor.subscribe(broken)
        executor.subscribe(log)
        futures = [executor.submit(noop) for _ in range(5)]
        assert [f.result(TIMEOUT) for f in futures] == [None] * 5
    assert len(log.of(Finished)) == 5
    lines = [r for r in caplog.records if r.name == "priority_executor" and "subscriber" in r.msg]
    assert lines and all(r.levelno == logging.ERROR for r in lines)
    assert lines[0].priority_executor_event == "Submitted"  # type: ignore[attr-defined]


def test_a_slow_subscriber_holds_back_no_task_and_drops_are_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(events_module, "BUFFER", 8)
    gate = threading.Event()
    log = Log()

    def slow(event: Event) -> None:
        gate.wait(TIMEOUT)
        log(event)

    with PriorityExecutor(max_workers=2) as executor:
        executor.subscribe(slow)
        futures = [executor.submit(noop) for _ in range(50)]
        # Every task runs and finishes while the subscriber is stuck in its first call.
        assert [f.result(TIMEOUT) for f in futures] == [None] * 50
        gate.set()
    dropped = sum(e.count for e in log.of(Dropped))
    told = len(log.of(TaskEvent))
    assert dropped > 0
    assert told + dropped == 50 * 4
    assert told <= 8 + 1 + 2  # the buffer, the event in hand, a put racing the bound


def test_a_subscriber_that_shuts_the_executor_down_does_not_deadlock() -> None:
    done = threading.Event()
    executor = PriorityExecutor(max_workers=1)

    def stop(event: Event) -> None:
        if isinstance(event, Finished):
            executor.shutdown(wait=True)
            done.set()

    executor.subscribe(stop)
    executor.submit(noop)
    assert done.wait(TIMEOUT)
    executor.shutdown()


def test_closed_subscription_no_subscriber_no_events_no_timings() -> None:
    log = Log()
    with PriorityExecutor(max_workers=1) as executor:
        with executor.subscribe(log):
            seen = executor.submit(noop)
            seen.result(TIMEOUT)
            # Nothing reaches it once closed, not even what happened before: let it come.
            wait_until(lambda: log.of(Finished), what="its events")
        unseen = executor.submit(noop)
        unseen.result(TIMEOUT)
    assert timings(unseen) is None
    assert timings(seen) is not None
    assert {e.task for e in log.of(TaskEvent)} == {timings(seen).task}  # type: ignore[union-attr]


def test_bad_subscriptions_raise_at_the_call() -> None:
    with PriorityExecutor(max_workers=1) as executor, PriorityExecutor(max_workers=1) as other:
        with pytest.raises(TypeError, match="callback must be a callable"):
            executor.subscribe("print")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="lane must be a lane of this executor"):
            executor.subscribe(print, lane=other.lane("x"))
        with pytest.raises(TypeError, match="timings must be a bool"):
            executor.options(timings=1)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError):
        executor.subscribe(print)


def test_a_dropped_executor_lets_its_dispatcher_exit() -> None:
    prefix = unique_prefix("dropped")
    executor = PriorityExecutor(max_workers=1, thread_name_prefix=prefix)
    log = Log()
    executor.subscribe(log)
    executor.submit(noop).result(TIMEOUT)
    del executor
    gc.collect()
    wait_until(lambda: not executor_threads(prefix), what="every thread to exit")


# -- timings -----------------------------------------------------------------------------


def test_timings_by_cause_on_the_manual_clock() -> None:
    clock = ManualClock()
    with PriorityExecutor(max_workers=1, clock=clock) as executor:
        timed = executor.options(timings=True)
        with blocked_worker(executor):
            delayed = timed.submit(noop, delay=2)
            clock.advance(2)
            clock.advance(3)  # due, waiting for the worker
        delayed.result(TIMEOUT)
        pending = timed.submit(noop, delay=1)
        assert timings(pending) is None  # not done yet
        pending.cancel()
    times = timings(delayed)
    assert times is not None
    assert (times.submitted, times.due, times.started) == (0.0, 2.0, 5.0)
    assert times.finished == 5.0
    assert (times.delay, times.queue, times.throttled, times.backoff) == (2.0, 3.0, 0.0, 0.0)


def test_timings_of_a_cancelled_task_and_nothing_kept_alive() -> None:
    class Arg:
        pass

    clock = ManualClock()
    arg = Arg()
    ref = weakref.ref(arg)
    with PriorityExecutor(max_workers=1, clock=clock) as executor:
        timed = executor.options(timings=True)
        ran = timed.submit(lambda a: a, arg)
        del arg
        ran.result(TIMEOUT)
        waiting = timed.submit(noop, delay=4)
        clock.advance(1)
        waiting.cancel()
    ran._result = None  # the result is the argument itself
    gc.collect()
    assert ref() is None  # the finished future, and its timings, hold none of its call
    times = timings(waiting)
    assert times is not None
    assert (times.started, times.finished, times.delay) == (None, 1.0, 1.0)


# -- races -------------------------------------------------------------------------------


def test_each_tasks_events_are_in_order_under_concurrent_submits_and_cancels() -> None:
    log = Log()
    order = ["Submitted", "Due", "Started", "Finished"]
    with PriorityExecutor(max_workers=3) as executor:
        executor.subscribe(log)
        futures = []

        def submitter() -> None:
            for i in range(200):
                future = executor.submit(noop)
                if i % 3 == 0:
                    future.cancel()
                futures.append(future)

        threads = [threading.Thread(target=submitter) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    by_task: dict[int, list[str]] = {}
    for event in log.of(TaskEvent):
        by_task.setdefault(event.task, []).append(type(event).__name__)
    assert len(by_task) == 600
    for kinds in by_task.values():
        if kinds[-1] == "Finished" and len(kinds) == 2:
            continue  # cancelled before a worker took it
        # Cancelled once started, or not cancelled: every step, in order.
        assert kinds in (order, ["Submitted", "Due", "Finished"]), kinds
    assert len(log.of(Finished)) == 600
    assert not log.of(Dropped)
    assert {type(e) for e in log.events} <= {Submitted, Due, Started, Finished, Expired}


# -- OpenTelemetry metrics (the otel extra), with the real SDK ----------------------------


def _points(reader: Any) -> dict[str, list[tuple[dict[str, Any], Any]]]:
    """Each metric's data points, as (attributes, value or histogram count and sum)."""
    found: dict[str, list[tuple[dict[str, Any], Any]]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    value = (point.count, point.sum) if hasattr(point, "count") else point.value
                    found.setdefault(metric.name, []).append((dict(point.attributes), value))
    return found


def test_otel_metrics_with_the_sdks_in_memory_reader() -> None:
    sdk_metrics = pytest.importorskip("opentelemetry.sdk.metrics")
    export = pytest.importorskip("opentelemetry.sdk.metrics.export")
    from priority_executor import record_metrics

    reader = export.InMemoryMetricReader()
    provider = sdk_metrics.MeterProvider(metric_readers=[reader])
    clock = ManualClock()
    release = threading.Event()
    with PriorityExecutor(max_workers=2, clock=clock, max_waiting=2, waiting_timeout=0) as ex:
        subscription = record_metrics(ex, meter_provider=provider, max_lanes=1)
        log = Log()
        ex.subscribe(log)
        api = ex.lane("api", max_running=1)
        db = ex.lane("db")
        first = api.submit(release.wait, TIMEOUT)
        wait_until(lambda: ex.stats().running == 1, what="the first to run")
        api.submit(noop)
        later = ex.submit(noop, delay=5)
        with pytest.raises(QueueFull):
            ex.submit(noop)
        # Until a worker looks at it, stats() counts it throttled, but no event says so.
        wait_until(lambda: log.of(Throttled), what="a worker to throttle the second")
        during = _points(reader)["priority_executor.tasks"]
        assert ({"state": "scheduled"}, 1) in during
        assert ({"state": "running"}, 1) in during
        assert ({"state": "throttled", "lane": "api"}, 1) in during
        assert not any(attributes.get("lane") == "db" for attributes, _ in during)  # capped
        clock.advance(2)
        release.set()
        first.result(TIMEOUT)
        db.submit(fail)
        later.cancel()
    subscription.close()
    points = _points(reader)
    finished = {tuple(sorted(a.items())): v for a, v in points["priority_executor.tasks.finished"]}
    assert finished == {
        (("lane", "api"), ("outcome", "completed")): 2,
        (("lane", "other"), ("outcome", "failed")): 1,
        (("outcome", "cancelled"),): 1,
    }
    assert points["priority_executor.tasks.rejected"] == [({}, 1)]
    assert points["priority_executor.tasks.throttled"] == [
        ({"lane": "api", "limit": "max_running"}, 1)
    ]
    waits = dict((a.get("lane"), v) for a, v in points["priority_executor.task.wait.duration"])
    assert waits["api"] == (2, 2.0)  # the second waited 2 s for the lane's room
    runs = dict((a.get("lane"), v) for a, v in points["priority_executor.task.run.duration"])
    assert runs["api"][0] == 2 and runs["other"][0] == 1


def test_without_the_otel_extra_the_error_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from priority_executor import record_metrics, record_spans

    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    for record in (record_metrics, record_spans):
        with (
            PriorityExecutor(max_workers=1) as executor,
            pytest.raises(ModuleNotFoundError, match=r"priority_executor\[otel\]"),
        ):
            record(executor)


def _tracing() -> tuple[Any, Any, Any]:
    sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
    in_memory = pytest.importorskip("opentelemetry.sdk.trace.export.in_memory_span_exporter")
    export = pytest.importorskip("opentelemetry.sdk.trace.export")
    exporter = in_memory.InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(export.SimpleSpanProcessor(exporter))
    return provider, exporter, provider.get_tracer("test")


def test_otel_spans_one_per_run_child_of_the_submitters_span() -> None:
    from opentelemetry.trace import SpanKind, StatusCode

    from priority_executor import record_spans

    provider, exporter, tracer = _tracing()
    clock = ManualClock()
    with PriorityExecutor(max_workers=1, clock=clock) as executor:
        subscription = record_spans(executor, tracer_provider=provider)
        lane = executor.lane("api")
        with tracer.start_as_current_span("request") as request:
            delayed = lane.submit(noop, priority=5, delay=2)
            failing = executor.submit(fail)
        outside = executor.submit(noop)  # no span current: a root span
        clock.advance(2)
        delayed.result(TIMEOUT)
        outside.result(TIMEOUT)
        with pytest.raises(Boom):
            failing.result(TIMEOUT)
        executor.shutdown()
        subscription.close()
    spans = {span.name: span for span in exporter.get_finished_spans() if span.name != "request"}
    assert sorted(s.name for s in exporter.get_finished_spans()) == [
        "fail",
        "noop",
        "noop",
        "request",
    ]
    by_parent = {
        (span.parent.span_id if span.parent else None): span
        for span in exporter.get_finished_spans()
        if span.name == "noop"
    }
    child = by_parent[request.get_span_context().span_id]
    assert child.kind == SpanKind.INTERNAL
    assert child.context.trace_id == request.get_span_context().trace_id
    assert dict(child.attributes) == {
        "priority_executor.task.id": child.attributes["priority_executor.task.id"],
        "priority_executor.priority": 5,
        "priority_executor.attempt": 1,
        "priority_executor.lane": "api",
    }
    assert child.status.status_code == StatusCode.UNSET
    assert None in by_parent  # the task submitted outside any span
    assert spans["fail"].status.status_code == StatusCode.ERROR
    assert spans["fail"].parent.span_id == request.get_span_context().span_id
    # Its span covers its run, on the wall clock (the manual clock's).
    assert child.end_time >= child.start_time >= int((clock.wall() - 1) * 1e9)


def test_otel_spans_of_retries_a_time_limit_and_a_series() -> None:
    from opentelemetry.trace import StatusCode

    from priority_executor import record_spans

    provider, exporter, _ = _tracing()
    clock = ManualClock()
    calls: list[int] = []
    started, release = threading.Event(), threading.Event()

    def flaky() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise Boom
        if len(calls) == 2:
            started.set()
            assert release.wait(TIMEOUT)
        return "done"

    retry = Retry(3, backoff=1, jitter=0)
    with PriorityExecutor(max_workers=2, clock=clock, retry=retry) as executor:
        record_spans(executor, tracer_provider=provider)
        future = executor.options(time_limit=5).submit(flaky)
        wait_until(lambda: bool(calls), what="the first attempt")
        wait_until(lambda: executor.stats().scheduled == 1, what="the retry to wait")
        clock.advance(1)
        assert started.wait(TIMEOUT)
        clock.advance(5)  # the second attempt times out
        release.set()
        wait_until(lambda: executor.stats().scheduled == 1, what="the third attempt to wait")
        clock.advance(2)  # the backoff doubles
        assert future.result(TIMEOUT) == "done"
        wait_until(lambda: len(exporter.get_finished_spans()) == 3, what="the attempts' spans")
        series = executor.submit_recurring(noop, interval=1)
        for count in (4, 5):
            wait_until(lambda n=count: len(exporter.get_finished_spans()) == n, what="a run")
            clock.advance(1)
        series.cancel()
    spans = exporter.get_finished_spans()
    attempts = [s for s in spans if s.name.endswith("flaky")]
    assert [s.attributes["priority_executor.attempt"] for s in attempts] == [1, 2, 3]
    assert [s.status.status_code for s in attempts] == [
        StatusCode.ERROR,
        StatusCode.ERROR,
        StatusCode.UNSET,
    ]
    assert [e.name for e in attempts[1].events] == ["timed out"]
    assert attempts[1].events[0].attributes["priority_executor.time_limit"] == 5.0
    assert len([s for s in spans if s.name == "noop"]) >= 2  # a span per run of the series
    assert len({s.context.span_id for s in spans}) == len(spans)


@pytest.mark.timeout(30)
def test_an_observed_executor_leaves_no_garbage_in_reference_cycles() -> None:
    def use_and_drop() -> None:
        log = Log()
        executor = PriorityExecutor(max_workers=2, retry=Retry(2, backoff=0))
        executor.subscribe(log)
        lane = executor.lane("limited", max_running=1)
        futures: list[Future[Any]] = [lane.submit(int, i) for i in range(3)]
        futures.append(executor.submit(fail))
        later = executor.options(timings=True).submit(noop, delay=30, expires=40)
        executor.reschedule(later, priority=3)
        futures[-1].exception(TIMEOUT)
        executor.shutdown(wait=True, cancel_futures=True)
        assert later.cancelled() and timings(later) is not None

    gc.collect()
    debug = gc.get_debug()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        use_and_drop()
        gc.collect()
        garbage = sorted(
            {
                repr(type(obj))
                for obj in gc.garbage
                if (type(obj).__module__ or "").startswith(("priority_executor", "threading"))
            }
        )
    finally:
        gc.set_debug(debug)
        gc.garbage.clear()
    assert garbage == []


def test_an_observed_task_in_the_intake_when_its_lane_shuts_down_still_runs() -> None:
    # Submitted before the lane's shutdown, to a busy pool: on its way to the ready heap
    # (the intake) when the lane closes. Its submit returned: it runs.
    for _ in range(20):
        with PriorityExecutor(max_workers=1) as executor:
            executor.subscribe(Log())
            lane = executor.lane("closing")
            with blocked_worker(executor):
                futures = [lane.submit(int, i) for i in range(5)]
                lane.shutdown(wait=False)
            assert [f.result(TIMEOUT) for f in futures] == list(range(5))


def test_a_subscriber_raising_system_exit_stops_neither_the_tasks_nor_the_events(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = Log()
    raised = []

    def exits(event: Event) -> None:
        if not raised:
            raised.append(event)
            raise SystemExit

    with PriorityExecutor(max_workers=1) as executor:
        executor.subscribe(exits)
        executor.subscribe(log)
        futures = [executor.submit(noop) for _ in range(3)]
        assert [f.result(TIMEOUT) for f in futures] == [None] * 3
    # Logged as ThreadPoolExecutor logs what escapes its worker; the thread goes on.
    assert any(r.levelno == logging.CRITICAL for r in caplog.records)
    assert len(log.of(Finished)) == 3


@pytest.mark.parametrize("record", [record_metrics, record_spans])
def test_recording_anything_but_an_executor_names_the_argument(record: Any) -> None:
    with pytest.raises(TypeError, match="executor must be a PriorityExecutor, not str"):
        record("executor")
