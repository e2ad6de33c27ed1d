"""Fault injection: tasks, callbacks, policies and initializers that fail; shutdown from
inside the executor; fork; an executor dropped while it still holds work.

In every case the outcome is stated by the test, nothing hangs (every wait is bounded), no
task is lost, and the executor, or a new one, keeps working.
"""

from __future__ import annotations

import gc
import itertools
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
import weakref
from concurrent.futures import CancelledError, Future
from concurrent.futures import wait as futures_wait
from concurrent.futures.thread import BrokenThreadPool
from typing import Any, Callable

import pytest
from helpers import (
    BOUNDED_CALL,
    call_bounded,
    executor_threads,
    run_script,
    shutdown_bounded,
    unique_prefix,
    wait_until,
)

from priority_executor import PriorityExecutor, TaskInfo
from priority_executor.testing import ManualClock

TIMEOUT = 10.0  # bound of every wait below; reached only if something is broken


def threads_exit(prefix: str) -> None:
    wait_until(lambda: not executor_threads(prefix), what=f"the threads of {prefix} to exit")


def still_works(ex: PriorityExecutor) -> None:
    assert ex.submit(pow, 2, 10).result(timeout=TIMEOUT) == 1024
    assert ex.submit(str.upper, "late", delay=0.01).result(timeout=TIMEOUT) == "LATE"


def raiser(exc: BaseException) -> Callable[[], None]:
    def boom() -> None:
        raise exc

    return boom


# -- tasks that raise -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "exc", [ValueError("plain"), KeyboardInterrupt("ctrl-c"), SystemExit(3)], ids=type
)
def test_task_raising_fails_its_future_and_the_worker_keeps_working(exc: BaseException) -> None:
    prefix = unique_prefix("raise")
    ex = PriorityExecutor(max_workers=1, thread_name_prefix=prefix)
    try:
        failed = ex.submit(raiser(exc))
        assert failed.exception(timeout=TIMEOUT) is exc
        with pytest.raises(type(exc)) as info:
            failed.result()
        assert info.value is exc
        late = ex.submit(raiser(exc), delay=0.01)  # through the promoter
        assert late.exception(timeout=TIMEOUT) is exc
        # The same worker thread is alive and takes the next task.
        assert ex.submit(lambda: threading.current_thread().name).result(TIMEOUT) == f"{prefix}_0"
        still_works(ex)
    finally:
        shutdown_bounded(ex)
    stats = ex.stats()
    assert (stats.failed, stats.completed, stats.cancelled, stats.expired) == (2, 3, 0, 0)
    assert executor_threads(prefix) == []


@pytest.mark.parametrize(
    "exc", [ValueError("plain"), KeyboardInterrupt("ctrl-c"), SystemExit(3)], ids=type
)
def test_recurring_run_raising_ends_its_series_with_that_exception(exc: BaseException) -> None:
    clock = ManualClock()
    ex = PriorityExecutor(max_workers=1, clock=clock)
    runs: list[int] = []

    def tick() -> None:
        runs.append(len(runs))
        if len(runs) == 3:
            raise exc

    try:
        series = ex.submit_recurring(tick, interval=1)
        for _ in range(2):
            wait_until(lambda: ex.stats().scheduled == 1, what="the next run to be scheduled")
            clock.advance(1)
        assert series.exception(timeout=TIMEOUT) is exc
        clock.advance(5)
        assert runs == [0, 1, 2]  # the series ended: no fourth run
        assert ex.submit(len, "abc").result(timeout=TIMEOUT) == 3
    finally:
        shutdown_bounded(ex)
    stats = ex.stats()
    assert (stats.completed, stats.failed, stats.scheduled, stats.cancelled) == (3, 1, 0, 0)


# -- done-callbacks that raise --------------------------------------------------------------


def test_done_callback_raising_is_logged_and_the_executor_keeps_working(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock()
    ex = PriorityExecutor(max_workers=1, clock=clock)
    gate = threading.Event()
    calls: list[str] = []

    def bad_callback(future: Future[Any]) -> None:
        calls.append(threading.current_thread().name)
        raise ValueError("callback failure")

    caplog.set_level(logging.ERROR, logger="concurrent.futures")
    try:
        blocker = ex.submit(gate.wait, TIMEOUT)
        blocker.add_done_callback(bad_callback)  # runs in the worker
        cancelled = ex.submit(pow, 2, 2)
        cancelled.add_done_callback(bad_callback)  # runs in this thread, from cancel()
        expiring = ex.submit(pow, 2, 3, expires=1)
        expiring.add_done_callback(bad_callback)  # runs in this thread, from advance()
        delayed = ex.submit(pow, 2, 4, delay=2)
        delayed.add_done_callback(bad_callback)  # runs in the worker
        assert cancelled.cancel()
        clock.advance(1)
        assert expiring.cancelled()
        gate.set()
        assert blocker.result(timeout=TIMEOUT) is True
        clock.advance(1)
        assert delayed.result(timeout=TIMEOUT) == 16
        wait_until(lambda: len(calls) == 4, what="every callback to run")
        assert ex.submit(pow, 2, 5).result(timeout=TIMEOUT) == 32
    finally:
        shutdown_bounded(ex)
    logged = [r for r in caplog.records if r.getMessage().startswith("exception calling callback")]
    assert len(logged) == 4
    assert all(r.exc_info and isinstance(r.exc_info[1], ValueError) for r in logged)
    stats = ex.stats()
    assert (stats.completed, stats.cancelled, stats.expired, stats.failed) == (3, 1, 1, 0)


# -- policies that fail ---------------------------------------------------------------------


class PickyPolicy:
    """Priority first, except for a few priorities whose keys are broken."""

    def sort_key(self, task: TaskInfo) -> Any:
        if task.priority == 13:
            raise LookupError("no key for 13")
        if task.priority == 14:
            return ("not", "numbers")
        if task.priority == 15:
            return [1, 2]  # not a tuple
        if task.priority == 16:
            return (float("nan"), 0)
        if task.priority == 17:
            return None
        if task.priority == 18:
            return (1, "mixed")
        return (-task.priority, task.due)


BAD_PRIORITIES = {
    13: LookupError,
    14: TypeError,
    15: TypeError,
    16: TypeError,
    17: TypeError,
    18: TypeError,
}


@pytest.mark.parametrize("delayed", [False, True], ids=["due-now", "delayed"])
def test_policy_with_broken_keys_fails_only_those_tasks(delayed: bool) -> None:
    clock = ManualClock()
    ex = PriorityExecutor(max_workers=1, policy=PickyPolicy(), clock=clock)
    gate = threading.Event()
    order: list[int] = []
    kwargs = {"delay": 1} if delayed else {}
    try:
        blocker = ex.submit(gate.wait, TIMEOUT)
        wait_until(lambda: ex.stats().running == 1, what="the blocker to start")
        good: list[Future[None]] = []
        bad: dict[int, Future[None]] = {}
        for priority in (1, 13, 5, 14, 3, 15, 16, 9, 17, 18, 2):
            future = ex.submit(order.append, priority, priority=priority, **kwargs)
            if priority in BAD_PRIORITIES:
                bad[priority] = future
            else:
                good.append(future)
        if delayed:
            assert not any(f.done() for f in bad.values())
            clock.advance(1)
        for priority, future in bad.items():
            assert future.done(), priority  # failed at once, without a worker
            exc = future.exception(timeout=0)
            assert isinstance(exc, BAD_PRIORITIES[priority]), (priority, exc)
            if priority == 13:
                assert exc.args == ("no key for 13",)
            else:
                assert "sort_key" in str(exc), exc
        gate.set()
        assert blocker.result(timeout=TIMEOUT) is True
        futures_wait(good, timeout=TIMEOUT)
        assert order == [9, 5, 3, 2, 1]  # the others ran, in the policy's order
        stats = ex.stats()
        assert (stats.completed, stats.failed, stats.ready, stats.scheduled) == (6, 6, 0, 0)
        # A broken key later does not break the executor either.
        assert ex.submit(order.append, 4, priority=4).result(timeout=TIMEOUT) is None
        assert ex.submit(order.append, 13, priority=13).exception(timeout=TIMEOUT) is not None
        assert order[-1] == 4
    finally:
        gate.set()
        shutdown_bounded(ex)


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit])
def test_policy_raising_a_base_exception_for_a_delayed_task(exc_type: type) -> None:
    """A sort_key that raises KeyboardInterrupt or SystemExit while the promoter makes a
    delayed task due fails that task, as a task raising them fails its own future; the
    other delayed tasks still run and shutdown(wait=True) returns."""

    class Raising:
        def sort_key(self, task: TaskInfo) -> tuple[float, ...]:
            if task.priority == 13:
                raise exc_type("from sort_key")
            return (-task.priority, task.due)

    prefix = unique_prefix("base-key")
    ex = PriorityExecutor(max_workers=1, thread_name_prefix=prefix, policy=Raising())
    bad = ex.submit(int, priority=13, delay=0.02)
    good = ex.submit(str, "good", delay=0.05)
    try:
        assert good.result(timeout=2) == "good"
        assert isinstance(bad.exception(timeout=TIMEOUT), exc_type)
        still_works(ex)
    finally:
        # If the promoter died, these wait forever, and so would the interpreter's exit.
        bad.cancel()
        good.cancel()
        shutdown_bounded(ex)
    threads_exit(prefix)


def test_policy_failing_for_a_later_run_ends_the_series() -> None:
    class FailsAfterOne:
        def sort_key(self, task: TaskInfo) -> tuple[float, ...]:
            if task.priority == 5 and task.due >= 1:
                raise ArithmeticError("too late")
            return (task.due,)

    clock = ManualClock()
    ex = PriorityExecutor(max_workers=1, policy=FailsAfterOne(), clock=clock)
    runs: list[float] = []
    try:
        series = ex.submit_recurring(lambda: runs.append(clock.now()), interval=1, priority=5)
        wait_until(lambda: ex.stats().scheduled == 1, what="the second run to be scheduled")
        clock.advance(1)
        exc = series.exception(timeout=TIMEOUT)
        assert isinstance(exc, ArithmeticError)
        assert runs == [0.0]
        assert ex.submit(len, "ab").result(timeout=TIMEOUT) == 2
    finally:
        shutdown_bounded(ex)
    stats = ex.stats()
    assert (stats.completed, stats.failed, stats.scheduled, stats.ready) == (2, 1, 0, 0)


def test_keys_of_different_lengths_order_as_tuples() -> None:
    """DESIGN.md: a policy is any ``sort_key(task) -> tuple``; workers take the smallest key,
    ties going to the earlier submission. Tuples of different lengths compare as tuples do:
    ``(0,) < (0, 0)``, whatever the submission order."""

    class Mixed:
        def sort_key(self, task: TaskInfo) -> tuple[float, ...]:
            return (0,) if task.priority == 1 else (0, 0)

    ex = PriorityExecutor(max_workers=1, policy=Mixed())
    gate = threading.Event()
    order: list[str] = []
    try:
        blocker = ex.submit(gate.wait, TIMEOUT)
        wait_until(lambda: ex.stats().running == 1, what="the blocker to start")
        futures = [ex.submit(order.append, f"long{i}") for i in range(5)]
        futures.append(ex.submit(order.append, "short", priority=1))
        gate.set()
        assert blocker.result(timeout=TIMEOUT)
        done, _ = futures_wait(futures, timeout=TIMEOUT)
        assert all(f.exception() is None for f in done)
        assert order == ["short", "long0", "long1", "long2", "long3", "long4"]
    finally:
        gate.set()
        shutdown_bounded(ex)


# -- a failing initializer ------------------------------------------------------------------


def test_initializer_failing_on_the_second_of_four_threads(
    caplog: pytest.LogCaptureFixture,
) -> None:
    prefix = unique_prefix("init")
    calls = itertools.count(1)
    lock = threading.Lock()

    def initializer() -> None:
        with lock:
            call = next(calls)
        if call == 2:
            raise OSError("initializer 2 failed")

    caplog.set_level(logging.CRITICAL, logger="concurrent.futures")
    release = threading.Event()
    ex = PriorityExecutor(max_workers=4, thread_name_prefix=prefix, initializer=initializer)
    # Four submissions start the four threads; two more wait for a free one. The pool may
    # break while they are submitted: then the later ones are refused.
    futures: list[Future[Any]] = []
    refused = 0
    for _ in range(6):
        try:
            futures.append(ex.submit(release.wait, TIMEOUT))
        except BrokenThreadPool:
            refused += 1
    # Nothing is released yet: a future that completes was failed by the broken pool.
    wait_until(
        lambda: refused or any(f.done() for f in futures), what="the broken pool to fail a task"
    )
    for _ in range(6):
        with pytest.raises(BrokenThreadPool, match="initializer failed"):
            ex.submit(release.wait, TIMEOUT)
    release.set()
    _, not_done = futures_wait(futures, timeout=TIMEOUT)
    assert not not_done, "a task was lost"
    ran = broken = 0
    for future in futures:
        exc = future.exception()
        if exc is None:
            assert future.result() is True
            ran += 1
        else:
            assert isinstance(exc, BrokenThreadPool), exc
            assert str(exc) == (
                "A thread initializer failed, the thread pool is not usable anymore"
            )
            broken += 1
    # Only the threads whose initializer succeeded ran tasks, one each.
    assert ran <= 3 and broken + refused >= 3
    shutdown_bounded(ex)
    threads_exit(prefix)
    records = [r for r in caplog.records if r.getMessage() == "Exception in initializer:"]
    assert len(records) == 1
    assert records[0].levelno == logging.CRITICAL
    assert records[0].exc_info and isinstance(records[0].exc_info[1], OSError)
    stats = ex.stats()
    assert (stats.completed, stats.failed) == (ran, broken)
    assert (stats.scheduled, stats.ready, stats.running) == (0, 0, 0)
    # A new executor, with the same initializer (which now succeeds), works.
    fresh = PriorityExecutor(max_workers=4, initializer=initializer)
    try:
        still_works(fresh)
    finally:
        shutdown_bounded(fresh)


# -- shutdown from inside ---------------------------------------------------------------------


def test_shutdown_with_cancel_futures_from_a_task() -> None:
    prefix = unique_prefix("task-shutdown")
    ex = PriorityExecutor(max_workers=2, thread_name_prefix=prefix)
    other_go, stopper_go = threading.Event(), threading.Event()
    ran: list[str] = []

    def stopper() -> str:
        stopper_go.wait(TIMEOUT)
        ex.shutdown(wait=True, cancel_futures=True)  # must return: a task cannot wait for itself
        ran.append("stopper")
        return "returned"

    other = ex.submit(other_go.wait, TIMEOUT)
    stop = ex.submit(stopper)
    wait_until(lambda: ex.stats().running == 2, what="both workers to be busy")
    queued = [ex.submit(ran.append, i) for i in range(5)]
    delayed = [ex.submit(ran.append, "delayed", delay=60)]
    series = ex.submit_recurring(ran.append, "series", interval=0.01)
    stopper_go.set()
    assert stop.result(timeout=TIMEOUT) == "returned"
    with pytest.raises(RuntimeError, match="cannot schedule new futures after shutdown"):
        ex.submit(ran.append, "refused")
    for future in [*queued, *delayed, series]:
        assert future.cancelled()
    assert not other.done()  # a running task is never interrupted
    other_go.set()
    assert other.result(timeout=TIMEOUT) is True
    shutdown_bounded(ex, wait=True)
    assert executor_threads(prefix) == []
    assert ran == ["stopper"]
    stats = ex.stats()
    assert (stats.completed, stats.cancelled, stats.scheduled, stats.ready) == (2, 7, 0, 0)
    still_works_after(prefix)


def still_works_after(prefix: str) -> None:
    fresh = PriorityExecutor(max_workers=2, thread_name_prefix=prefix + "-fresh")
    try:
        still_works(fresh)
    finally:
        shutdown_bounded(fresh)


def test_shutdown_with_cancel_futures_from_a_done_callback_in_a_worker() -> None:
    prefix = unique_prefix("callback-shutdown")
    ex = PriorityExecutor(max_workers=2, thread_name_prefix=prefix)
    first_go, second_go = threading.Event(), threading.Event()
    returned: list[str] = []

    def stop(future: Future[Any]) -> None:
        ex.shutdown(wait=True, cancel_futures=True)
        returned.append(threading.current_thread().name)

    first = ex.submit(first_go.wait, TIMEOUT)
    second = ex.submit(second_go.wait, TIMEOUT)
    wait_until(lambda: ex.stats().running == 2, what="both workers to be busy")
    first.add_done_callback(stop)
    queued = [ex.submit(time.sleep, 0) for _ in range(4)]
    delayed = ex.submit(time.sleep, 0, delay=60)
    first_go.set()
    wait_until(lambda: returned, what="the callback's shutdown() to return")
    assert returned[0].startswith(prefix + "_")
    for future in [*queued, delayed]:
        assert future.cancelled()
    with pytest.raises(RuntimeError):
        ex.submit(time.sleep, 0)
    second_go.set()
    assert second.result(timeout=TIMEOUT) is True
    shutdown_bounded(ex)
    assert executor_threads(prefix) == []
    stats = ex.stats()
    assert (stats.completed, stats.cancelled, stats.running) == (2, 5, 0)
    still_works_after(prefix)


def test_shutdown_with_cancel_futures_from_a_callback_of_an_expired_task() -> None:
    # Real clock: the expiry, and so the callback, happens in the promoter thread.
    prefix = unique_prefix("expiry-shutdown")
    ex = PriorityExecutor(max_workers=1, thread_name_prefix=prefix)
    gate = threading.Event()
    returned: list[str] = []

    def stop(future: Future[Any]) -> None:
        ex.shutdown(wait=True, cancel_futures=True)
        returned.append("returned")

    blocker = ex.submit(gate.wait, TIMEOUT)
    wait_until(lambda: ex.stats().running == 1, what="the blocker to start")
    expiring = ex.submit(time.sleep, 0, expires=0.05)
    expiring.add_done_callback(stop)
    queued = [ex.submit(time.sleep, 0) for _ in range(3)]
    delayed = ex.submit(time.sleep, 0, delay=60)
    wait_until(lambda: returned, what="the callback's shutdown() to return")
    assert expiring.cancelled()
    assert all(f.cancelled() for f in [*queued, delayed])
    gate.set()
    assert blocker.result(timeout=TIMEOUT) is True
    shutdown_bounded(ex)
    assert executor_threads(prefix) == []
    stats = ex.stats()
    assert (stats.completed, stats.expired, stats.cancelled) == (1, 1, 4)


@pytest.mark.parametrize("trigger", ["expiry", "cancel_futures", "user_cancel"])
def test_shutdown_from_a_callback_run_in_the_callers_thread(trigger: str) -> None:
    """ManualClock.advance() applies a deadline, shutdown(cancel_futures=True) and
    Future.cancel() cancel, in the calling thread, and so run the done-callbacks there. A
    callback that calls shutdown(wait=True) must return without waiting (DESIGN.md): here
    the running task waits for this very thread, which releases it only afterwards."""
    clock = ManualClock()
    prefix = unique_prefix("caller-shutdown")
    ex = PriorityExecutor(max_workers=1, thread_name_prefix=prefix, clock=clock)
    gate = threading.Event()
    returned: list[str] = []

    def stop(future: Future[Any]) -> None:
        ex.shutdown(wait=True, cancel_futures=True)
        returned.append(threading.current_thread().name)

    blocker = ex.submit(gate.wait, TIMEOUT)
    wait_until(lambda: ex.stats().running == 1, what="the blocker to start")
    target = ex.submit(time.sleep, 0, expires=1)
    target.add_done_callback(stop)
    queued = [ex.submit(time.sleep, 0) for _ in range(3)]
    try:
        if trigger == "expiry":
            call_bounded(lambda: clock.advance(1), "advance() with a shutdown in a callback")
        elif trigger == "cancel_futures":
            shutdown_bounded(ex, wait=False, cancel_futures=True)
        else:
            assert call_bounded(target.cancel, "cancel() with a shutdown in a callback")
        assert returned == [BOUNDED_CALL]
        assert target.cancelled() and all(f.cancelled() for f in queued)
        with pytest.raises(RuntimeError):
            ex.submit(time.sleep, 0)
    finally:
        gate.set()
    assert blocker.result(timeout=TIMEOUT) is True
    shutdown_bounded(ex)
    assert executor_threads(prefix) == []


# -- fork ---------------------------------------------------------------------------------

FORK_SCRIPT = r"""
import os, sys, threading, time, warnings
warnings.filterwarnings("ignore", category=DeprecationWarning)  # fork() with threads
from concurrent.futures import wait
from priority_executor import PriorityExecutor

parent = PriorityExecutor(max_workers=3, thread_name_prefix="parent", max_waiting=100)
gate = threading.Event()
running = parent.submit(gate.wait, 30)            # a worker busy during the fork
lane = parent.lane(max_running=1, max_waiting=10)  # a gate of its own, too
lane_running = lane.submit(gate.wait, 30)         # and one with a lane's task
queued = [parent.submit(time.sleep, 0.01) for _ in range(3)]
delayed = parent.submit(str, "late", delay=0.3)    # the promoter sleeps during the fork
later = parent.submit(str, "never", delay=60)      # the parent's to cancel, in the end
series = parent.submit_recurring(time.sleep, 0, interval=0.25)
time.sleep(0.05)

pid = os.fork()
if pid == 0:
    names = sorted(t.name for t in threading.enumerate())
    assert names == ["MainThread"], names            # the parent's threads are not shared
    try:                                             # the inherited executor: no hang
        parent.submit(int).result(timeout=5)
    except RuntimeError:
        pass
    try:
        lane.submit(int).result(timeout=5)
    except RuntimeError:
        pass
    # The parent's tasks are not the child's: nothing changes them, counts them or runs them.
    assert not parent.reschedule(later, delay=0)
    assert later.cancel()                            # the child's copy of the future
    stats = parent.stats()
    assert stats.scheduled == stats.ready == stats.cancelled == 0, stats
    child = PriorityExecutor(max_workers=2, thread_name_prefix="child")
    assert child.submit(pow, 6, 2).result(timeout=5) == 36
    assert child.submit(str, "d", delay=0.05).result(timeout=5) == "d"
    assert list(child.map(abs, [-1, -2, -3], timeout=5)) == [1, 2, 3]
    ticks = []
    child_series = child.submit_recurring(ticks.append, 1, interval=0.01)
    # Left running: interpreter exit cancels the series and waits for the rest.
    child.submit(time.sleep, 0.05)
    t0 = time.monotonic()
    lane.shutdown(wait=True)                         # nothing of the parent's to wait for
    parent.shutdown(wait=True)
    assert time.monotonic() - t0 < 5
    print("child ok", flush=True)
    sys.exit(0)                                      # the normal exit path, with its handlers

code = reap(pid)
if code is None:
    print("child hung", flush=True)
    sys.exit(3)
gate.set()
assert running.result(timeout=5) is True
assert lane_running.result(timeout=5) is True
assert delayed.result(timeout=5) == "late"
assert wait(queued, timeout=5).not_done == set()
assert parent.submit(pow, 2, 3).result(timeout=5) == 8
assert not later.done()                            # the child's cancel was its own
assert later.cancel()
series.cancel()
parent.shutdown(wait=True)
print("parent ok", code, flush=True)
sys.exit(code)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")
@pytest.mark.timeout(40)
def test_fork_with_a_live_executor() -> None:
    proc = run_script(FORK_SCRIPT, timeout=20)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "child ok" in proc.stdout
    assert "parent ok 0" in proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr


# -- an executor dropped without shutdown() -----------------------------------------------------


def test_garbage_collected_executor_still_runs_queued_and_delayed_tasks() -> None:
    prefix = unique_prefix("gc")
    gate = threading.Event()
    ran: list[tuple[str, int]] = []
    ex = PriorityExecutor(max_workers=1, thread_name_prefix=prefix)
    blocker = ex.submit(gate.wait, TIMEOUT)
    queued = [ex.submit(ran.append, ("queued", i)) for i in range(5)]
    delayed = [ex.submit(ran.append, ("delayed", i), delay=0.05 + 0.02 * i) for i in range(3)]
    expiring = ex.submit(ran.append, ("expiring", 0), expires=30)
    series = ex.submit_recurring(ran.append, ("series", 0), interval=0.01, delay=0.01)
    ref = weakref.ref(ex)
    del ex
    gc.collect()
    assert ref() is None, "the executor's threads or tasks keep it alive"
    # As after shutdown(wait=False), series end: soon, as the finalizer only asks a
    # thread of the executor to shut it down (it must not wait for the lock).
    wait_until(series.cancelled, what="the series to end")
    gate.set()
    futures = [blocker, *queued, *delayed, expiring]
    done, not_done = futures_wait(futures, timeout=TIMEOUT)
    assert not not_done, "a submitted task was lost"
    assert all(f.exception() is None for f in done)
    assert sorted(ran) == sorted(
        [("queued", i) for i in range(5)] + [("delayed", i) for i in range(3)] + [("expiring", 0)]
    )
    threads_exit(prefix)


def test_garbage_collected_executor_on_a_manual_clock_still_runs_fire_and_forget_tasks() -> None:
    """DESIGN.md: dropped without shutdown(), it behaves as after shutdown(wait=False):
    what was submitted still runs. That holds on a ManualClock too, where the delayed tasks
    run when the clock reaches them, even if nobody kept their futures."""
    clock = ManualClock()
    prefix = unique_prefix("gc-manual")
    ran: list[int] = []
    ex = PriorityExecutor(max_workers=1, thread_name_prefix=prefix, clock=clock)
    for i in range(3):
        ex.submit(ran.append, i, delay=1 + i)
    del ex
    gc.collect()
    clock.advance(5)
    wait_until(lambda: len(ran) == 3, 5, what="the delayed tasks of a dropped executor to run")
    assert sorted(ran) == [0, 1, 2]
    threads_exit(prefix)


def test_garbage_collected_executor_with_only_delayed_tasks_then_new_one_works() -> None:
    prefix = unique_prefix("gc-delayed")
    ran = threading.Event()
    ex = PriorityExecutor(max_workers=2, thread_name_prefix=prefix)
    future = ex.submit(ran.set, delay=0.05)
    del ex
    gc.collect()
    assert future.result(timeout=TIMEOUT) is None
    assert ran.is_set()
    threads_exit(prefix)
    still_works_after(prefix)


def test_cancelled_futures_of_a_dropped_executor_are_reported_at_once() -> None:
    prefix = unique_prefix("gc-cancel")
    gate = threading.Event()
    ex = PriorityExecutor(max_workers=1, thread_name_prefix=prefix)
    blocker = ex.submit(gate.wait, TIMEOUT)
    queued = ex.submit(int)
    assert queued.cancel()
    del ex
    gc.collect()
    assert futures_wait([queued], timeout=0).done == {queued}
    with pytest.raises(CancelledError):
        queued.result(timeout=0)
    gate.set()
    assert blocker.result(timeout=TIMEOUT) is True
    threads_exit(prefix)


SUBPROCESS_TIMEOUT = 15  # the script takes well under a second


def test_raising_callback_and_task_at_exit_do_not_hang_the_interpreter() -> None:
    script = textwrap.dedent(
        """
        import time
        from priority_executor import PriorityExecutor
        ex = PriorityExecutor(max_workers=1)
        def bad(future):
            raise RuntimeError("callback")
        f = ex.submit(time.sleep, 0.1)
        f.add_done_callback(bad)
        ex.submit(lambda: 1 / 0)
        ex.submit(print, "last", flush=True)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "last\n"
    assert "exception calling callback" in proc.stderr


def test_effects_are_emptied_even_when_a_step_raises() -> None:
    """A worker uses its own effects again from one take() to the next: what a step that
    raised left must not run a second time, with the next take's steps."""
    from priority_executor._effects import Effects, apply

    ran: list[str] = []
    effects = Effects()
    effects.later.append(lambda: ran.append("first"))
    effects.later.append(raiser(KeyboardInterrupt()))
    effects.finally_.append(lambda: ran.append("finally"))
    effects.drop.append(object())
    with pytest.raises(KeyboardInterrupt):
        apply(effects)
    assert ran == ["first", "finally"]
    assert not effects.later and not effects.finally_ and not effects.drop
    effects.later.append(lambda: ran.append("next"))
    apply(effects)
    assert ran == ["first", "finally", "next"]
