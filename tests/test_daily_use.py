"""Traps in daily use, each found by doing the obvious thing: written as the code of a user
moving a crawler from ``ThreadPoolExecutor`` (per-host lanes, retries, deadlines, a health
check, tests on a ManualClock)."""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import threading
from concurrent.futures import CancelledError
from datetime import datetime
from typing import Any

import pytest
from helpers import TIMEOUT, Boom, executor_threads, unique_prefix

from priority_executor import Aging, Expired, PriorityExecutor, Retry
from priority_executor.testing import ManualClock


class Requests:
    """A fake HTTP client: records which URLs were fetched, and fails those told to."""

    def __init__(self, failures: int = 0) -> None:
        self.lock = threading.Lock()
        self.fetched: list[str] = []
        self.failures = failures

    def fetch(self, url: str) -> str:
        with self.lock:
            self.fetched.append(url)
            if self.failures:
                self.failures -= 1
                raise ConnectionError(f"{url}: connection reset")
        return f"<html>{url}</html>"


# -- 1. a named lane keeps its limits --------------------------------------------------------


@pytest.mark.timeout(20)
def test_a_named_lane_keeps_its_limits_when_no_reference_was_kept() -> None:
    clock = ManualClock()
    requests = Requests()
    with PriorityExecutor(8, clock=clock) as ex:
        ex.lane("github", max_starts=2, per=1.0)  # configured once, at start-up
        gc.collect()
        pages = [ex.lane("github").submit(requests.fetch, f"/page/{i}") for i in range(6)]
        clock.settle()
        assert len(requests.fetched) == 2  # the rate limit holds
        clock.advance(1)
        clock.settle()
        assert len(requests.fetched) == 4
        clock.advance(1)
        assert [page.result(TIMEOUT) for page in pages][-1] == "<html>/page/5</html>"


def test_lanes_lists_the_named_lanes_with_their_limits() -> None:
    with PriorityExecutor(2) as ex:
        ex.lane("github", max_starts=10, per=60, retry=Retry(3))
        ex.lane("device", max_running=1, cooldown=0.5, priority=5)
        anonymous = ex.lane(max_running=1)
        gc.collect()
        lanes = ex.lanes()
        assert sorted(lanes) == ["device", "github"]
        assert anonymous not in lanes.values()
        github, device = lanes["github"], lanes["device"]
        assert (github.max_starts, github.per, github.retry) == (10, 60.0, Retry(3))
        assert (device.max_running, device.cooldown, device.priority) == (1, 0.5, 5)
        assert repr(device) == "<Lane 'device' max_running=1 cooldown=0.5 priority=5>"
        github.shutdown()
        assert list(ex.lanes()) == ["device"]


# -- 2. a failing test fails at once ---------------------------------------------------------


@pytest.mark.timeout(10)
def test_a_failed_assert_inside_a_manual_clock_executor_fails_at_once() -> None:
    prefix = unique_prefix("failing-test")
    clock = ManualClock()
    with (
        pytest.raises(AssertionError, match="the reminder was not sent"),
        PriorityExecutor(thread_name_prefix=prefix, clock=clock) as ex,
    ):
        reminder = ex.submit(print, "reminder", delay=30)
        ex.submit(print, "now").result(TIMEOUT)
        assert reminder.done(), "the reminder was not sent"
    assert reminder.cancelled()
    assert executor_threads(prefix) == []


@pytest.mark.timeout(20)
def test_settle_runs_what_is_due_and_returns_when_only_the_clock_can_bring_more() -> None:
    clock = ManualClock()
    requests = Requests(failures=1)
    done: list[str] = []
    with PriorityExecutor(4, clock=clock) as ex:
        api = ex.lane("api", max_starts=1, per=10, retry=Retry(2, backoff=5))

        def crawl(*urls: str) -> None:
            # A task that submits more work: settle() waits for that too.
            for url in urls:
                page = api.submit(requests.fetch, url)
                page.add_done_callback(functools.partial(finished, url))

        def finished(url: str, _: object) -> None:
            done.append(url)

        ex.submit(crawl, "/a", "/b")
        clock.settle()
        # /a failed and waits for its backoff; /b waits for the window: only time helps.
        assert requests.fetched == ["/a"]
        assert ex.stats().scheduled == 1 and ex.stats().throttled == 1
        clock.advance(5)
        clock.settle()
        assert requests.fetched == ["/a"]  # the retry is due, but the window is not over
        clock.advance(5)
        clock.settle()
        assert len(requests.fetched) == 2 and len(done) == 1  # its callback ran too
        clock.advance(10)
        clock.settle()
        assert sorted(done) == ["/a", "/b"]


# -- 4. an expiry is told apart from a cancellation ------------------------------------------


def test_an_expired_future_raises_expired_which_names_the_deadline(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock()
    with (
        caplog.at_level(logging.DEBUG, logger="priority_executor"),
        PriorityExecutor(1, clock=clock) as ex,
    ):
        stale = ex.submit(Requests().fetch, "/stale", delay=1, expires=2)
        mine = ex.submit(Requests().fetch, "/mine", delay=1)
        assert mine.cancel()
        clock.advance(2)
        assert stale.cancelled()  # what concurrent.futures knows: it will never run
        with pytest.raises(Expired, match=r"Requests\.fetch expired: not started by its deadline"):
            stale.result()
        with pytest.raises(CancelledError) as cancelled:  # existing handlers still work
            stale.exception()
        assert isinstance(cancelled.value, Expired)
        assert cancelled.value.deadline.timestamp() == pytest.approx(clock.wall(), abs=1e-3)
        with pytest.raises(CancelledError) as plain:
            mine.result()
        assert type(plain.value) is CancelledError  # the user's own cancel()
    expiries = [r for r in caplog.records if "expired" in r.getMessage()]
    assert [r.levelno for r in expiries] == [logging.DEBUG]
    assert "Requests.fetch" in expiries[0].getMessage()


def test_an_asyncio_user_tells_an_expiry_from_a_cancellation() -> None:
    async def fetch_all(ex: PriorityExecutor, clock: ManualClock) -> list[str]:
        stale = ex.submit(Requests().fetch, "/stale", delay=1, expires=2)
        clock.advance(2)
        try:
            await asyncio.wrap_future(stale)
        except asyncio.CancelledError:
            # wrap_future makes any cancelled future a plain cancellation: ask the future.
            if stale.cancelled():
                return [type(exc).__name__ for exc in _raised(stale.exception)]
            raise
        return []

    with PriorityExecutor(1, clock=(clock := ManualClock())) as ex:
        assert asyncio.run(fetch_all(ex, clock)) == ["Expired"]


def _raised(call: Any) -> list[BaseException]:
    try:
        call()
    except BaseException as exc:
        return [exc]
    return []


# -- 5. retries: one line each ---------------------------------------------------------------


def test_each_retry_is_one_line_naming_the_callable_its_lane_and_attempt(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock()
    requests = Requests(failures=2)
    with (
        caplog.at_level(logging.INFO, logger="priority_executor"),
        PriorityExecutor(2, clock=clock) as ex,
    ):
        api = ex.lane("api", retry=Retry(4, backoff=0.5))
        page = api.submit(requests.fetch, "/index")
        clock.settle()
        clock.advance(0.5)
        clock.settle()
        clock.advance(1)
        assert page.result(TIMEOUT) == "<html>/index</html>"
    lines = [r.getMessage() for r in caplog.records if r.name == "priority_executor"]
    assert lines == [
        "Requests.fetch in lane 'api' failed on attempt 1 of 4"
        " (ConnectionError: /index: connection reset); retrying in 0.5 s",
        "Requests.fetch in lane 'api' failed on attempt 2 of 4"
        " (ConnectionError: /index: connection reset); retrying in 1 s",
    ]
    assert all(r.exc_info is None for r in caplog.records)


def test_the_retry_traceback_is_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock()
    with (
        caplog.at_level(logging.DEBUG, logger="priority_executor"),
        PriorityExecutor(1, clock=clock, retry=Retry(2)) as ex,
    ):
        ex.submit(Requests(failures=1).fetch, "/x")
        clock.settle()
        clock.advance(1)
    (record,) = [r for r in caplog.records if "retrying" in r.getMessage()]
    assert record.exc_info is not None and isinstance(record.exc_info[1], ConnectionError)


# -- 8. a recurring health check survives a failed run ---------------------------------------


def test_a_health_check_in_a_lane_that_survives_failures_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock()
    calls: list[float] = []

    def health_check() -> None:
        calls.append(clock.now())
        if len(calls) == 2:
            raise Boom("database unreachable")

    with (
        caplog.at_level(logging.ERROR, logger="priority_executor"),
        PriorityExecutor(2, clock=clock) as ex,
    ):
        checks = ex.lane("health", survive_failures=True)
        series = checks.submit_recurring(health_check, interval=60)
        for _ in range(3):
            clock.settle()
            clock.advance(60)
        clock.settle()
        assert calls == [0, 60, 120, 180]
        assert not series.done()
        assert (ex.stats().completed, ex.stats().failed) == (3, 1)
        series.cancel()
    (record,) = [r for r in caplog.records if r.name == "priority_executor"]
    assert "health_check in lane 'health' raised; its series goes on" in record.getMessage()
    assert record.exc_info is not None and isinstance(record.exc_info[1], Boom)


# -- 9. smaller traps ------------------------------------------------------------------------


def test_per_without_max_starts_is_refused() -> None:
    with PriorityExecutor(1) as ex, pytest.raises(ValueError, match=r"per=5 .*max_starts"):
        ex.lane("github", per=5)


@pytest.mark.parametrize(
    "on", [KeyboardInterrupt, SystemExit, (KeyboardInterrupt, SystemExit)], ids=repr
)
def test_a_retry_that_could_never_retry_is_refused(on: Any) -> None:
    with pytest.raises(ValueError, match="can never be retried"):
        Retry(on=on)


def test_lane_after_shutdown_raises() -> None:
    ex = PriorityExecutor(1)
    ex.shutdown()
    with pytest.raises(RuntimeError, match="after shutdown"):
        ex.lane("github")


@pytest.mark.parametrize("delay", [None, 5])
def test_a_huge_priority_under_aging_is_refused_at_submit(delay: float | None) -> None:
    with PriorityExecutor(1, policy=Aging(0.1)) as ex:
        with pytest.raises(ValueError, match="priority is too large"):
            ex.submit(print, priority=10**400, delay=delay)
        with pytest.raises(ValueError, match="priority is too large"):
            ex.lane(priority=-(10**400))
        assert ex.submit(int, priority=10**300).result(TIMEOUT) == 0
        assert ex.stats().failed == 0


def test_run_at_datetime_min_says_what_is_wrong_with_run_at() -> None:
    with PriorityExecutor(1) as ex, pytest.raises(ValueError) as error:
        ex.submit(print, run_at=datetime.min)
    assert str(error.value).startswith("run_at=datetime.datetime(1, 1, 1, 0, 0) cannot be")
    assert "year 0" not in str(error.value)
