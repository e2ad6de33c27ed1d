"""Retries: ``PriorityExecutor(retry=Retry(...))`` (issue 14).

Retry times are checked on a ``ManualClock``: attempts take no clock time, so attempt k + 1
starts exactly ``min(max_backoff, backoff * factor ** (k - 1))`` after attempt k. The test
waits, on the executor's own counts, for each retry to be queued before it moves time.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import math
import pickle
import queue
import threading
import weakref
from concurrent.futures import BrokenExecutor, CancelledError
from pathlib import Path
from typing import Any

import pytest
import remote
from helpers import TIMEOUT, Boom, blocked_worker, call_bounded, counts, stats_fields, wait_until

from priority_executor import Fifo, Lane, PriorityExecutor, Retry
from priority_executor.testing import ManualClock


class Flaky:
    """Raises ``Boom(k)`` on its first ``fails`` calls (k = 1, 2, ...), then returns "ok";
    records the clock time of each call."""

    def __init__(self, clock: ManualClock, fails: int, exc: type[BaseException] = Boom) -> None:
        self.clock = clock
        self.fails = fails
        self.exc = exc
        self.calls = 0
        self.starts: queue.Queue[float] = queue.Queue()

    def __call__(self, *args: object) -> str:
        self.calls += 1
        self.starts.put(self.clock.now())
        if self.calls <= self.fails:
            raise self.exc(self.calls)
        return "ok"


def expected_starts(retry: Retry) -> list[float]:
    t, starts = 0.0, [0.0]
    for k in range(1, retry.attempts):
        t += min(retry.max_backoff, retry.backoff * retry.factor ** (k - 1))
        starts.append(t)
    return starts


def drive(
    ex: PriorityExecutor | Lane, clock: ManualClock, flaky: Flaky, starts: list[float]
) -> None:
    """Move the clock to each expected start; check that no attempt starts earlier. Only
    ``flaky`` fails in ``ex`` (an executor, or a lane)."""
    for k, t in enumerate(starts):
        if k:
            wait_until(lambda k=k: ex.stats().retries == k, what=f"retry {k} to be queued")
            assert ex.stats().scheduled == 1
            clock.advance(t - clock.now() - min(1e-3, (t - clock.now()) / 2))
            assert flaky.starts.empty(), f"attempt {k + 1} started early"
            clock.advance(t - clock.now())
        assert flaky.starts.get(timeout=TIMEOUT) == pytest.approx(t, abs=1e-9)


@pytest.mark.parametrize(
    "retry",
    [
        Retry(4, backoff=1.0, factor=2.0),
        Retry(5, backoff=0.5, factor=3.0, max_backoff=4.0),
        Retry(4, backoff=2.0, factor=1.0),
        Retry(3, backoff=0.25, factor=10.0, max_backoff=60.0),
        Retry(6, backoff=1.0, factor=2.0, max_backoff=3.0),
    ],
    ids=repr,
)
def test_retries_start_exactly_at_their_backoff(retry: Retry) -> None:
    clock = ManualClock()
    flaky = Flaky(clock, fails=retry.attempts)
    with PriorityExecutor(2, clock=clock, retry=retry) as ex:
        future = ex.submit(flaky)
        drive(ex, clock, flaky, expected_starts(retry))
        with pytest.raises(Boom) as raised:
            future.result(TIMEOUT)
        assert raised.value.args == (retry.attempts,)  # the last attempt's exception
    assert flaky.calls == retry.attempts
    assert stats_fields(ex) == counts(failed=1)
    assert ex.stats().retries == retry.attempts - 1


def test_first_success_is_the_result_and_the_task_counts_once() -> None:
    clock = ManualClock()
    flaky = Flaky(clock, fails=2)
    with PriorityExecutor(2, clock=clock, retry=Retry(5, backoff=1.0)) as ex:
        future = ex.submit(flaky)
        drive(ex, clock, flaky, [0.0, 1.0, 3.0])
        assert future.result(TIMEOUT) == "ok"
        # Pending between attempts, as a series' future: so cancel() works at any time.
    assert flaky.calls == 3
    assert stats_fields(ex) == counts(completed=1)
    assert ex.stats().retries == 2


def test_the_future_stays_pending_while_a_retry_waits() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock, retry=Retry(backoff=5.0)) as ex:
        future = ex.submit(Flaky(clock, fails=1))
        wait_until(lambda: ex.stats().retries == 1)
        assert not future.done() and not future.running()
        assert stats_fields(ex) == counts(scheduled=1)
        [waiting] = ex.waiting()
        assert (waiting.future, waiting.state, waiting.due_in) == (future, "scheduled", 5.0)
        clock.advance(5)
        assert future.result(TIMEOUT) == "ok"


def test_jitter_scales_each_wait_into_its_bounds() -> None:
    retry = Retry(10, backoff=1.0, factor=2.0, max_backoff=100.0, jitter=0.5)
    for attempt in range(1, 10):
        full = min(100.0, 2.0 ** (attempt - 1))
        waits = [retry.again(Boom(), attempt) for _ in range(500)]
        assert all(w is not None and full * 0.5 <= w <= full for w in waits)
        assert len(set(waits)) > 100  # drawn, not fixed
    assert retry.again(Boom(), 10) is None  # no attempt left


def test_jitter_applies_to_the_due_time_on_the_executor() -> None:
    clock = ManualClock()
    retry = Retry(2, backoff=10.0, jitter=1.0)
    with PriorityExecutor(4, clock=clock, retry=retry) as ex:
        for _ in range(20):
            ex.submit(Flaky(clock, fails=1))
        wait_until(lambda: ex.stats().retries == 20)
        due = [w.due_in for w in ex.waiting()]
        assert all(0 <= d <= 10 for d in due) and len(set(due)) > 1
        clock.advance(10)
    assert stats_fields(ex) == counts(completed=20)


def test_huge_exponents_are_capped_not_overflowing() -> None:
    retry = Retry(10_000, backoff=1.0, factor=10.0, max_backoff=7.0)
    assert retry.again(Boom(), 5000) == 7.0
    assert Retry(10_000, backoff=0.0, factor=10.0).again(Boom(), 5000) == 0.0


def test_only_instances_of_on_are_retried() -> None:
    clock = ManualClock()
    retry = Retry(3, backoff=1.0, on=(KeyError, OSError))
    with PriorityExecutor(2, clock=clock, retry=retry) as ex:
        other = ex.submit(Flaky(clock, fails=1, exc=ValueError))
        with pytest.raises(ValueError):
            other.result(TIMEOUT)
        assert ex.stats().retries == 0
        subclass = ex.submit(Flaky(clock, fails=1, exc=ConnectionError))  # an OSError
        wait_until(lambda: ex.stats().retries == 1)
        clock.advance(1)
        assert subclass.result(TIMEOUT) == "ok"
    assert stats_fields(ex) == counts(completed=1, failed=1)


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit, BrokenExecutor])
def test_interrupts_and_broken_pools_are_never_retried(exc: type[BaseException]) -> None:
    retry = Retry(5, on=BaseException)
    assert retry.again(exc(), 1) is None
    assert retry.again(Boom(), 1) == 0.1
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock, retry=retry) as ex:
        future = ex.submit(Flaky(clock, fails=1, exc=exc))
        with pytest.raises(exc):
            future.result(TIMEOUT)
    assert ex.stats().retries == 0


def test_each_retried_failure_is_logged_with_its_attempt(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock()
    with (
        caplog.at_level(logging.WARNING, logger="priority_executor"),
        PriorityExecutor(1, clock=clock, retry=Retry(3, backoff=1.0)) as ex,
    ):
        future = ex.submit(Flaky(clock, fails=5))
        wait_until(lambda: ex.stats().retries == 1)
        clock.advance(1)
        wait_until(lambda: ex.stats().retries == 2)
        clock.advance(2)
        with pytest.raises(Boom):
            future.result(TIMEOUT)
    records = [r for r in caplog.records if r.name == "priority_executor"]
    assert len(records) == 2  # the last failure is the future's, not a retry
    for (attempt, wait), record in zip([(1, "1"), (2, "2")], records):
        assert record.levelno == logging.WARNING
        assert record.getMessage() == (
            f"Flaky object failed on attempt {attempt} of 3 (Boom: {attempt}); retrying in {wait} s"
        )
        assert record.exc_info is None  # the traceback only at DEBUG


@pytest.fixture
def unlogged(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retried failures are not logged: pytest keeps the records, whose exceptions would
    keep the calls' arguments alive."""
    monkeypatch.setattr(logging.getLogger("priority_executor"), "disabled", True)


@pytest.mark.usefixtures("unlogged")
def test_cancel_while_a_retry_waits_frees_the_call_at_once() -> None:
    class Payload:
        pass

    def fails(payload: Payload) -> None:
        raise Boom

    clock = ManualClock()
    with PriorityExecutor(1, clock=clock, retry=Retry(backoff=10.0)) as ex:
        payload = Payload()
        alive = weakref.ref(payload)
        future = ex.submit(fails, payload)
        del payload
        wait_until(lambda: ex.stats().retries == 1)
        done: list[cf.Future[Any]] = []
        future.add_done_callback(done.append)
        assert future.cancel()
        assert done == [future]
        assert cf.wait([future], timeout=0).done == {future}  # reported at once
        assert alive() is None  # no cycle to wait for: freed by the cancel itself
        clock.advance(10)
        assert stats_fields(ex) == counts(cancelled=1)
    with pytest.raises(CancelledError):
        future.result(0)


def test_cancel_during_an_attempt_drops_its_outcome_and_nothing_follows() -> None:
    started, release = threading.Event(), threading.Event()
    calls = []

    def fails() -> None:
        calls.append(1)
        started.set()
        assert release.wait(TIMEOUT)
        raise Boom

    clock = ManualClock()
    with PriorityExecutor(1, clock=clock, retry=Retry(backoff=0.0)) as ex:
        future = ex.submit(fails)
        assert started.wait(TIMEOUT)
        assert future.cancel()  # the future is pending while its attempt runs
        assert future.cancelled()
        release.set()
        assert cf.wait([future], timeout=TIMEOUT).done == {future}
    assert calls == [1]
    assert stats_fields(ex) == counts(cancelled=1)
    assert ex.stats().retries == 0


def test_a_success_cancelled_during_its_attempt_is_dropped() -> None:
    started, release = threading.Event(), threading.Event()

    def works() -> str:
        started.set()
        assert release.wait(TIMEOUT)
        return "lost"

    with PriorityExecutor(1, retry=Retry()) as ex:
        future = ex.submit(works)
        assert started.wait(TIMEOUT)
        assert future.cancel()
        release.set()
    assert future.cancelled()
    assert stats_fields(ex) == counts(cancelled=1)


def test_a_retry_due_after_the_deadline_is_not_queued() -> None:
    clock = ManualClock()
    flaky = Flaky(clock, fails=5)
    with PriorityExecutor(2, clock=clock, retry=Retry(5, backoff=2.0, factor=2.0)) as ex:
        future = ex.submit(flaky, expires=5.0)
        drive(ex, clock, flaky, [0.0, 2.0])  # the next would be due at 6.0, after 5.0
        with pytest.raises(Boom) as raised:
            future.result(TIMEOUT)
        assert raised.value.args == (2,)
    assert stats_fields(ex) == counts(failed=1)
    assert ex.stats().retries == 1


def test_a_retry_not_started_by_the_deadline_expires_with_the_last_exception() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock, retry=Retry(3, backoff=1.0)) as ex:
        future = ex.submit(Flaky(clock, fails=5), expires=5.0)
        wait_until(lambda: ex.stats().retries == 1)
        with blocked_worker(ex):  # the only worker: the retry becomes due, and waits
            clock.advance(1)
            assert stats_fields(ex) == counts(ready=1, running=1)
            clock.advance(4)
            with pytest.raises(Boom) as raised:
                future.result(TIMEOUT)
            assert raised.value.args == (1,)
            assert stats_fields(ex)["failed"] == 1  # counted where its future ended
    assert stats_fields(ex) == counts(completed=1, failed=1)


def test_a_first_attempt_not_started_by_the_deadline_expires_as_usual() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock, retry=Retry()) as ex, blocked_worker(ex):
        future = ex.submit(Flaky(clock, fails=0), expires=1.0)
        clock.advance(1)
        assert future.cancelled()
    assert stats_fields(ex) == counts(completed=1, expired=1)


def test_retries_keep_their_priority() -> None:
    clock = ManualClock()
    order: list[str] = []
    with PriorityExecutor(1, clock=clock, retry=Retry(backoff=1.0)) as ex:
        ex.submit(Flaky(clock, fails=1), priority=5)
        wait_until(lambda: ex.stats().retries == 1)
        with blocked_worker(ex):
            low = ex.submit(order.append, "low", priority=1)
            clock.advance(1)
            [retry, plain] = ex.waiting()
            assert (retry.priority, plain.future) == (5, low)
    assert ex.stats().completed == 3


def test_a_retry_goes_behind_earlier_submissions_under_fifo() -> None:
    clock = ManualClock()
    order: list[str] = []

    def fails_once() -> None:
        order.append("retried")
        if len(order) == 1:
            raise Boom

    with PriorityExecutor(1, clock=clock, policy=Fifo(), retry=Retry(backoff=0.0)) as ex:
        with blocked_worker(ex):
            ex.submit(fails_once)
            ex.submit(order.append, "later")
        wait_until(lambda: ex.stats().completed == 3)
    assert order == ["retried", "later", "retried"]


def test_recurring_runs_are_retried_before_the_series_would_end() -> None:
    clock = ManualClock()
    outcomes = iter([None, Boom(1), None, Boom(2), Boom(3), Boom(4)])
    starts: queue.Queue[float] = queue.Queue()

    def run() -> None:
        starts.put(clock.now())
        outcome = next(outcomes)
        if outcome is not None:
            raise outcome

    retry = Retry(3, backoff=1.0, factor=2.0)
    with PriorityExecutor(1, clock=clock, retry=retry) as ex:
        series = ex.submit_recurring(run, interval=10)
        # Run 1 at 0; run 2 at 10 fails, its retry at 11 returns; run 3 at 21 fails, and
        # its retries at 22 and 24 (counting afresh after the success) fail: the series ends.
        for t in (0, 10, 11, 21, 22, 24):
            if t > clock.now():
                clock.advance(t - clock.now())
            assert starts.get(timeout=TIMEOUT) == t
            if t == 24:
                break
            wait_until(lambda: ex.stats().scheduled == 1, what=f"what follows {t}")
        with pytest.raises(Boom) as raised:
            series.result(TIMEOUT)
        assert raised.value.args == (4,)
    assert stats_fields(ex) == counts(completed=2, failed=1)
    assert ex.stats().retries == 3


def test_shutdown_while_an_attempt_runs_still_retries_it_and_waits() -> None:
    started, release = threading.Event(), threading.Event()
    calls: list[float] = []
    clock = ManualClock()

    def fails_once() -> str:
        calls.append(clock.now())
        if len(calls) == 1:
            started.set()
            assert release.wait(TIMEOUT)
            raise Boom
        return "second"

    ex = PriorityExecutor(2, clock=clock, retry=Retry(backoff=3.0))
    future = ex.submit(fails_once)
    assert started.wait(TIMEOUT)
    shutdown = threading.Thread(target=ex.shutdown, daemon=True)
    shutdown.start()
    wait_until(lambda: ex._scheduler.closed is not None, what="shutdown to begin")
    release.set()
    wait_until(lambda: ex.stats().retries == 1, what="the retry after shutdown began")
    assert stats_fields(ex) == counts(scheduled=1)
    assert shutdown.is_alive()  # it waits for the retry
    clock.advance(3)
    assert future.result(TIMEOUT) == "second"
    shutdown.join(TIMEOUT)
    assert not shutdown.is_alive()
    assert calls == [0.0, 3.0]
    assert stats_fields(ex) == counts(completed=1)


def test_shutdown_cancel_futures_cancels_retries_and_retries_no_more() -> None:
    started, release = threading.Event(), threading.Event()

    def blocks_then_fails() -> None:
        started.set()
        assert release.wait(TIMEOUT)
        raise Boom("after shutdown")

    clock = ManualClock()
    ex = PriorityExecutor(2, clock=clock, retry=Retry(backoff=1.0))
    waiting = ex.submit(Flaky(clock, fails=5))
    wait_until(lambda: ex.stats().retries == 1)
    running = ex.submit(blocks_then_fails)
    assert started.wait(TIMEOUT)
    ex.shutdown(wait=False, cancel_futures=True)
    assert waiting.cancelled()
    release.set()
    with pytest.raises(Boom, match="after shutdown"):
        running.result(TIMEOUT)
    call_bounded(ex.shutdown, "shutdown()")
    assert stats_fields(ex) == counts(failed=1, cancelled=1)
    assert ex.stats().retries == 1


def test_a_retry_after_shutdown_on_real_time_runs_before_shutdown_returns() -> None:
    flaky_calls = []

    def flaky() -> int:
        flaky_calls.append(1)
        if len(flaky_calls) < 3:
            raise Boom
        return len(flaky_calls)

    ex = PriorityExecutor(2, retry=Retry(backoff=0.01))
    future = ex.submit(flaky)
    call_bounded(ex.shutdown, "shutdown()")
    assert future.result(0) == 3
    assert ex.stats().retries == 2


def test_backend_hands_each_retry_off_again(tmp_path: Path) -> None:
    log = str(tmp_path / "calls")
    with PriorityExecutor(2, backend="process", retry=Retry(3, backoff=0.01)) as ex:
        future = ex.submit(remote.fail_until, log, 2)
        assert future.result(60) == 3
        failing = ex.submit(remote.fail, "always")
        with pytest.raises(ValueError, match="always"):
            failing.result(60)
    assert stats_fields(ex) == counts(completed=1, failed=1)
    assert ex.stats().retries == 4


def test_backend_passed_in_hands_each_retry_off_again(tmp_path: Path) -> None:
    import multiprocessing

    context = multiprocessing.get_context(
        "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    )
    log = str(tmp_path / "calls")
    with (
        cf.ProcessPoolExecutor(2, mp_context=context) as pool,
        PriorityExecutor(1, backend=pool, retry=Retry(3, backoff=0.0)) as ex,
    ):
        assert ex.submit(remote.fail_until, log, 1).result(60) == 2
    assert Path(log).read_text() == "xx"


def test_no_retry_policy_means_a_failure_is_final() -> None:
    with PriorityExecutor(1) as ex:
        future = ex.submit(Flaky(ManualClock(), fails=1))
        with pytest.raises(Boom):
            future.result(TIMEOUT)
    assert ex.stats().retries == 0


@pytest.mark.usefixtures("unlogged")
def test_a_finished_task_lets_go_of_its_call_and_exception() -> None:
    class Payload:
        pass

    with PriorityExecutor(1, retry=Retry(2, backoff=0.0)) as ex:
        payload = Payload()
        alive = weakref.ref(payload)
        future = ex.submit(Flaky(ManualClock(), fails=1), payload)
        assert future.result(TIMEOUT) == "ok"
        del payload
        assert alive() is None  # no cycle to wait for either


# -- the policy ----------------------------------------------------------------------------


def test_policy_is_immutable_comparable_and_readable() -> None:
    retry = Retry(5, backoff=0.5, factor=3, max_backoff=10, jitter=0.1, on=(OSError, KeyError))
    assert retry == Retry(5, backoff=0.5, factor=3.0, max_backoff=10.0, jitter=0.1,
                          on=(OSError, KeyError))  # fmt: skip
    assert retry != Retry(5) and hash(retry) == hash(pickle.loads(pickle.dumps(retry)))
    assert pickle.loads(pickle.dumps(retry)) == retry
    assert repr(retry) == (
        "Retry(5, backoff=0.5, factor=3.0, max_backoff=10.0, jitter=0.1, on=(OSError, KeyError))"
    )
    assert repr(Retry()) == (
        "Retry(3, backoff=0.1, factor=2.0, max_backoff=60.0, jitter=0.0, on=Exception)"
    )
    with pytest.raises(AttributeError):
        retry.attempts = 1  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del retry.backoff  # type: ignore[misc]
    assert Retry(on=ValueError) == Retry(on=(ValueError,))


@pytest.mark.parametrize(
    ("kwargs", "error", "field"),
    [
        ({"attempts": 0}, ValueError, "attempts"),
        ({"attempts": 2.0}, TypeError, "attempts"),
        ({"attempts": True}, TypeError, "attempts"),
        ({"backoff": -1}, ValueError, "backoff"),
        ({"backoff": math.nan}, ValueError, "backoff"),
        ({"backoff": math.inf}, ValueError, "backoff"),
        ({"backoff": "1"}, TypeError, "backoff"),
        ({"max_backoff": -0.5}, ValueError, "max_backoff"),
        ({"max_backoff": None}, TypeError, "max_backoff"),
        ({"factor": 0.5}, ValueError, "factor"),
        ({"factor": math.inf}, ValueError, "factor"),
        ({"factor": math.nan}, ValueError, "factor"),
        ({"factor": True}, TypeError, "factor"),
        ({"jitter": 1.5}, ValueError, "jitter"),
        ({"jitter": -0.1}, ValueError, "jitter"),
        ({"jitter": math.nan}, ValueError, "jitter"),
        ({"jitter": "0"}, TypeError, "jitter"),
        ({"on": ValueError()}, TypeError, "on"),
        ({"on": ()}, TypeError, "on"),
        ({"on": (ValueError, int)}, TypeError, "on"),
        ({"on": [ValueError]}, TypeError, "on"),
    ],
)
def test_bad_policy_fields_raise_naming_the_field(
    kwargs: dict[str, Any], error: type[Exception], field: str
) -> None:
    with pytest.raises(error, match=f"^{field} "):
        Retry(**kwargs)


def test_the_executor_takes_only_a_retry_policy() -> None:
    with pytest.raises(TypeError, match=r"^retry must be a Retry"):
        PriorityExecutor(1, retry=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^retry must be an instance such as Retry\(3\)"):
        PriorityExecutor(1, retry=Retry)  # type: ignore[arg-type]
    with PriorityExecutor(1) as ex:
        with pytest.raises(TypeError, match=r"^retry must be a Retry"):
            ex.lane("api", retry="3")  # type: ignore[arg-type]
        assert ex.lane("api").submit(int).result(TIMEOUT) == 0  # the refusal changed nothing


def test_timedeltas_are_taken_as_backoffs() -> None:
    import datetime

    retry = Retry(backoff=datetime.timedelta(milliseconds=250))
    assert retry.backoff == 0.25


# -- lanes -------------------------------------------------------------------------------------


def test_a_lanes_retry_policy_replaces_the_executors() -> None:
    clock = ManualClock()
    with PriorityExecutor(2, clock=clock, retry=Retry(2, backoff=1.0)) as ex:
        lane = ex.lane(retry=Retry(4, backoff=5.0, factor=1.0))
        in_lane, plain = Flaky(clock, fails=3), Flaky(clock, fails=3)
        plain_future = ex.submit(plain)
        wait_until(lambda: ex.stats().retries == 1, what="the retry to be queued")
        clock.advance(1)
        with pytest.raises(Boom):
            plain_future.result(TIMEOUT)  # two attempts only, by the executor's policy
        assert plain.calls == 2
        lane_future = lane.submit(in_lane)
        drive(lane, clock, in_lane, [1.0, 6.0, 11.0, 16.0])
        assert lane_future.result(TIMEOUT) == "ok"
        assert lane.stats().retries == 3
        assert ex.stats().retries == 4


def test_a_lane_without_a_policy_uses_the_executors() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock, retry=Retry(2, backoff=1.0)) as ex:
        flaky = Flaky(clock, fails=1)
        future = ex.lane("api", max_running=1).submit(flaky)
        drive(ex, clock, flaky, [0.0, 1.0])
        assert future.result(TIMEOUT) == "ok"


def test_a_retry_waiting_frees_its_lanes_room_and_keeps_its_limits() -> None:
    clock = ManualClock()
    with PriorityExecutor(2, clock=clock) as ex:
        lane = ex.lane(max_running=1, cooldown=2.0, retry=Retry(backoff=1.0))
        flaky = Flaky(clock, fails=1)
        failing = lane.submit(flaky)
        assert flaky.starts.get(timeout=TIMEOUT) == 0.0
        other = lane.submit(str, "next")
        wait_until(lambda: lane.stats().retries == 1, what="the retry to be queued")
        # The failed attempt ended: the lane's slot is free, its cooldown runs from then,
        # and holds back the next task once a worker, back from the attempt, looks at it.
        wait_until(
            lambda: stats_fields(ex) == counts(scheduled=1, throttled=1),
            what="the next task to be throttled by the cooldown",
        )
        clock.advance(1)  # the retry is due, behind the throttled task, both in cooldown
        wait_until(
            lambda: stats_fields(ex) == counts(throttled=2), what="the retry to be throttled"
        )
        clock.advance(1)
        assert other.result(TIMEOUT) == "next"  # submitted first, due first
        clock.advance(2)
        assert failing.result(TIMEOUT) == "ok"
        assert flaky.starts.get(timeout=TIMEOUT) == 4.0
        assert lane.stats() == ex.stats()


def test_a_lanes_shutdown_with_cancel_futures_stops_its_retries() -> None:
    started, release = threading.Event(), threading.Event()

    def blocks_then_fails() -> None:
        started.set()
        assert release.wait(TIMEOUT)
        raise Boom("after the lane's shutdown")

    clock = ManualClock()
    with PriorityExecutor(2, clock=clock) as ex:
        lane = ex.lane(retry=Retry(backoff=1.0))
        running = lane.submit(blocks_then_fails)
        assert started.wait(TIMEOUT)
        lane.shutdown(wait=False, cancel_futures=True)
        release.set()
        with pytest.raises(Boom, match="after the lane's shutdown"):
            running.result(TIMEOUT)
        assert lane.stats().retries == 0
        assert ex.submit(str, "open").result(TIMEOUT) == "open"  # the executor goes on
