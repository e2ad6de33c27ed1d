"""Promises of the contract (DESIGN.md) that the scheduler once broke.

Each test is named after the promise it keeps and observes only what a user can: futures,
results, exceptions, log records, ``stats()``, weak references and threads. A scenario that
would hang or kill the interpreter if the promise were broken runs in a fresh interpreter,
with a timeout.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import subprocess
import threading
import time
import tracemalloc
import weakref
from collections.abc import Iterator
from concurrent.futures import BrokenExecutor, Executor, Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from pathlib import Path
from typing import Any, Callable

import pytest
import remote
from helpers import (
    BOUNDED_CALL,
    TIMEOUT,
    Boom,
    blocked_worker,
    call_bounded,
    executor_threads,
    run_script,
    shutdown_bounded,
    stats_fields,
    unique_prefix,
    wait_until,
)

from priority_executor import PriorityExecutor, TaskInfo
from priority_executor.testing import ManualClock

# A scenario script takes well under a second; this long means it hangs.
HANG_TIMEOUT = 10.0
# Threads that the tests start themselves (never made to fail, see threads_cannot_start).
OWN_THREADS = "pe-promises-"


def abandon(ex: PriorityExecutor) -> None:
    """Clean up after a test that failed half-way: cancel whatever still waits, so that
    neither the test nor the interpreter's exit waits for work that cannot run."""
    ex.shutdown(wait=False, cancel_futures=True)


def run_bounded(source: str, timeout: float = HANG_TIMEOUT) -> subprocess.CompletedProcess[str]:
    """``run_script``, failing the test with what the script wrote if it hangs."""
    try:
        return run_script(source, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out, err = (
            text.decode(errors="replace") if isinstance(text, bytes) else text
            for text in (exc.stdout, exc.stderr)
        )
        pytest.fail(f"the script hung for {timeout} s; stdout: {out!r}; stderr: {err!r}")


def assert_clean_exit(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr


@contextlib.contextmanager
def thread_exceptions() -> Iterator[list[BaseException]]:
    """Collect every exception that escapes a thread while the block runs."""
    escaped: list[BaseException] = []
    previous = threading.excepthook

    def hook(args: Any) -> None:
        escaped.append(args.exc_value)

    threading.excepthook = hook
    try:
        yield escaped
    finally:
        threading.excepthook = previous


# -- any time that submit() accepts just waits ------------------------------------------------

FAR_TIME_SCRIPT = """
import os, threading
from concurrent.futures import wait
from datetime import datetime, timedelta, timezone
from priority_executor import PriorityExecutor

def settle(future, what):
    if not wait([future], timeout=5).done:
        say(what, "never settled")
        os._exit(1)  # the executor could not shut down either: do not wait for the timeout

ex = PriorityExecutor(1)
far = ex.submit(int, {far})
soon = ex.submit(str, "soon", delay=0.05)
settle(soon, "soon")
say("ran", soon.result())
gate = threading.Event()
blocker = ex.submit(gate.wait, 30)  # longer than settle(): only the deadline expires it
expiring = ex.submit(int, expires=0.05)
settle(expiring, "expiring")
say("expired", expiring.cancelled())
gate.set()
later = ex.submit(str, "later", delay=0.05)
settle(later, "later")
say("ran", later.result())
far.cancel()
ex.shutdown(wait=True)
say("shut down")
"""

FAR_TIMES = [
    "delay=1e10",  # beyond threading.TIMEOUT_MAX
    "delay=timedelta.max",
    # Aware: a naive datetime.max has no timestamp east of Greenwich.
    "run_at=datetime.max.replace(tzinfo=timezone.utc)",
    "expires=timedelta.max",
    "expires=1e300",
    "expires=datetime.max.replace(tzinfo=timezone.utc)",
]


@pytest.mark.parametrize("far", FAR_TIMES)
def test_a_far_future_time_just_waits(far: str) -> None:
    """Any time that submit() accepts just waits: later delays and deadlines still apply."""
    proc = run_bounded(FAR_TIME_SCRIPT.format(far=far))
    assert_clean_exit(proc)
    assert proc.stdout == "ran soon\nexpired True\nran later\nshut down\n"


@pytest.mark.parametrize(
    ("method", "name"),
    [
        ("submit", "delay"),
        ("submit", "expires"),
        ("submit_recurring", "delay"),
        ("submit_recurring", "interval"),
    ],
)
def test_a_time_too_large_for_a_float_is_a_value_error_naming_it(method: str, name: str) -> None:
    """Seconds too large for a float are a ValueError naming the argument; nothing changes."""
    clock = ManualClock()
    ex = PriorityExecutor(1, clock=clock)
    try:
        before = stats_fields(ex)
        kwargs: dict[str, Any] = {name: 10**400}
        if method == "submit_recurring":
            kwargs.setdefault("interval", 1)
        with pytest.raises(ValueError, match=name):
            getattr(ex, method)(int, **kwargs)
        assert stats_fields(ex) == before
        assert ex.submit(pow, 2, 5).result(timeout=TIMEOUT) == 32
        late = ex.submit(pow, 2, 6, delay=1)
        clock.advance(1)
        assert late.result(timeout=TIMEOUT) == 64
    finally:
        abandon(ex)
        shutdown_bounded(ex)


# -- shutdown from inside tasks ---------------------------------------------------------------


def test_two_tasks_calling_shutdown_at_the_same_moment_both_return() -> None:
    """shutdown(wait=True) from a task returns, even while another task calls it too."""
    prefix = unique_prefix("twin-shutdown")
    ex = PriorityExecutor(2, thread_name_prefix=prefix)
    both_running = threading.Barrier(2)

    def stopper() -> str:
        both_running.wait(TIMEOUT)
        ex.shutdown(wait=True)
        return "returned"

    futures = [ex.submit(stopper) for _ in range(2)]
    try:
        assert [f.result(timeout=TIMEOUT) for f in futures] == ["returned", "returned"]
    finally:
        both_running.abort()
        shutdown_bounded(ex)
    wait_until(lambda: not executor_threads(prefix), what="the threads to exit")


# -- a thread that cannot start ---------------------------------------------------------------


@contextlib.contextmanager
def threads_cannot_start() -> Iterator[None]:
    """Make Thread.start() fail, as at a resource limit, for every thread but the test's
    own: whatever thread the executor needs, whatever its name."""
    real_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        if self.name.startswith(OWN_THREADS) or self.name == BOUNDED_CALL:
            real_start(self)
            return
        raise RuntimeError("can't start new thread")

    threading.Thread.start = start  # type: ignore[method-assign]
    try:
        yield
    finally:
        threading.Thread.start = real_start  # type: ignore[method-assign]


@pytest.mark.parametrize("delay", [None, 0.05], ids=["due-now", "delayed"])
def test_a_submit_whose_thread_cannot_start_leaves_nothing_behind(delay: float | None) -> None:
    """A submit whose thread cannot start raises and leaves nothing queued or counted."""
    ex = PriorityExecutor(2, thread_name_prefix=unique_prefix("no-thread"))
    before = stats_fields(ex)
    try:
        with threads_cannot_start():
            with pytest.raises(RuntimeError):
                ex.submit(int, delay=delay)
            assert stats_fields(ex) == before
            shutdown_bounded(ex)
    finally:
        abandon(ex)


def test_an_executor_whose_threads_could_not_start_works_once_they_can() -> None:
    """Submits refused for want of a thread never run; the executor works once threads start."""
    ran: list[str] = []
    ex = PriorityExecutor(2, thread_name_prefix=unique_prefix("thread-again"))
    try:
        with threads_cannot_start():
            with pytest.raises(RuntimeError):
                ex.submit(ran.append, "refused now")
            with pytest.raises(RuntimeError):
                ex.submit(ran.append, "refused later", delay=0.05)
        assert ex.submit(ran.append, "now").result(timeout=TIMEOUT) is None
        assert ex.submit(ran.append, "later", delay=0.05).result(timeout=TIMEOUT) is None
        shutdown_bounded(ex)
    finally:
        abandon(ex)
    assert ran == ["now", "later"]
    assert stats_fields(ex) == dict(
        scheduled=0,
        ready=0,
        throttled=0,
        running=0,
        completed=2,
        failed=0,
        cancelled=0,
        expired=0,
        skipped=0,
        blocked=0,
    )


def test_a_second_worker_that_cannot_start_loses_no_task() -> None:
    """A submit whose extra worker cannot start raises (never runs) or returns (and runs)."""
    ran: list[str] = []
    ex = PriorityExecutor(2, thread_name_prefix=unique_prefix("second-worker"))
    future: Future[None] | None = None
    try:
        with blocked_worker(ex) as (release, blocker), threads_cannot_start():
            try:
                future = ex.submit(ran.append, "task")
            except RuntimeError:
                future = None
            release.set()
            assert blocker.result(timeout=TIMEOUT) is None
            if future is not None:  # the worker there is must run it
                assert future.result(timeout=TIMEOUT) is None
        shutdown_bounded(ex)
    finally:
        abandon(ex)
    assert ran == ([] if future is None else ["task"])


# -- garbage collection while the scheduler is busy -------------------------------------------

GC_DURING_PROMOTION_SCRIPT = """
import gc
gc.disable()  # the collection must happen exactly where sort_key() asks for it
from priority_executor import PriorityExecutor
from priority_executor.testing import ManualClock

class CollectingPolicy:
    def sort_key(self, task):
        gc.collect()
        return (task.due,)

clock = ManualClock()
ex = PriorityExecutor(1, policy=CollectingPolicy(), clock=clock)
ex.me = ex  # a reference cycle: only the collector frees it
future = ex.submit(str, "ran", delay=1)
del ex
clock.advance(1)  # collects the executor: as after shutdown(wait=False), the task still runs
say("advanced")
say(future.result(timeout=5))
"""


def test_an_executor_collected_while_it_promotes_a_task_does_not_deadlock() -> None:
    """An executor collected while it promotes a task neither deadlocks nor drops the task."""
    proc = run_bounded(GC_DURING_PROMOTION_SCRIPT)
    assert_clean_exit(proc)
    assert proc.stdout == "advanced\nran\n"


# -- a callback raising a BaseException -------------------------------------------------------


def critical_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == "concurrent.futures" and r.levelno == logging.CRITICAL
    ]


def exiting(future: Future[Any]) -> None:
    """A done-callback that raises SystemExit."""
    raise SystemExit(3)


def test_a_callback_raising_system_exit_in_a_worker_is_logged_and_work_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A callback raising SystemExit in a worker is logged at CRITICAL, and work goes on."""
    caplog.set_level(logging.CRITICAL, logger="concurrent.futures")
    clock = ManualClock()
    ex = PriorityExecutor(1, thread_name_prefix=unique_prefix("exit-callback"), clock=clock)
    gate = threading.Event()

    try:
        first = ex.submit(gate.wait, TIMEOUT)
        first.add_done_callback(exiting)  # runs in the worker: first is still blocked
        gate.set()
        assert first.result(timeout=TIMEOUT) is True
        assert ex.submit(pow, 2, 5).result(timeout=TIMEOUT) == 32
        delayed = ex.submit(pow, 2, 6, delay=1)
        clock.advance(1)
        assert delayed.result(timeout=TIMEOUT) == 64
        wait_until(lambda: critical_records(caplog), what="the SystemExit to be logged")
    finally:
        gate.set()
        abandon(ex)
        shutdown_bounded(ex)


def test_a_lanes_shutdown_returns_after_a_callback_of_its_task_raised_system_exit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The worker is done with a lane's run even when a callback of its future raised
    SystemExit: the lane's shutdown(wait=True) returns, and the lane's room is back."""
    caplog.set_level(logging.CRITICAL, logger="concurrent.futures")
    ex = PriorityExecutor(1, thread_name_prefix=unique_prefix("exit-lane-callback"))
    lane = ex.lane(max_running=1)
    gate = threading.Event()

    try:
        first = lane.submit(gate.wait, TIMEOUT)
        first.add_done_callback(exiting)  # runs in the worker: first is still blocked
        second = lane.submit(pow, 2, 5)
        gate.set()
        call_bounded(lane.shutdown, "the lane's shutdown")
        assert (first.result(timeout=0), second.result(timeout=0)) == (True, 32)
        wait_until(lambda: critical_records(caplog), what="the SystemExit to be logged")
        assert ex.submit(pow, 2, 6).result(timeout=TIMEOUT) == 64
    finally:
        gate.set()
        shutdown_bounded(ex)


def test_a_callback_raising_system_exit_on_expiry_is_logged_and_timers_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A callback raising SystemExit on expiry is logged at CRITICAL, and timers go on."""
    caplog.set_level(logging.CRITICAL, logger="concurrent.futures")
    ex = PriorityExecutor(1, thread_name_prefix=unique_prefix("exit-on-expiry"))
    main = threading.current_thread()
    in_main: list[bool] = []

    def exiting(future: Future[Any]) -> None:
        in_main.append(threading.current_thread() is main)
        if not in_main[-1]:  # never kill the test itself
            raise SystemExit(3)

    try:
        with blocked_worker(ex) as (release, _):
            expiring = ex.submit(int, expires=0.2)
            expiring.add_done_callback(exiting)
            # Reported to wait() although its callback raised.
            assert futures_wait([expiring], timeout=TIMEOUT).done == {expiring}
            assert expiring.cancelled()
            assert in_main == [False], "it expired before the callback was added"
            later = ex.submit(str, "later", delay=0.05)
            release.set()
            assert later.result(timeout=TIMEOUT) == "later"
        assert ex.submit(pow, 2, 5).result(timeout=TIMEOUT) == 32
        wait_until(lambda: critical_records(caplog), what="the SystemExit to be logged")
    finally:
        abandon(ex)
        shutdown_bounded(ex)


# -- a callback that moves the clock ----------------------------------------------------------


def test_advance_from_a_callback_run_by_advance_returns_and_moves_time() -> None:
    """advance() from a callback run by advance() returns, and time moves by both."""
    clock = ManualClock()
    ex = PriorityExecutor(1, clock=clock)
    nested: list[str] = []

    def advance_again(future: Future[Any]) -> None:
        clock.advance(1)
        nested.append("returned")

    try:
        with blocked_worker(ex):
            expiring = ex.submit(int, expires=1)
            expiring.add_done_callback(advance_again)
            later = ex.submit(str, "later", delay=2)
            call_bounded(lambda: clock.advance(1), "advance() with an advance() in a callback")
            assert expiring.cancelled()
            wait_until(lambda: nested, what="the nested advance() to return")
            assert nested == ["returned"]
            assert clock.now() == 2
            assert ex.stats().scheduled == 0  # the nested advance made `later` due
        assert later.result(timeout=TIMEOUT) == "later"
    finally:
        abandon(ex)
        shutdown_bounded(ex)


# -- a backend that breaks --------------------------------------------------------------------


class RefusingBackend(ThreadPoolExecutor):
    """A backend whose first submit() raises ``error``; it works after that."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(1)
        self.error: BaseException | None = error

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        error, self.error = self.error, None
        if error is not None:
            raise error
        return super().submit(fn, *args, **kwargs)


class FailingBackend(Executor):
    """A backend whose calls all fail with ``error``."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_exception(self.error)
        return future


def test_cancel_from_a_callback_while_the_backend_breaks_settles_every_future() -> None:
    """A cancel() from a callback while a hand-off breaks the backend leaves nothing pending."""
    clock = ManualClock()
    backend = RefusingBackend(BrokenExecutor("the backend broke"))
    ex = PriorityExecutor(1, backend=backend, clock=clock)
    answers: list[bool] = []
    try:
        handed = ex.submit(int, delay=1)
        waiting = ex.submit(int, delay=2)
        # Runs when the breakage fails `waiting`: while `handed` is being handed off.
        waiting.add_done_callback(lambda f: answers.append(handed.cancel()))
        with thread_exceptions() as escaped:
            clock.advance(1)
            _, not_done = futures_wait([handed, waiting], timeout=TIMEOUT)
            assert not not_done, "a future was never settled"
            assert isinstance(waiting.exception(), BrokenExecutor)
            assert len(answers) == 1
            if answers[0]:
                assert handed.cancelled()
            else:
                assert handed.cancelled() or isinstance(handed.exception(), BrokenExecutor)
            with pytest.raises(BrokenExecutor):
                ex.submit(int)
            shutdown_bounded(ex)
        assert escaped == []
    finally:
        abandon(ex)
        backend.shutdown()


class OddBroken(BrokenExecutor):
    """A breakage whose ``__init__`` does not take its own ``args``: copy.copy() fails."""

    def __init__(self, a: str, b: str) -> None:
        super().__init__(f"{a}{b}")


@pytest.mark.parametrize("how", ["refused", "failed"])
def test_a_backend_breaking_with_an_odd_exception_fails_every_waiting_future(how: str) -> None:
    """Any BrokenExecutor fails every waiting future with a BrokenExecutor; nothing hangs."""
    clock = ManualClock()
    error = OddBroken("broken", "!")
    backend = RefusingBackend(error) if how == "refused" else FailingBackend(error)
    ex = PriorityExecutor(1, backend=backend, clock=clock)
    try:
        with thread_exceptions() as escaped:
            handed = ex.submit(int, delay=1)
            ready = ex.submit(int, delay=1)  # due, behind `handed` for the one slot
            pending = ex.submit(int, delay=2)
            clock.advance(1)
            futures = [handed, ready, pending]
            _, not_done = futures_wait(futures, timeout=TIMEOUT)
            assert not not_done, "a future was never settled"
            for future in futures:
                assert isinstance(future.exception(), BrokenExecutor), future.exception()
            with pytest.raises(BrokenExecutor):
                ex.submit(int)
            with pytest.raises(BrokenExecutor):
                ex.submit(int, delay=1)
            shutdown_bounded(ex)
        assert escaped == []
    finally:
        abandon(ex)
        backend.shutdown()


# -- backends: shutdown from a callback, keywords of a series ---------------------------------


def test_shutdown_from_a_callback_lets_the_tasks_of_a_process_backend_complete(
    tmp_path: Path,
) -> None:
    """shutdown() from a done-callback lets the tasks of a process backend complete."""
    opened = tmp_path / "open"
    ex = PriorityExecutor(1, backend="process")
    try:
        first = ex.submit(remote.wait_for, str(opened))
        rest = [ex.submit(remote.square, i) for i in range(4)]
        first.add_done_callback(lambda f: ex.shutdown())  # first is blocked: runs in the slot
        opened.touch()
        assert first.result(timeout=TIMEOUT) != os.getpid()
        assert [f.result(timeout=TIMEOUT) for f in rest] == [0, 1, 4, 9]
        with pytest.raises(RuntimeError):
            ex.submit(remote.square, 5)
    finally:
        opened.touch()
        abandon(ex)
        shutdown_bounded(ex)


@pytest.mark.parametrize("name", ["scheduler", "fn", "self"])
def test_a_recurring_callee_on_a_backend_gets_any_keyword(name: str) -> None:
    """Every keyword but the scheduling ones reaches a recurring callee on a backend."""
    clock = ManualClock()
    backend = ThreadPoolExecutor(2)
    ex = PriorityExecutor(1, backend=backend, clock=clock)
    calls: list[dict[str, Any]] = []

    def record(**kwargs: Any) -> None:
        calls.append(kwargs)

    def next_run_waits_or_series_ended(runs: int) -> Callable[[], bool]:
        return lambda: series.done() or (len(calls) == runs and ex.stats().scheduled == 1)

    try:
        series = ex.submit_recurring(record, interval=1, **{name: "value"})
        wait_until(next_run_waits_or_series_ended(1), what="the first run")
        clock.advance(1)
        wait_until(next_run_waits_or_series_ended(2), what="the second run")
        assert not series.done(), series.exception()
        assert calls == [{name: "value"}] * 2
    finally:
        abandon(ex)
        shutdown_bounded(ex)
        backend.shutdown()


# -- shutdown(wait=True) in a callback of another future --------------------------------------


def test_shutdown_wait_in_a_callback_of_an_unrelated_future_waits() -> None:
    """shutdown(wait=True) in a callback of another future waits, as ThreadPoolExecutor's."""
    ex = PriorityExecutor(1)
    release = threading.Event()

    def work() -> str:
        release.wait(TIMEOUT)
        time.sleep(0.1)  # still running when a shutdown that does not wait has returned
        return "done"

    task = ex.submit(work)
    done_at_return: list[bool] = []

    def stop(future: Future[Any]) -> None:
        release.set()
        ex.shutdown(wait=True)
        done_at_return.append(task.done())

    plain: Future[None] = Future()
    plain.add_done_callback(stop)
    try:
        call_bounded(lambda: plain.set_result(None), "shutdown(wait=True) in a callback")
        assert done_at_return == [True]
        assert task.result(timeout=0) == "done"
    finally:
        release.set()
        shutdown_bounded(ex)


# -- what finished and cancelled work keeps alive ---------------------------------------------


def test_tasks_that_ran_before_their_deadline_leave_no_memory_behind() -> None:
    """Tasks that ran before their far deadlines leave no memory behind."""
    n, batch = 20_000, 500
    clock = ManualClock()
    ex = PriorityExecutor(1, clock=clock)
    tracemalloc.start()
    try:
        assert ex.submit(int).result(timeout=TIMEOUT) == 0  # its worker exists from now on
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(n // batch):
            # In batches: an executor may free dead entries lazily, in proportion to the
            # live ones, and far fewer than n wait at any time.
            futures = [ex.submit(int, expires=3600) for _ in range(batch)]
            futures_wait(futures, timeout=TIMEOUT)
        del futures
        wait_until(lambda: ex.stats().completed == n + 1, what="every task to run")
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        shutdown_bounded(ex)
    # Each deadline still held costs over 100 bytes: n of them are over 2 MB.
    assert kept < 500_000, f"{kept} bytes kept after {n} tasks ran"


class Payload:
    """An argument that a weak reference can watch."""


class CallableTask:
    def __call__(self, *args: Any, **kwargs: Any) -> None:
        pass


def start_watched_series(
    ex: PriorityExecutor, fn_kind: str, delay: float
) -> tuple[Future[None], dict[str, weakref.ref[Any]]]:
    """Start a series; return its future, and weak references to its fn, an argument and a
    keyword argument, of which the caller holds nothing else."""
    fn: Callable[..., None]
    if fn_kind == "function":

        def fn(*args: Any, **kwargs: Any) -> None:
            pass

    else:
        fn = CallableTask()
    arg, kwarg = Payload(), Payload()
    future = ex.submit_recurring(fn, arg, interval=1, delay=delay, key=kwarg)
    return future, {"fn": weakref.ref(fn), "arg": weakref.ref(arg), "kwarg": weakref.ref(kwarg)}


@pytest.mark.parametrize("fn_kind", ["function", "callable-object"])
@pytest.mark.parametrize("when", ["before-the-first-run", "between-runs"])
def test_a_cancelled_series_lets_go_of_its_call(fn_kind: str, when: str) -> None:
    """A cancelled series lets go of its fn and arguments without the cyclic GC."""
    clock = ManualClock()
    ex = PriorityExecutor(1, clock=clock)
    gc.disable()  # only reference counting may free them
    try:
        series, refs = start_watched_series(ex, fn_kind, 1 if when == "before-the-first-run" else 0)
        if when == "between-runs":
            wait_until(
                lambda: ex.stats().completed == 1 and ex.stats().scheduled == 1,
                what="the first run to end",
            )
        assert series.cancel()
        wait_until(lambda: ex.stats().cancelled == 1, what="the series to be cancelled")
        wait_until(
            lambda: all(ref() is None for ref in refs.values()),
            what="the series to let go of "
            + ", ".join(name for name, ref in refs.items() if ref() is not None),
        )
        assert series.cancelled()
    finally:
        gc.enable()
        abandon(ex)
        shutdown_bounded(ex)


# -- timers measured from after promotion -----------------------------------------------------

SLOW_KEY = 1.5  # how long one sort_key() call takes: late by it, or by load (well under it)


def test_a_timer_is_not_late_by_the_time_a_promotion_took() -> None:
    """A timer is not late by the time a slow promotion before it took."""

    class SlowOnce:
        def __init__(self) -> None:
            self.slept = False

        def sort_key(self, task: TaskInfo) -> tuple[float, ...]:
            if task.priority == 1 and not self.slept:
                self.slept = True
                time.sleep(SLOW_KEY)
            return (-task.priority, task.due)

    ex = PriorityExecutor(2, policy=SlowOnce())
    try:
        submitted = time.monotonic()
        slow = ex.submit(int, priority=1, delay=0.05)
        # Due after the slow promotion has ended, which a sleep measured from before it
        # overshoots by SLOW_KEY.
        punctual = ex.submit(time.monotonic, delay=0.05 + SLOW_KEY + 0.1)
        assert slow.result(timeout=TIMEOUT) == 0
        lateness = punctual.result(timeout=TIMEOUT) - (submitted + 0.05 + SLOW_KEY + 0.1)
        assert lateness < SLOW_KEY / 2, f"started {lateness:.3f} s late"
    finally:
        abandon(ex)
        shutdown_bounded(ex)


# -- fork -------------------------------------------------------------------------------------

FORK_SERIES_SCRIPT = """
import os, sys, warnings
warnings.filterwarnings("ignore", category=DeprecationWarning)  # fork() with threads
from priority_executor import PriorityExecutor

ex = PriorityExecutor(1)
series = ex.submit_recurring(int, interval=60, delay=60)
series.add_done_callback(lambda f: say("callback in", os.getpid()))
say("parent", os.getpid())
pid = os.fork()
if pid == 0:
    sys.exit(0)  # the normal exit path, with its exit handlers
say("child exited", reap(pid))
series.cancel()
ex.shutdown()
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")
def test_a_forked_child_never_runs_the_parents_series_callbacks() -> None:
    """A forked child never runs the parent's series callbacks, not even at its exit."""
    proc = run_bounded(FORK_SERIES_SCRIPT)
    assert_clean_exit(proc)
    lines = proc.stdout.splitlines()
    parent = lines[0].split()[-1]
    assert lines == [f"parent {parent}", "child exited 0", f"callback in {parent}"]


# -- a policy raising KeyboardInterrupt; map() and reference cycles ---------------------------


class InterruptedPolicy:
    """Priority first; Ctrl-C while keying priority 13, a plain error for priority 14."""

    def sort_key(self, task: TaskInfo) -> tuple[float, ...]:
        if task.priority == 13:
            raise KeyboardInterrupt
        if task.priority == 14:
            raise LookupError("no key for 14")
        return (-task.priority, task.due)


def test_keyboard_interrupt_in_a_policy_at_submit_reaches_the_submitter() -> None:
    """Ctrl-C in a policy keying a task at submit() is raised there; nothing of it stays."""
    ex = PriorityExecutor(1, policy=InterruptedPolicy())
    try:
        assert ex.submit(pow, 2, 3).result(timeout=TIMEOUT) == 8
        before = stats_fields(ex)
        with pytest.raises(KeyboardInterrupt):
            ex.submit(int, priority=13)
        assert stats_fields(ex) == before
        assert ex.submit(pow, 2, 5).result(timeout=TIMEOUT) == 32
        failed = ex.submit(int, priority=14)
        assert isinstance(failed.exception(timeout=TIMEOUT), LookupError)
        assert ex.submit(pow, 2, 6).result(timeout=TIMEOUT) == 64
    finally:
        abandon(ex)
        shutdown_bounded(ex)


def raise_boom(x: int) -> int:
    if x == 2:
        # Boom, not a built-in exception: those cannot be weakly referenced.
        raise Boom(x)
    return x


def test_an_exception_from_map_is_freed_without_the_garbage_collector() -> None:
    """An exception raised through map() is freed without the cyclic garbage collector."""
    ex = PriorityExecutor(2)
    gc.disable()  # only reference counting may free it
    try:
        results = ex.map(raise_boom, [1, 2, 3], timeout=TIMEOUT)
        assert next(results) == 1
        try:
            next(results)
        except Boom as exc:
            ref = weakref.ref(exc)
        else:
            raise AssertionError("map() did not raise")
        del results
        assert ref() is None, "the exception is kept alive by a reference cycle"
    finally:
        gc.enable()
        shutdown_bounded(ex)
