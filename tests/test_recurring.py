"""Recurring tasks: ``submit_recurring()`` (issue 4).

Run times are checked on a ``ManualClock``: the test advances the clock to each expected
start and waits, on the executor's own counts, for each run to have ended (and its
successor to be queued) before it moves time again. A run that takes "long" moves the
clock itself while it runs, or blocks while the test moves it.
"""

from __future__ import annotations

import datetime
import gc
import logging
import queue
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import FIRST_COMPLETED, CancelledError, as_completed, wait
from typing import Callable

import pytest
from helpers import TIMEOUT, Boom, counts, stats_fields, wait_until

from priority_executor import Priority, PriorityExecutor
from priority_executor.testing import ManualClock


def advance_to(clock: ManualClock, t: float) -> None:
    if t > clock.now():
        clock.advance(t - clock.now())


class Runs:
    """A recurring task: records the clock time at which each run starts; run ``k``
    "takes" ``durations[k]`` seconds by advancing the clock itself."""

    def __init__(self, clock: ManualClock, durations=()) -> None:
        self.clock = clock
        self.durations = list(durations)
        self.starts: queue.Queue[float] = queue.Queue()
        self.count = 0

    def __call__(self) -> None:
        k = self.count
        self.count += 1
        self.starts.put(self.clock.now())
        if k < len(self.durations) and self.durations[k]:
            self.clock.advance(self.durations[k])


def expect_runs_at(
    ex: PriorityExecutor, clock: ManualClock, runs: Runs, expected, *, base: int = 0
) -> None:
    """Drive the clock to each expected start; check nothing starts earlier.

    ``base``: how many runs of the series had completed before the first expected one.
    """
    for k, t in enumerate(expected):
        if t > clock.now():
            advance_to(clock, t - 0.5)
            # Promotion is synchronous: had the run been due, it would not be scheduled.
            assert stats_fields(ex) == counts(scheduled=1, completed=base + k), f"run {k} early"
            assert runs.starts.empty()
            advance_to(clock, t)
        assert runs.starts.get(timeout=TIMEOUT) == t, f"run {k}"
        wait_until(lambda k=k: ex.stats().completed >= base + k + 1)


# -- run times ---------------------------------------------------------------------------


def test_fixed_delay_run_times_including_an_overrun() -> None:
    clock = ManualClock()
    #                 run:  0   1   2   3   4   5
    runs = Runs(clock, [0, 3, 15, 0, 10, 0])
    with PriorityExecutor(2, clock=clock) as ex:
        series = ex.submit_recurring(runs, interval=10)
        # next due = end of the previous run + 10
        expect_runs_at(ex, clock, runs, [0, 10, 23, 48, 58, 78])
        assert not series.done()
        assert series.cancel()
    assert stats_fields(ex) == counts(completed=6, cancelled=1)


def test_fixed_rate_run_times_skip_overrun_slots_without_a_burst() -> None:
    clock = ManualClock()
    #                 run:  0   1   2   3   4   5
    runs = Runs(clock, [0, 3, 15, 0, 10, 0])
    with PriorityExecutor(4, clock=clock) as ex:
        series = ex.submit_recurring(runs, interval=10, fixed_rate=True)
        # Run 2 (t=20) ends at 35: slot 30 is skipped, the next run is at 40, not at 35.
        # Run 4 (t=50) ends at 60, exactly on a slot: run 5 starts at once, at 60.
        expect_runs_at(ex, clock, runs, [0, 10, 20, 40, 50, 60])
        assert not series.done()
        assert series.cancel()
    assert stats_fields(ex) == counts(completed=6, cancelled=1)


def run_blocking_on(
    clock: ManualClock, run_number: int
) -> tuple[Callable[[], None], queue.Queue[float], threading.Event]:
    """A task that reports its start times, blocking its ``run_number``-th run until released."""
    starts: queue.Queue[float] = queue.Queue()
    release = threading.Event()
    count = [0]

    def run() -> None:
        count[0] += 1
        starts.put(clock.now())
        if count[0] == run_number:
            assert release.wait(TIMEOUT)

    return run, starts, release


def test_fixed_rate_run_blocked_while_the_clock_passes_several_slots() -> None:
    clock = ManualClock()
    run, starts, release = run_blocking_on(clock, run_number=2)
    with PriorityExecutor(4, clock=clock) as ex:
        series = ex.submit_recurring(run, interval=10, fixed_rate=True)
        assert starts.get(timeout=TIMEOUT) == 0
        wait_until(lambda: ex.stats().completed >= 1)
        clock.advance(10)
        assert starts.get(timeout=TIMEOUT) == 10
        for _ in range(5):  # slots 20, 30, 40, 50 pass while run 1 is blocked
            clock.advance(9)
        assert clock.now() == 55
        assert stats_fields(ex) == counts(running=1, completed=1)
        assert starts.empty()
        release.set()
        wait_until(lambda: ex.stats().completed >= 2)
        # No burst of the missed slots: one run queued, at the next slot, 60.
        assert stats_fields(ex) == counts(scheduled=1, completed=2)
        assert starts.empty()
        clock.advance(4.5)
        assert starts.empty()
        clock.advance(0.5)
        assert starts.get(timeout=TIMEOUT) == 60
        wait_until(lambda: ex.stats().completed >= 3)
        clock.advance(10)
        assert starts.get(timeout=TIMEOUT) == 70
        wait_until(lambda: ex.stats().completed >= 4)
        assert starts.empty()
        assert series.cancel()


def test_fixed_delay_run_blocked_while_the_clock_moves() -> None:
    clock = ManualClock()
    run, starts, release = run_blocking_on(clock, run_number=1)
    with PriorityExecutor(4, clock=clock) as ex:
        series = ex.submit_recurring(run, interval=5)
        assert starts.get(timeout=TIMEOUT) == 0
        clock.advance(12)
        assert stats_fields(ex) == counts(running=1)
        release.set()
        wait_until(lambda: ex.stats().completed >= 1)
        assert starts.empty()
        clock.advance(4.5)
        assert starts.empty()
        clock.advance(0.5)
        assert starts.get(timeout=TIMEOUT) == 17
        assert series.cancel()


def test_interval_as_timedelta() -> None:
    clock = ManualClock()
    runs = Runs(clock)
    with PriorityExecutor(1, clock=clock) as ex:
        series = ex.submit_recurring(runs, interval=datetime.timedelta(minutes=1))
        expect_runs_at(ex, clock, runs, [0, 60, 120])
        assert series.cancel()


@pytest.mark.parametrize("fixed_rate", [False, True])
def test_first_run_after_delay(fixed_rate: bool) -> None:
    clock = ManualClock()
    runs = Runs(clock)
    with PriorityExecutor(2, clock=clock) as ex:
        series = ex.submit_recurring(runs, interval=10, delay=5, fixed_rate=fixed_rate)
        assert stats_fields(ex) == counts(scheduled=1)
        expect_runs_at(ex, clock, runs, [5, 15, 25])
        assert series.cancel()


@pytest.mark.parametrize("fixed_rate", [False, True])
def test_first_run_after_timedelta_delay(fixed_rate: bool) -> None:
    clock = ManualClock()
    runs = Runs(clock)
    with PriorityExecutor(2, clock=clock) as ex:
        series = ex.submit_recurring(
            runs, interval=2, delay=datetime.timedelta(seconds=3), fixed_rate=fixed_rate
        )
        expect_runs_at(ex, clock, runs, [3, 5, 7])
        assert series.cancel()


@pytest.mark.parametrize("fixed_rate", [False, True])
def test_first_run_now_by_default(fixed_rate: bool) -> None:
    clock = ManualClock(start=100)
    runs = Runs(clock)
    with PriorityExecutor(2, clock=clock) as ex:
        series = ex.submit_recurring(runs, interval=1, fixed_rate=fixed_rate)
        expect_runs_at(ex, clock, runs, [100, 101, 102])
        assert series.cancel()


def test_first_run_at_run_at() -> None:
    clock = ManualClock()
    runs = Runs(clock)
    with PriorityExecutor(2, clock=clock) as ex:
        series = ex.submit_recurring(
            runs, interval=10, run_at=datetime.datetime.now() + datetime.timedelta(seconds=7)
        )
        clock.advance(6.5)
        assert stats_fields(ex) == counts(scheduled=1)
        clock.advance(1)  # t = 7.5
        assert runs.starts.get(timeout=TIMEOUT) == 7.5
        wait_until(lambda: ex.stats().completed >= 1)
        expect_runs_at(ex, clock, runs, [17.5], base=1)  # fixed delay: 7.5 + 10
        assert series.cancel()


def test_first_run_at_aware_run_at() -> None:
    clock = ManualClock()
    runs = Runs(clock)
    run_at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=3)
    with PriorityExecutor(2, clock=clock) as ex:
        series = ex.submit_recurring(runs, interval=10, run_at=run_at)
        clock.advance(2.5)
        assert stats_fields(ex) == counts(scheduled=1)
        clock.advance(1)
        assert runs.starts.get(timeout=TIMEOUT) == 3.5
        assert series.cancel()


def test_run_at_in_the_past_runs_now_and_fixed_rate_keeps_its_grid() -> None:
    clock = ManualClock()
    runs = Runs(clock)
    past = datetime.datetime.now() - datetime.timedelta(seconds=25)
    with PriorityExecutor(2, clock=clock) as ex:
        series = ex.submit_recurring(runs, interval=10, run_at=past, fixed_rate=True)
        assert runs.starts.get(timeout=TIMEOUT) == 0
        wait_until(lambda: ex.stats().completed >= 1)
        # The grid is run_at + k * 10, i.e. about -25, -15, -5, 5, ...: the next slot is 5.
        clock.advance(4.5)
        assert stats_fields(ex) == counts(scheduled=1, completed=1)
        clock.advance(1)
        assert runs.starts.get(timeout=TIMEOUT) == 5.5
        assert series.cancel()


def test_series_future_stays_pending_while_the_series_lives() -> None:
    clock = ManualClock()
    runs = Runs(clock)
    with PriorityExecutor(2, clock=clock) as ex:
        series = ex.submit_recurring(runs, interval=1)
        expect_runs_at(ex, clock, runs, [0, 1, 2, 3])
        assert not series.done()
        assert not series.running()
        _done, not_done = wait([series], timeout=0.01)
        assert not_done == {series}
        assert series.cancel()


def test_args_and_kwargs_reach_the_callee_scheduling_keywords_do_not() -> None:
    clock = ManualClock()
    calls: queue.Queue = queue.Queue()

    def fn(*args, **kwargs) -> None:
        calls.put((args, kwargs))

    with PriorityExecutor(1, clock=clock) as ex:
        series = ex.submit_recurring(
            fn, 1, 2, interval=1, fixed_rate=True, priority=3, delay=0, key="v", fn="f"
        )
        assert calls.get(timeout=TIMEOUT) == ((1, 2), {"key": "v", "fn": "f"})
        wait_until(lambda: ex.stats().completed >= 1)
        clock.advance(1)
        assert calls.get(timeout=TIMEOUT) == ((1, 2), {"key": "v", "fn": "f"})
        assert series.cancel()


# -- cancel ------------------------------------------------------------------------------


def assert_reported_cancelled(series) -> None:
    assert series.cancelled()
    assert series.done()
    assert next(as_completed([series], timeout=1)) is series
    done, _ = wait([series], timeout=1, return_when=FIRST_COMPLETED)
    assert done == {series}
    with pytest.raises(CancelledError):
        series.result(timeout=0)


def test_cancel_before_the_first_run() -> None:
    clock = ManualClock()
    runs = Runs(clock)
    with PriorityExecutor(2, clock=clock) as ex:
        series = ex.submit_recurring(runs, interval=1, delay=5)
        clock.advance(2)
        assert series.cancel()
        assert_reported_cancelled(series)
        assert stats_fields(ex) == counts(cancelled=1)
        clock.advance(100)
    assert runs.starts.empty()
    assert stats_fields(ex) == counts(cancelled=1)


def test_cancel_before_the_first_run_while_it_is_due_behind_a_busy_worker() -> None:
    clock = ManualClock()
    runs = Runs(clock)
    release = threading.Event()
    started = threading.Event()

    def busy() -> None:
        started.set()
        assert release.wait(TIMEOUT)

    with PriorityExecutor(1, clock=clock) as ex:
        ex.submit(busy)
        assert started.wait(TIMEOUT)
        series = ex.submit_recurring(runs, interval=1)
        assert stats_fields(ex) == counts(ready=1, throttled=0, running=1)
        assert series.cancel()
        assert_reported_cancelled(series)
        release.set()
        clock.advance(10)
    assert runs.starts.empty()
    assert stats_fields(ex) == counts(completed=1, cancelled=1)


@pytest.mark.parametrize("fixed_rate", [False, True])
def test_cancel_between_runs(fixed_rate: bool) -> None:
    clock = ManualClock()
    runs = Runs(clock)
    with PriorityExecutor(2, clock=clock) as ex:
        series = ex.submit_recurring(runs, interval=1, fixed_rate=fixed_rate)
        expect_runs_at(ex, clock, runs, [0, 1, 2])
        assert series.cancel()
        assert_reported_cancelled(series)
        assert stats_fields(ex) == counts(completed=3, cancelled=1)
        clock.advance(10)
    assert runs.starts.empty()
    assert stats_fields(ex) == counts(completed=3, cancelled=1)


def test_cancel_during_a_run() -> None:
    clock = ManualClock()
    started = threading.Event()
    release = threading.Event()
    finished = threading.Event()
    count = [0]

    def run() -> None:
        count[0] += 1
        started.set()
        assert release.wait(TIMEOUT)
        finished.set()

    with PriorityExecutor(4, clock=clock) as ex:
        series = ex.submit_recurring(run, interval=1)
        assert started.wait(TIMEOUT)
        assert series.cancel()
        # Reported at once, while the run is still in progress.
        assert_reported_cancelled(series)
        assert not finished.is_set()
        assert stats_fields(ex)["running"] == 1
        release.set()
        assert finished.wait(TIMEOUT)
        wait_until(lambda: ex.stats().running == 0)
        clock.advance(10)
        assert stats_fields(ex) == counts(completed=1, cancelled=1)
    assert count == [1]
    assert stats_fields(ex) == counts(completed=1, cancelled=1)


def test_cancel_during_a_run_from_inside_the_run() -> None:
    clock = ManualClock()
    holder: dict = {}
    ready = threading.Event()
    count = [0]
    returned: list[bool] = []

    def run() -> None:
        count[0] += 1
        assert ready.wait(TIMEOUT)
        returned.append(holder["series"].cancel())

    with PriorityExecutor(2, clock=clock) as ex:
        holder["series"] = series = ex.submit_recurring(run, interval=1)
        ready.set()
        wait_until(lambda: ex.stats().completed >= 1)
        assert_reported_cancelled(series)
        clock.advance(10)
    assert returned == [True]
    assert count == [1]
    assert stats_fields(ex) == counts(completed=1, cancelled=1)


@pytest.mark.timeout(30)
def test_cancel_races_with_runs_in_real_time() -> None:
    """Cancel at arbitrary moments: cancel() returns True, at most the run in progress
    when it returned still starts its callee after it, and the counts add up."""
    for attempt in range(30):
        starts: list[float] = []

        def record(starts: list[float] = starts) -> None:
            starts.append(time.monotonic())

        with PriorityExecutor(3) as ex:
            series = ex.submit_recurring(
                record,
                interval=0.0005,
                fixed_rate=attempt % 2 == 0,
            )
            time.sleep(0.0003 * (attempt % 10))
            assert series.cancel()
            cancelled_at = time.monotonic()
            assert series.cancelled()
        assert len([t for t in starts if t > cancelled_at]) <= 1, f"attempt {attempt}"
        fields = stats_fields(ex)
        assert fields == counts(completed=len(starts), cancelled=1), f"attempt {attempt}"


# -- failure -----------------------------------------------------------------------------


def test_exception_ends_the_series_and_is_logged(caplog) -> None:
    clock = ManualClock()
    count = [0]

    def run() -> None:
        count[0] += 1
        if count[0] == 3:
            raise Boom("third run")

    caplog.set_level(logging.DEBUG, logger="priority_executor")
    with PriorityExecutor(2, clock=clock) as ex:
        series = ex.submit_recurring(run, interval=1)
        wait_until(lambda: ex.stats().completed >= 1)
        clock.advance(1)
        wait_until(lambda: ex.stats().completed >= 2)
        assert not series.done()
        clock.advance(1)
        exc = series.exception(timeout=TIMEOUT)
        assert isinstance(exc, Boom)
        assert str(exc) == "third run"
        with pytest.raises(Boom):
            series.result(timeout=0)
        assert not series.cancelled()
        assert not series.cancel()
        wait_until(lambda: ex.stats().failed == 1)
        clock.advance(10)
        assert stats_fields(ex) == counts(completed=2, failed=1)
    assert count == [3]
    logged = [
        r
        for r in caplog.records
        if r.name == "priority_executor"
        and r.levelno >= logging.ERROR
        and r.exc_info is not None
        and isinstance(r.exc_info[1], Boom)
    ]
    assert len(logged) == 1, caplog.text


def test_exception_in_the_first_run_ends_the_series() -> None:
    clock = ManualClock()

    def run() -> None:
        raise Boom("first")

    with PriorityExecutor(1, clock=clock) as ex:
        series = ex.submit_recurring(run, interval=1, fixed_rate=True)
        assert isinstance(series.exception(timeout=TIMEOUT), Boom)
        clock.advance(5)
    assert stats_fields(ex) == counts(failed=1)


def test_base_exception_in_a_run_ends_the_series() -> None:
    clock = ManualClock()

    def run() -> None:
        raise SystemExit(3)

    with PriorityExecutor(1, clock=clock) as ex:
        series = ex.submit_recurring(run, interval=1)
        assert isinstance(series.exception(timeout=TIMEOUT), SystemExit)
        clock.advance(5)
        assert ex.submit(lambda: "alive").result(timeout=TIMEOUT) == "alive"
    assert stats_fields(ex) == counts(failed=1, completed=1)


# -- no overlap --------------------------------------------------------------------------


@pytest.mark.timeout(30)
@pytest.mark.parametrize("fixed_rate", [False, True])
def test_runs_of_one_series_never_overlap(fixed_rate: bool) -> None:
    n_series = 3
    lock = threading.Lock()
    active = [0] * n_series
    peak = [0] * n_series
    total = [0] * n_series

    def run(i: int) -> None:
        with lock:
            active[i] += 1
            total[i] += 1
            peak[i] = max(peak[i], active[i])
        time.sleep(0.002)  # longer than the interval: every run overruns
        with lock:
            active[i] -= 1

    with PriorityExecutor(8) as ex:
        series = [
            ex.submit_recurring(run, i, interval=0.0005, fixed_rate=fixed_rate)
            for i in range(n_series)
        ]
        wait_until(lambda: min(total) >= 40)
        for s in series:
            assert s.cancel()
    assert peak == [1] * n_series
    assert active == [0] * n_series
    assert ex.stats().completed == sum(total)
    assert ex.stats().cancelled == n_series


# -- priority ----------------------------------------------------------------------------


def test_each_run_is_ordered_by_its_priority_among_due_tasks() -> None:
    clock = ManualClock()
    order: list[str] = []
    lock = threading.Lock()
    started = threading.Event()
    release = threading.Event()

    def record(name: str) -> None:
        with lock:
            order.append(name)

    def blocker() -> None:
        started.set()
        assert release.wait(TIMEOUT)

    with PriorityExecutor(1, clock=clock) as ex:
        for run_index in range(3):
            started.clear()
            release.clear()
            busy = ex.submit(blocker)
            assert started.wait(TIMEOUT)
            if run_index == 0:
                high = ex.submit_recurring(
                    record, "high series", interval=10, priority=Priority.HIGH
                )
                low = ex.submit_recurring(record, "low series", interval=10, priority=Priority.LOW)
            else:
                clock.advance(10)  # both series' next runs are now due, behind the blocker
            one_shots = [
                ex.submit(record, f"normal {run_index}"),
                ex.submit(record, f"low {run_index}", priority=Priority.LOW - 1),
                ex.submit(record, f"high {run_index}", priority=Priority.HIGH - 1),
            ]
            release.set()
            busy.result(timeout=TIMEOUT)
            for future in one_shots:
                future.result(timeout=TIMEOUT)
            expected_len = 5 * (run_index + 1)
            wait_until(lambda n=expected_len: len(order) == n)
            wait_until(lambda: ex.stats().scheduled == 2)
        assert high.cancel()
        assert low.cancel()
    assert order == [
        name
        for i in range(3)
        for name in ("high series", f"high {i}", f"normal {i}", "low series", f"low {i}")
    ]


# -- stats -------------------------------------------------------------------------------


def test_stats_count_each_run_once_and_a_cancelled_series_once() -> None:
    clock = ManualClock()
    runs = Runs(clock)
    with PriorityExecutor(2, clock=clock) as ex:
        series = ex.submit_recurring(runs, interval=1, delay=1)
        assert stats_fields(ex) == counts(scheduled=1)
        clock.advance(1)
        assert runs.starts.get(timeout=TIMEOUT) == 1
        wait_until(lambda: ex.stats().completed >= 1)
        assert stats_fields(ex) == counts(scheduled=1, completed=1)
        for k in range(2, 5):
            clock.advance(1)
            assert runs.starts.get(timeout=TIMEOUT) == k
            wait_until(lambda k=k: ex.stats().completed >= k)
            assert stats_fields(ex) == counts(scheduled=1, completed=k)
        assert series.cancel()
        assert stats_fields(ex) == counts(completed=4, cancelled=1)
        assert series.cancel()  # a second cancel changes nothing
        assert stats_fields(ex) == counts(completed=4, cancelled=1)
    assert stats_fields(ex) == counts(completed=4, cancelled=1)


def test_stats_with_one_shot_tasks_and_a_failed_series() -> None:
    clock = ManualClock()
    count = [0]

    def run() -> None:
        count[0] += 1
        if count[0] == 2:
            raise Boom

    with PriorityExecutor(2, clock=clock) as ex:
        one_shot = ex.submit(lambda: 1)
        series = ex.submit_recurring(run, interval=1)
        wait_until(lambda: ex.stats().completed >= 2)
        clock.advance(1)
        assert isinstance(series.exception(timeout=TIMEOUT), Boom)
        assert one_shot.result(timeout=TIMEOUT) == 1
        wait_until(lambda: ex.stats().failed == 1)
    assert stats_fields(ex) == counts(completed=2, failed=1)


# -- shutdown and exit -------------------------------------------------------------------


def test_shutdown_cancels_a_live_series() -> None:
    clock = ManualClock()
    runs = Runs(clock)
    ex = PriorityExecutor(2, clock=clock)
    try:
        series = ex.submit_recurring(runs, interval=1)
        one_shot = ex.submit(lambda: "delayed one-shot", delay=5)
        wait_until(lambda: ex.stats().completed >= 1)
        ex.shutdown(wait=False)
        assert_reported_cancelled(series)
        clock.advance(5)
        assert one_shot.result(timeout=TIMEOUT) == "delayed one-shot"
    finally:
        ex.shutdown(wait=True)
    assert runs.count == 1
    assert stats_fields(ex) == counts(completed=2, cancelled=1)
    with pytest.raises(RuntimeError):
        ex.submit_recurring(runs, interval=1)


def test_shutdown_during_a_run_lets_it_finish_and_starts_no_other() -> None:
    clock = ManualClock()
    started = threading.Event()
    release = threading.Event()
    count = [0]

    def run() -> None:
        count[0] += 1
        started.set()
        assert release.wait(TIMEOUT)

    ex = PriorityExecutor(2, clock=clock)
    try:
        series = ex.submit_recurring(run, interval=1, fixed_rate=True)
        assert started.wait(TIMEOUT)
        ex.shutdown(wait=False)
        assert_reported_cancelled(series)
        release.set()
    finally:
        release.set()
        ex.shutdown(wait=True)
    clock.advance(10)
    assert count == [1]
    assert stats_fields(ex) == counts(completed=1, cancelled=1)


@pytest.mark.timeout(30)
def test_shutdown_wait_with_a_real_time_series_returns_promptly() -> None:
    ex = PriorityExecutor(2)
    count = [0]

    def run() -> None:
        count[0] += 1

    series = ex.submit_recurring(run, interval=0.01)
    wait_until(lambda: count[0] >= 3)
    start = time.monotonic()
    ex.shutdown(wait=True)
    assert time.monotonic() - start < 2
    assert series.cancelled()
    n = count[0]
    time.sleep(0.05)
    assert count[0] == n


def test_garbage_collected_executor_cancels_its_series() -> None:
    clock = ManualClock()
    runs = Runs(clock)
    ex = PriorityExecutor(1, clock=clock)
    series = ex.submit_recurring(runs, interval=1)
    assert runs.starts.get(timeout=TIMEOUT) == 0
    del ex
    gc.collect()
    wait_until(series.done)
    assert series.cancelled()


EXIT_SCRIPT = textwrap.dedent(
    """
    import atexit, time
    from priority_executor import PriorityExecutor

    runs = []
    ex = PriorityExecutor(2)
    series = ex.submit_recurring(lambda: runs.append(1), interval=0.05)
    busy = ex.submit_recurring(time.sleep, 0.2, interval=0.05, fixed_rate=True)
    atexit.register(lambda: print("cancelled", series.cancelled(), busy.cancelled(), flush=True))
    time.sleep(0.3)
    print("runs", len(runs) >= 2, flush=True)
    """
)


@pytest.mark.timeout(40)
def test_interpreter_exits_promptly_with_a_live_series() -> None:
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", EXIT_SCRIPT], capture_output=True, text=True, timeout=30
    )
    elapsed = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr
    assert elapsed < 5, f"took {elapsed:.1f} s to exit"
    assert proc.stdout.split("\n")[:2] == ["runs True", "cancelled True True"]
    assert "Traceback" not in proc.stderr


# -- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "interval",
    [0, 0.0, -1, -0.5, float("nan"), float("inf"), -float("inf"), datetime.timedelta(0)],
    ids=repr,
)
def test_bad_interval_value_is_value_error(interval) -> None:
    assert_rejected(ValueError, "interval", dict(interval=interval))


@pytest.mark.parametrize(
    "interval", ["1", None, b"1", [1], True, datetime.datetime.now()], ids=repr
)
def test_bad_interval_type_is_type_error(interval) -> None:
    assert_rejected(TypeError, "interval", dict(interval=interval))


def test_missing_interval_is_type_error() -> None:
    assert_rejected(TypeError, "interval", {})


@pytest.mark.parametrize("fixed_rate", ["yes", "false", None], ids=repr)
def test_fixed_rate_of_wrong_type_is_type_error(fixed_rate) -> None:
    assert_rejected(TypeError, "fixed_rate", dict(interval=1, fixed_rate=fixed_rate))


@pytest.mark.parametrize("priority", [1.5, "high", True, False], ids=repr)
def test_bad_priority_is_type_error(priority) -> None:
    assert_rejected(TypeError, "priority", dict(interval=1, priority=priority))


def test_non_callable_fn_is_type_error() -> None:
    assert_rejected(TypeError, "fn", dict(interval=1), fn=42)


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        (dict(delay=-1), ValueError, "delay"),
        (dict(delay=float("nan")), ValueError, "delay"),
        (dict(delay="1"), TypeError, "delay"),
        (dict(run_at=5), TypeError, "run_at"),
        (dict(delay=1, run_at=datetime.datetime.now()), ValueError, "run_at"),
    ],
)
def test_bad_first_run_time(kwargs, exc, name) -> None:
    assert_rejected(exc, name, dict(interval=1, **kwargs))


def test_recurring_has_no_expires() -> None:
    """``expires`` is reserved as in ``submit()``; a series has none: a TypeError naming it."""
    clock = ManualClock()
    got: queue.Queue = queue.Queue()
    with PriorityExecutor(1, clock=clock) as ex:
        with pytest.raises(TypeError, match="'expires'"):
            ex.submit_recurring(lambda **kw: got.put(kw), interval=1, expires=5)
        assert set(stats_fields(ex).values()) == {0}
    assert got.empty()


def assert_rejected(exc: type, name: str, kwargs: dict, fn=None) -> None:
    clock = ManualClock()
    runs = Runs(clock)
    with PriorityExecutor(1, clock=clock) as ex:
        with pytest.raises(exc, match=name):
            ex.submit_recurring(runs if fn is None else fn, **kwargs)
        assert stats_fields(ex) == counts()
        clock.advance(100)
        assert runs.starts.empty()
        assert ex.submit(lambda: "still works").result(timeout=TIMEOUT) == "still works"
    assert stats_fields(ex) == counts(completed=1)
