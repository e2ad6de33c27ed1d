"""Run-time limits, the token inside a task, overruns, and the process backend's kill."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import (
    FIRST_COMPLETED,
    CancelledError,
    Future,
    ThreadPoolExecutor,
    as_completed,
    wait,
)
from datetime import timedelta
from typing import Any

import pytest
from helpers import TIMEOUT, run_script, wait_until

from priority_executor import (
    CancelToken,
    PriorityExecutor,
    Retry,
    TaskStopped,
    TaskTimeoutError,
    current,
    stop,
)
from priority_executor.testing import ManualClock


@contextlib.contextmanager
def released() -> Iterator[threading.Event]:
    """An event that hung calls wait for, set on the way out (also when a test fails):
    given after the executor in a ``with``, it is set before the executor waits."""
    release = threading.Event()
    try:
        yield release
    finally:
        release.set()


def hang(release: threading.Event, started: threading.Event | None = None) -> str:
    """A call that ignores its token: it returns when the test releases it."""
    if started is not None:
        started.set()
    assert release.wait(TIMEOUT)
    return "late"


# -- the limit ---------------------------------------------------------------------------


def test_future_fails_exactly_at_the_limit_on_a_manual_clock() -> None:
    clock = ManualClock()
    started = threading.Event()
    with PriorityExecutor(2, clock=clock) as ex, released() as release:
        future = ex.options(time_limit=2).submit(hang, release, started)
        assert started.wait(TIMEOUT)
        clock.advance(1.999)
        assert not future.done()
        clock.advance(0.001)
        # At once: advance() fired the limit, and the future failed in it.
        assert future.done()
        error = future.exception()
        assert isinstance(error, TaskTimeoutError)
        assert isinstance(error, TimeoutError)
        assert error.task == "hang" and error.limit == 2.0
        assert "hang" in str(error) and "2 s" in str(error)
        with pytest.raises(TaskTimeoutError):
            future.result()
        assert ex.stats().overrunning == 1
        assert ex.stats().running == 1  # its call still runs
        release.set()
        wait_until(lambda: ex.stats().failed == 1, what="the overrun counted failed")
        stats = ex.stats()
        assert (stats.running, stats.overrunning, stats.completed) == (0, 0, 0)
        assert future.exception() is error  # what the call returned late is dropped


def test_wait_and_as_completed_see_the_failure_at_the_limit() -> None:
    clock = ManualClock()
    started = threading.Event()
    with PriorityExecutor(2, clock=clock) as ex, released() as release:
        future = ex.options(time_limit=1).submit(hang, release, started)
        assert started.wait(TIMEOUT)
        box: dict[str, Any] = {}

        def waiter() -> None:
            box["wait"] = wait([future], timeout=TIMEOUT, return_when=FIRST_COMPLETED)
            box["as_completed"] = next(as_completed([future], timeout=TIMEOUT))

        thread = threading.Thread(target=waiter)
        thread.start()
        clock.advance(1)
        thread.join(TIMEOUT)
        assert future in box["wait"].done
        assert box["as_completed"] is future
        release.set()


def test_real_clock_limit_fails_the_future_within_milliseconds() -> None:
    with PriorityExecutor(2) as ex, released() as release:
        start = time.monotonic()
        future = ex.options(time_limit=0.05).submit(hang, release)
        with pytest.raises(TaskTimeoutError):
            future.result(timeout=TIMEOUT)
        took = time.monotonic() - start
        release.set()
    assert 0.05 <= took < 2.0  # generous: a busy machine


def test_a_task_done_in_time_keeps_its_result_and_its_limit_dies() -> None:
    clock = ManualClock()
    with PriorityExecutor(2, clock=clock) as ex:
        future = ex.options(time_limit=5).submit(lambda: 42)
        assert future.result(TIMEOUT) == 42
        clock.settle(TIMEOUT)
        clock.advance(10)  # the limit's alarm is dead: nothing fires
        assert future.result() == 42
        assert ex.stats().completed == 1 and ex.stats().failed == 0


def test_timedelta_limit_and_precedence_call_over_lane_over_executor() -> None:
    clock = ManualClock()
    with (
        PriorityExecutor(6, clock=clock, time_limit=timedelta(seconds=10)) as ex,
        released() as release,
    ):
        lane = ex.lane(time_limit=5)
        by_executor = ex.submit(hang, release)
        by_lane = lane.submit(hang, release)
        by_call = lane.options(time_limit=1).submit(hang, release)
        by_call_plain = ex.options(time_limit=2).submit(hang, release)
        wait_until(lambda: ex.stats().running == 4, what="all four running")
        clock.advance(1)
        assert [f.done() for f in (by_call, by_call_plain, by_lane, by_executor)] == [
            True,
            False,
            False,
            False,
        ]
        clock.advance(1)
        assert by_call_plain.done() and not by_lane.done()
        clock.advance(3)
        assert by_lane.done() and not by_executor.done()
        clock.advance(5)
        assert by_executor.done()
        limits = [f.exception().limit for f in (by_call, by_call_plain, by_lane, by_executor)]  # type: ignore[union-attr]
        assert limits == [1, 2, 5, 10]
        release.set()


# -- the one atomic step: the limit against the call's end --------------------------------


def test_race_the_call_ends_first_then_the_limit_is_dead() -> None:
    clock = ManualClock()
    go, started = threading.Event(), threading.Event()
    with PriorityExecutor(1, clock=clock) as ex:
        future = ex.options(time_limit=1).submit(hang, go, started)
        assert started.wait(TIMEOUT)
        go.set()
        assert future.result(TIMEOUT) == "late"  # its end took the step first
        clock.advance(1)  # the limit's alarm finds the run ended: nothing happens
        assert future.result() == "late"
        clock.settle(TIMEOUT)
        assert (ex.stats().completed, ex.stats().failed, ex.stats().overrunning) == (1, 0, 0)


def test_race_the_limit_fires_first_then_the_outcome_is_dropped() -> None:
    clock = ManualClock()
    go, started = threading.Event(), threading.Event()
    with PriorityExecutor(1, clock=clock) as ex:
        future = ex.options(time_limit=1).submit(hang, go, started)
        assert started.wait(TIMEOUT)
        clock.advance(1)  # the limit took the step first
        assert isinstance(future.exception(), TaskTimeoutError)
        go.set()  # the call returns "late": dropped
        clock.settle(TIMEOUT)
        assert isinstance(future.exception(), TaskTimeoutError)
        assert (ex.stats().completed, ex.stats().failed, ex.stats().overrunning) == (0, 1, 0)


def test_race_limit_against_end_at_the_same_moment_has_one_outcome() -> None:
    # Real threads: the call returns while the promoter fires the limit. Either way the
    # future has one outcome, and the task is counted once, where its future ended.
    for _ in range(30):
        with PriorityExecutor(2) as ex:
            future = ex.options(time_limit=0.002).submit(time.sleep, 0.002)
            with contextlib.suppress(TaskTimeoutError):
                future.result(TIMEOUT)
        wait_until(lambda: ex.stats().running == 0, what="the end counted")
        stats = ex.stats()
        if future.exception() is None:
            assert (stats.completed, stats.failed) == (1, 0)
        else:
            assert (stats.completed, stats.failed) == (0, 1)
        assert stats.overrunning == 0


# -- the token ----------------------------------------------------------------------------


def test_a_cooperative_loop_stops_at_the_limit() -> None:
    clock = ManualClock()
    rounds: list[int] = []

    def loop() -> None:
        token = current()
        while not token.cancelled:
            rounds.append(1)
            token.sleep(0.005)
        token.raise_if_cancelled()

    with PriorityExecutor(1, clock=clock) as ex:
        future = ex.options(time_limit=3).submit(loop)
        wait_until(lambda: rounds, what="the loop running")
        clock.advance(3)
        assert isinstance(future.exception(), TaskTimeoutError)
        clock.settle(TIMEOUT)  # the loop saw its token and returned
        assert ex.stats().overrunning == 0 and ex.stats().running == 0


def test_the_hung_socket_call_is_unblocked_by_on_cancel() -> None:
    clock = ManualClock()
    ours, theirs = socket.socketpair()

    def fetch() -> bytes:
        token = current()
        # What blocks the call is what the token ends: shutdown() wakes a blocked recv()
        # (close() from another thread does not, on Linux).
        token.on_cancel(lambda: ours.shutdown(socket.SHUT_RDWR))
        data = ours.recv(10)  # the peer never answers
        token.raise_if_cancelled()
        return data

    try:
        with PriorityExecutor(1, clock=clock) as ex:
            future = ex.options(time_limit=30).submit(fetch)
            wait_until(lambda: ex.stats().running == 1, what="the call started")
            time.sleep(0.01)  # into recv(): not needed for correctness, only realism
            clock.advance(30)
            assert isinstance(future.exception(), TaskTimeoutError)
            clock.settle(TIMEOUT)
            assert ex.stats().overrunning == 0
    finally:
        theirs.close()
        ours.close()


def test_the_hung_lane_recovers_and_other_lanes_never_stalled() -> None:
    clock = ManualClock()
    with PriorityExecutor(4, clock=clock) as ex:
        api = ex.lane("api", max_running=2, time_limit=10)
        other = ex.lane("other")
        blocked: list[threading.Event] = []

        def call_api() -> str:
            stuck = threading.Event()
            blocked.append(stuck)
            current().on_cancel(stuck.set)  # as closing its connection would
            stuck.wait(TIMEOUT)
            current().raise_if_cancelled()
            return "answer"

        hung = [api.submit(call_api) for _ in range(2)]
        wait_until(lambda: len(blocked) == 2, what="both calls hung")
        queued = api.submit(lambda: "after")
        assert other.submit(lambda: "meanwhile").result(TIMEOUT) == "meanwhile"
        assert not queued.done()  # the lane is full
        clock.advance(10)
        assert all(isinstance(f.exception(), TaskTimeoutError) for f in hung)
        assert queued.result(TIMEOUT) == "after"


def test_current_outside_a_task_raises() -> None:
    with pytest.raises(RuntimeError, match="outside a task"):
        current()
    with PriorityExecutor(1) as ex:
        future: Future[None] = Future()
        future.add_done_callback(lambda f: None)
        done = ex.submit(lambda: 1)
        seen: list[BaseException] = []

        def callback(_: Future[int]) -> None:
            try:
                current()
            except RuntimeError as exc:
                seen.append(exc)

        done.result(TIMEOUT)
        done.add_done_callback(callback)
        assert seen


def test_every_kind_of_task_reaches_its_own_token() -> None:
    clock = ManualClock()
    with PriorityExecutor(2, clock=clock, retry=None) as ex:
        plain = ex.submit(current)
        lane = ex.lane("l", max_running=1).submit(current)
        mapped = list(ex.map(lambda _: current(), range(2)))
        limited = ex.options(time_limit=5).submit(current)
        tokens = [plain.result(TIMEOUT), lane.result(TIMEOUT), *mapped, limited.result(TIMEOUT)]
        assert all(isinstance(token, CancelToken) for token in tokens)
        assert len({id(token) for token in tokens}) == len(tokens)
        assert not any(token.cancelled for token in tokens)
        assert tokens[0].deadline is None and tokens[0].time_left() is None
        assert tokens[-1].deadline == 5.0


def test_token_deadline_and_time_left_follow_the_executor_clock() -> None:
    clock = ManualClock(start=100.0)
    seen: list[CancelToken] = []

    def task() -> None:
        seen.append(current())
        release.wait(TIMEOUT)

    with PriorityExecutor(1, clock=clock) as ex, released() as release:
        ex.options(time_limit=4).submit(task)
        wait_until(lambda: seen, what="the task started")
        assert seen[0].deadline == 104.0
        clock.advance(1)
        assert seen[0].time_left() == 3.0
        release.set()


def test_each_retry_attempt_gets_a_fresh_token_and_limit() -> None:
    clock = ManualClock()
    tokens: list[CancelToken] = []
    release = threading.Event()

    def attempt() -> str:
        token = current()
        tokens.append(token)
        if len(tokens) < 3:
            token.on_cancel(release.set)
            release.wait(TIMEOUT)
            release.clear()
            token.raise_if_cancelled()
        return "third time"

    retry = Retry(3, backoff=1, factor=1, on=TaskTimeoutError)
    with PriorityExecutor(1, clock=clock, retry=retry) as ex:
        future = ex.options(time_limit=2).submit(attempt)
        wait_until(lambda: len(tokens) == 1, what="attempt 1")
        clock.advance(2)  # attempt 1 over its limit: retried, the future stays pending
        assert not future.done()
        clock.settle(TIMEOUT)
        clock.advance(1)  # the backoff
        wait_until(lambda: len(tokens) == 2, what="attempt 2")
        assert tokens[1].deadline == 5.0  # its own start + 2
        clock.advance(2)
        clock.settle(TIMEOUT)
        clock.advance(1)
        assert future.result(TIMEOUT) == "third time"
        assert tokens[0].cancelled and tokens[1].cancelled and not tokens[2].cancelled
        assert ex.stats().retries == 2 and ex.stats().completed == 1


def test_a_timeout_not_retried_fails_the_future_at_the_limit() -> None:
    clock = ManualClock()
    with (
        PriorityExecutor(1, clock=clock, retry=Retry(3, on=ValueError)) as ex,
        released() as release,
    ):
        future = ex.options(time_limit=1).submit(hang, release)
        wait_until(lambda: ex.stats().running == 1, what="started")
        clock.advance(1)
        assert isinstance(future.exception(), TaskTimeoutError)  # at once: no retry follows
        release.set()
        clock.settle(TIMEOUT)
        assert ex.stats().retries == 0 and ex.stats().failed == 1


def test_a_series_run_over_its_limit_ends_the_series_at_once() -> None:
    clock = ManualClock()
    runs: list[int] = []

    def run() -> None:
        runs.append(1)
        if len(runs) == 2:
            release.wait(TIMEOUT)

    with PriorityExecutor(1, clock=clock) as ex, released() as release:
        series = ex.options(time_limit=5).submit_recurring(run, interval=10)
        wait_until(lambda: ex.stats().completed == 1, what="run 1")
        clock.advance(10)
        wait_until(lambda: len(runs) == 2, what="run 2")
        clock.advance(5)
        assert isinstance(series.exception(), TaskTimeoutError)
        release.set()
        clock.settle(TIMEOUT)
        clock.advance(100)
        clock.settle(TIMEOUT)
        assert len(runs) == 2


def test_a_surviving_series_goes_on_after_a_run_over_its_limit() -> None:
    clock = ManualClock()
    runs: list[CancelToken] = []

    def run() -> None:
        token = current()
        runs.append(token)
        if len(runs) == 1:
            token.sleep(TIMEOUT)  # returns early, at its limit

    with PriorityExecutor(1, clock=clock) as ex:
        lane = ex.lane("jobs", survive_failures=True, time_limit=5)
        series = lane.submit_recurring(run, interval=10)
        wait_until(lambda: runs, what="run 1")
        clock.advance(5)
        assert not series.done()
        clock.settle(TIMEOUT)  # run 1 ended, failed; run 2 is due 10 s later
        clock.advance(10)
        wait_until(lambda: len(runs) == 2, what="run 2")
        assert runs[0].cancelled and not runs[1].cancelled
        series.cancel()
        clock.settle(TIMEOUT)
        assert ex.stats().failed == 1


# -- stop() and cancel() ------------------------------------------------------------------


def test_cancel_keeps_its_meaning_and_stop_asks_a_running_task() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        for view in (ex, ex.options(time_limit=60)):
            called: list[int] = []

            def loop() -> None:
                token = current()
                token.on_cancel(lambda: called.append(1))  # noqa: B023
                while not token.sleep(0.005):
                    pass
                token.raise_if_cancelled()

            future = view.submit(loop)
            wait_until(future.running, what="running")
            assert future.cancel() is False  # as ThreadPoolExecutor's
            assert stop(future) is True
            with pytest.raises(TaskStopped):
                future.result(TIMEOUT)
            assert isinstance(future.exception(), CancelledError)
            assert not future.cancelled()
            assert called == [1]
            assert stop(future) is False  # ended


def test_stop_cancels_a_task_not_started_and_refuses_other_futures() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        later = ex.submit(lambda: 1, delay=10)
        assert stop(later) is True
        assert later.cancelled()
    with pytest.raises(TypeError, match="future"):
        stop(Future())
    with ThreadPoolExecutor(1) as pool, pytest.raises(TypeError):
        stop(pool.submit(lambda: 1))


def test_stop_ends_a_series_and_a_retry() -> None:
    clock = ManualClock()
    with PriorityExecutor(2, clock=clock, retry=Retry(5, backoff=0)) as ex:
        tokens: list[CancelToken] = []

        def run() -> None:
            token = current()
            tokens.append(token)
            token.sleep(TIMEOUT)
            token.raise_if_cancelled()

        series = ex.submit_recurring(run, interval=1)
        wait_until(lambda: tokens, what="the run")
        assert stop(series) is True
        assert series.cancelled()
        clock.settle(TIMEOUT)
        clock.advance(10)
        clock.settle(TIMEOUT)
        assert len(tokens) == 1  # no further run, nor a retry


def test_on_cancel_after_the_fact_runs_at_once_and_errors_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    token = CancelToken()
    assert token.cancel(TaskStopped("x")) is True
    assert token.cancel(TaskStopped("y")) is False  # once
    ran: list[int] = []
    token.on_cancel(lambda: ran.append(1))
    assert ran == [1]
    token.on_cancel(lambda: 1 / 0)  # logged, not raised
    assert "on_cancel" in caplog.text
    with pytest.raises(TaskStopped, match="x"):
        token.raise_if_cancelled()
    assert token.sleep(10) is True  # at once


# -- overruns -----------------------------------------------------------------------------


def test_a_pool_whose_every_worker_overruns_does_not_deadlock() -> None:
    clock = ManualClock()
    prefix = "pe-test-overrun"
    with PriorityExecutor(2, thread_name_prefix=prefix, clock=clock) as ex, released() as release:
        hung = [ex.options(time_limit=1).submit(hang, release) for _ in range(2)]
        wait_until(lambda: ex.stats().running == 2, what="both workers hung")
        waiting = ex.submit(lambda: "served")
        assert not waiting.done()
        clock.advance(1)
        # Both threads overrun; replacements took their places, and serve.
        assert waiting.result(TIMEOUT) == "served"
        assert ex.stats().overrunning == 2
        assert all(isinstance(f.exception(), TaskTimeoutError) for f in hung)
        more = [ex.submit(lambda i=i: i) for i in range(5)]  # type: ignore[misc]
        assert [f.result(TIMEOUT) for f in more] == list(range(5))
        names = [t.name for t in threading.enumerate() if t.name.startswith(prefix + "_")]
        assert len(names) == len(set(names))  # no name reused
        release.set()
        wait_until(lambda: ex.stats().overrunning == 0, what="the overruns returned")
        stats = ex.stats()
        assert (stats.failed, stats.running) == (2, 0)
    # The overrunning threads exited once their calls returned.
    wait_until(
        lambda: not [t for t in threading.enumerate() if t.name.startswith(prefix + "_")],
        what="every thread exited",
    )


@pytest.mark.xfail(
    reason="known defect: the timer thread starts each overrunning thread's replacement "
    "itself, one thread start after another, before it fires the limits due meanwhile "
    "(benchmark measure 36: 1,000 at once fail 0.5-1 s late)",
    strict=False,
)
def test_many_overrunning_limits_each_fail_within_milliseconds() -> None:
    tasks, limit = 200, 0.3
    deadlines, failed = [0.0] * tasks, [0.0] * tasks

    def hung(index: int, release: threading.Event) -> None:
        deadlines[index] = current().deadline or 0.0
        hang(release)

    with PriorityExecutor(tasks) as ex, released() as release:
        submit = ex.options(time_limit=limit).submit
        futures = [submit(hung, index, release) for index in range(tasks)]
        for index, future in enumerate(futures):
            future.add_done_callback(
                lambda _, index=index: failed.__setitem__(index, time.monotonic())  # type: ignore[misc]
            )
        wait(futures, timeout=TIMEOUT)
        assert all(isinstance(f.exception(), TaskTimeoutError) for f in futures)
    # Without replacements started on the way, the last one fails about 1 ms late here;
    # with them, 200 thread starts (tens of ms) come first.
    assert max(end - deadline for end, deadline in zip(failed, deadlines)) < 0.01


def test_overruns_beyond_the_cap_keep_their_worker() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex, released() as release:
        first = ex.options(time_limit=1).submit(hang, release)
        wait_until(lambda: ex.stats().running == 1, what="hung")
        clock.advance(1)  # replaced: the cap is max_workers (1)
        second = ex.options(time_limit=1).submit(hang, release)
        wait_until(lambda: ex.stats().running == 2, what="the replacement hung too")
        clock.advance(1)  # over the cap: it keeps its worker
        assert ex.stats().overrunning == 2
        third = ex.submit(lambda: 3)
        time.sleep(0.05)
        assert not third.done()  # no worker free until an overrun returns
        release.set()
        assert third.result(TIMEOUT) == 3
        assert isinstance(first.exception(), TaskTimeoutError)
        assert isinstance(second.exception(), TaskTimeoutError)


# -- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (0, ValueError),
        (-1, ValueError),
        (float("inf"), ValueError),
        (float("nan"), ValueError),
        (timedelta(0), ValueError),
        (True, TypeError),
        ("5", TypeError),
    ],
)
def test_bad_time_limits_raise_at_the_call_naming_the_argument(
    value: object, error: type[Exception]
) -> None:
    with pytest.raises(error, match="time_limit"):
        PriorityExecutor(1, time_limit=value)  # type: ignore[arg-type]
    with PriorityExecutor(1) as ex:
        with pytest.raises(error, match="time_limit"):
            ex.options(time_limit=value)  # type: ignore[arg-type]
        with pytest.raises(error, match="time_limit"):
            ex.lane("x", time_limit=value)  # type: ignore[arg-type]
        with pytest.raises(error, match="time_limit"):
            ex.lane().options(time_limit=value)  # type: ignore[arg-type]
        assert ex.submit(lambda: 1).result(TIMEOUT) == 1  # nothing changed
        assert "x" not in ex.lanes()


def test_a_limit_where_no_call_can_be_stopped_is_refused() -> None:
    with ThreadPoolExecutor(1) as pool:
        with pytest.raises(ValueError, match="time_limit"):
            PriorityExecutor(1, backend=pool, time_limit=1)
        with PriorityExecutor(1, backend=pool) as ex:
            with pytest.raises(ValueError, match="time_limit"):
                ex.options(time_limit=1).submit(lambda: 1)
            with pytest.raises(ValueError, match="time_limit"):
                ex.lane(time_limit=1)
            assert ex.stats().scheduled + ex.stats().ready == 0
            assert ex.submit(int).result(TIMEOUT) == 0


def test_timeout_keyword_still_reaches_the_callee() -> None:
    with PriorityExecutor(1, time_limit=5) as ex:
        assert ex.submit(lambda timeout: timeout, timeout=3).result(TIMEOUT) == 3
        assert ex.options(time_limit=1).submit(dict, timeout=3).result(TIMEOUT) == {"timeout": 3}


# -- the process backend --------------------------------------------------------------------


def test_the_process_backend_kills_the_call_and_goes_on() -> None:
    with PriorityExecutor(2, backend="process") as ex:
        first_pid = ex.submit(os.getpid).result(60)
        start = time.monotonic()
        slow = ex.options(time_limit=0.5).submit(time.sleep, 60)
        neighbour = ex.submit(time.sleep, 1.0)  # in flight in the other process meanwhile
        with pytest.raises(TaskTimeoutError):
            slow.result(60)
        assert time.monotonic() - start < 30
        assert neighbour.result(60) is None  # its process was not touched
        pids = {ex.submit(os.getpid).result(60) for _ in range(4)}
        assert pids  # the pool serves on
        assert first_pid > 0
        wait_until(lambda: ex.stats().running == 0, what="the killed call counted")
        assert ex.stats().failed == 1 and ex.stats().overrunning == 0


@pytest.mark.timeout(150)
def test_the_interpreter_exits_after_a_process_call_is_killed() -> None:
    # The killed call's pool breaks, and its manager thread calls back with the pool's
    # shutdown lock held (Python 3.12+): a shutdown() from that callback would hang it, and
    # interpreter exit, which joins it, for ever.
    child = run_script(
        """
        import time
        from priority_executor import PriorityExecutor, TaskTimeoutError
        ex = PriorityExecutor(1, backend="process")
        try:
            ex.options(time_limit=0.5).submit(time.sleep, 60).result(60)
        except TaskTimeoutError:
            say("killed")
        say(ex.submit(sum, [1, 2]).result(60))
        """,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.split() == ["killed", "3"]


def test_stop_kills_a_process_call() -> None:
    with PriorityExecutor(1, backend="process", time_limit=600) as ex:
        slow = ex.submit(time.sleep, 60)
        wait_until(slow.running, timeout=60, what="the call in its process")
        time.sleep(0.2)  # the call started there, beyond the hand-off
        assert stop(slow) is True
        with pytest.raises(TaskStopped):
            slow.result(60)
        assert ex.submit(sum, [1, 2]).result(60) == 3


def test_terminate_and_kill_workers_stop_every_process() -> None:
    for method in ("terminate_workers", "kill_workers"):
        ex = PriorityExecutor(2, backend="process")
        assert ex.submit(os.getpid).result(60) > 0
        running = [ex.submit(time.sleep, 60) for _ in range(2)]
        waiting = ex.submit(time.sleep, 60)
        wait_until(lambda: all(f.running() for f in running), timeout=60, what="in processes")  # noqa: B023
        time.sleep(0.2)  # the calls started there, beyond the hand-off
        getattr(ex, method)()
        for future in running:
            with pytest.raises(TaskStopped):
                future.result(60)
        assert waiting.cancelled()
        with pytest.raises(RuntimeError):
            ex.submit(int)
        ex.shutdown()
    with PriorityExecutor(1) as threads, pytest.raises(RuntimeError, match="process"):
        threads.kill_workers()


def test_a_retry_budget_bounds_every_attempt_start() -> None:
    clock = ManualClock()
    starts: list[float] = []

    def flaky() -> None:
        starts.append(clock.now())
        raise ConnectionError(len(starts))

    retry = Retry(10, backoff=1, factor=1, budget=2.5)
    assert retry == Retry(10, backoff=1, factor=1, budget=timedelta(seconds=2.5))
    assert "budget=2.5" in repr(retry)
    with PriorityExecutor(1, clock=clock, retry=retry) as ex:
        future = ex.submit(flaky)
        for _ in range(5):
            clock.settle(TIMEOUT)
            clock.advance(1)
        assert starts == [0.0, 1.0, 2.0]  # the next would start at 3: past the budget
        with pytest.raises(ConnectionError, match="3"):
            future.result(TIMEOUT)
        assert ex.stats().retries == 2 and ex.stats().failed == 1
    with pytest.raises(ValueError, match="budget"):
        Retry(budget=0)
    with pytest.raises(TypeError, match="budget"):
        Retry(budget="1")  # type: ignore[arg-type]


def test_shutdown_without_waiting_leaves_an_overrun_to_finish_alone() -> None:
    clock = ManualClock()
    release = threading.Event()
    ex = PriorityExecutor(1, clock=clock)
    future = ex.options(time_limit=1).submit(hang, release)
    wait_until(lambda: ex.stats().running == 1, what="hung")
    clock.advance(1)
    start = time.monotonic()
    ex.shutdown(wait=False)  # returns at once: it never waits for a call
    assert time.monotonic() - start < 1
    assert isinstance(future.exception(), TaskTimeoutError)
    assert ex.stats().overrunning == 1
    release.set()
    ex.shutdown(wait=True)  # the overrun's end was the last thing it waited for
    assert ex.stats().overrunning == 0 and ex.stats().failed == 1


# -- a lane's limit: nested lanes and configure() -----------------------------------------


def test_nested_lane_takes_the_nearest_enclosing_lanes_limit() -> None:
    clock = ManualClock()
    with PriorityExecutor(4, clock=clock, time_limit=10) as ex, released() as release:
        outer = ex.lane(time_limit=2)
        middle = ex.lane(parent=outer)  # no limit of its own: the outer lane's
        inner = ex.lane(parent=middle, time_limit=4)  # its own wins over the outer one
        by_middle = middle.submit(hang, release)
        by_inner = inner.submit(hang, release)
        wait_until(lambda: ex.stats().running == 2, what="both running")
        clock.advance(2)
        assert by_middle.done() and not by_inner.done()
        clock.advance(2)
        assert by_inner.done()
        limits = [f.exception().limit for f in (by_middle, by_inner)]  # type: ignore[union-attr]
        assert limits == [2, 4]


def test_configure_time_limit_holds_for_later_submits_only() -> None:
    clock = ManualClock()
    with PriorityExecutor(4, clock=clock) as ex, released() as release:
        lane = ex.lane("l", time_limit=5)
        before = lane.submit(hang, release)
        wait_until(lambda: ex.stats().running == 1, what="the first running")
        lane.configure(time_limit=timedelta(seconds=1))
        assert lane.time_limit == 1
        after = lane.submit(hang, release)
        wait_until(lambda: ex.stats().running == 2, what="both running")
        clock.advance(1)
        assert after.done() and not before.done()  # the running one keeps its limit
        clock.advance(4)
        assert before.done()
        lane.configure(time_limit=None)  # removed: no limit (the executor has none)
        assert lane.time_limit is None
        release.set()
        assert lane.submit(lambda: 7).result(TIMEOUT) == 7


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (-1, ValueError),
        (0, ValueError),
        (float("inf"), ValueError),
        (True, TypeError),
        ("1", TypeError),
    ],
)
def test_configure_refuses_a_bad_time_limit_and_changes_nothing(
    bad: object, error: type[Exception]
) -> None:
    with PriorityExecutor(1, clock=ManualClock()) as ex:
        lane = ex.lane("l", max_running=2, time_limit=3)
        with pytest.raises(error, match="time_limit"):
            lane.configure(max_running=1, time_limit=bad)  # type: ignore[arg-type]
        assert lane.time_limit == 3
        assert ex.lane("l", max_running=2, time_limit=3) is lane  # max_running unchanged too
