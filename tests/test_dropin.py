"""What a user replacing ThreadPoolExecutor relies on keeps working the same way."""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import functools
import gc
import itertools
import logging
import os
import re
import signal
import threading
import time
import weakref
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from concurrent.futures.thread import BrokenThreadPool
from typing import Callable

import pytest
from helpers import TIMEOUT, Boom, blocked_worker, run_script

from priority_executor import ExecutorStats, Priority, PriorityExecutor
from priority_executor.testing import ManualClock

_unique = itertools.count()


def unique_prefix(name: str) -> str:
    return f"{name}{os.getpid()}x{next(_unique)}"


def threads_named(prefix: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(prefix + "_")]


def fail(message: str = "boom") -> None:
    raise Boom(message)


# -- basics ----------------------------------------------------------------------------------


def test_is_an_executor_and_returns_real_futures() -> None:
    with PriorityExecutor(2) as ex:
        assert isinstance(ex, Executor)
        future = ex.submit(pow, 2, 10)
        # A subclass that only marks the callbacks it runs as the executor's, one for every
        # executor: every method a caller uses is Future's own.
        assert isinstance(future, Future)
        _, *rest = type(future).__mro__
        assert tuple(rest) == Future.__mro__
        with PriorityExecutor(1) as other:
            assert type(other.submit(int)) is type(future)
        assert future.result(timeout=TIMEOUT) == 1024
        assert future.done()
        assert not future.cancelled()
        assert future.exception() is None


def test_submit_passes_args_and_kwargs_including_fn_and_self() -> None:
    def callee(*args: object, **kwargs: object) -> tuple[object, object]:
        return args, kwargs

    with PriorityExecutor(2) as ex:
        assert ex.submit(callee, fn=1, self=2).result(timeout=TIMEOUT) == ((), {"fn": 1, "self": 2})
        assert ex.submit(callee, 1, "a", x=None).result(timeout=TIMEOUT) == (
            (1, "a"),
            {"x": None},
        )
        assert ex.submit(callee).result(timeout=TIMEOUT) == ((), {})


def test_reserved_keywords_are_consumed_and_partial_passes_them() -> None:
    def callee(**kwargs: object) -> dict[str, object]:
        return kwargs

    with PriorityExecutor(2) as ex:
        assert ex.submit(callee, priority=5, other=1).result(timeout=TIMEOUT) == {"other": 1}
        wrapped = functools.partial(callee, priority=5, delay=1)
        assert ex.submit(wrapped).result(timeout=TIMEOUT) == {"priority": 5, "delay": 1}


def test_exceptions_come_through_result_and_exception() -> None:
    with PriorityExecutor(2) as ex:
        future = ex.submit(fail, "bad thing")
        with pytest.raises(Boom, match="bad thing"):
            future.result(timeout=TIMEOUT)
        exc = future.exception(timeout=0)
        assert isinstance(exc, Boom)
        assert exc.__traceback__ is not None
        # The worker survives: later tasks still run.
        assert ex.submit(int, 4).result(timeout=TIMEOUT) == 4
    assert ex.stats().failed == 1
    assert ex.stats().completed == 1


def test_base_exception_in_a_task_is_set_on_its_future() -> None:
    class Fatal(BaseException):
        pass

    def fatal() -> None:
        raise Fatal

    with PriorityExecutor(1) as ex:
        future = ex.submit(fatal)
        with pytest.raises(Fatal):
            future.result(timeout=TIMEOUT)
        assert ex.submit(int, 1).result(timeout=TIMEOUT) == 1


def test_future_running_while_it_runs() -> None:
    with PriorityExecutor(1) as ex, blocked_worker(ex) as (release, blocker):
        queued = ex.submit(int)
        assert blocker.running()
        assert not queued.running()
        assert not queued.done()
        release.set()
        queued.result(timeout=TIMEOUT)


# -- as_completed, wait, callbacks -----------------------------------------------------------


def test_as_completed_yields_every_future_in_completion_order() -> None:
    gates = [threading.Event() for _ in range(3)]

    def task(i: int) -> int:
        assert gates[i].wait(TIMEOUT)
        return i

    with PriorityExecutor(3) as ex:
        futures = [ex.submit(task, i) for i in range(3)]
        order = []
        iterator = cf.as_completed(futures, timeout=TIMEOUT)
        for i in (2, 0, 1):
            gates[i].set()
            order.append(next(iterator).result())
        assert order == [2, 0, 1]
        with pytest.raises(StopIteration):
            next(iterator)


def test_as_completed_times_out() -> None:
    with PriorityExecutor(1) as ex, blocked_worker(ex) as (_, blocker):
        iterator = cf.as_completed([blocker], timeout=0.05)
        with pytest.raises(cf.TimeoutError):
            next(iterator)


def test_wait_return_when() -> None:
    with PriorityExecutor(2) as ex, blocked_worker(ex) as (release, blocker):
        quick = ex.submit(int, 1)
        failing = ex.submit(fail)
        done, not_done = cf.wait([blocker, quick], timeout=TIMEOUT, return_when=cf.FIRST_COMPLETED)
        assert done == {quick}
        assert not_done == {blocker}
        done, not_done = cf.wait(
            [blocker, quick, failing], timeout=TIMEOUT, return_when=cf.FIRST_EXCEPTION
        )
        assert failing in done
        assert blocker in not_done
        done, not_done = cf.wait([blocker, quick], timeout=0.05)
        assert not_done == {blocker}
        release.set()
        done, not_done = cf.wait([blocker, quick, failing], timeout=TIMEOUT)
        assert not not_done


def test_add_done_callback_called_once_with_the_future() -> None:
    calls: list[tuple[Future[int], str]] = []
    called = threading.Event()

    def callback(f: Future[int]) -> None:
        calls.append((f, threading.current_thread().name))
        called.set()

    with PriorityExecutor(1, thread_name_prefix="cb") as ex:
        future = ex.submit(int, 5)
        future.add_done_callback(callback)
        assert future.result(timeout=TIMEOUT) == 5
        assert called.wait(TIMEOUT)
        # Added after completion: called at once, in this thread.
        future.add_done_callback(callback)
    assert len(calls) == 2
    assert all(f is future for f, _ in calls)
    assert calls[1][1] == threading.current_thread().name


def test_add_done_callback_on_failure_and_on_cancel() -> None:
    seen: list[str] = []
    with PriorityExecutor(1) as ex, blocked_worker(ex) as (release, _):
        failing = ex.submit(fail)
        cancelled = ex.submit(int)
        failing.add_done_callback(lambda f: seen.append(f"failed:{type(f.exception()).__name__}"))
        cancelled.add_done_callback(lambda f: seen.append(f"cancelled:{f.cancelled()}"))
        assert cancelled.cancel()
        assert seen == ["cancelled:True"]
        release.set()
        with pytest.raises(Boom):
            failing.result(timeout=TIMEOUT)
    assert seen == ["cancelled:True", "failed:Boom"]


# -- asyncio ---------------------------------------------------------------------------------


def test_asyncio_run_in_executor() -> None:
    async def main(ex: PriorityExecutor) -> list[object]:
        loop = asyncio.get_running_loop()
        results = await asyncio.gather(
            loop.run_in_executor(ex, pow, 3, 4),
            loop.run_in_executor(ex, functools.partial(int, "ff", base=16)),
            loop.run_in_executor(ex, threading.current_thread),
        )
        with pytest.raises(Boom):
            await loop.run_in_executor(ex, fail)
        return results

    with PriorityExecutor(2, thread_name_prefix="aio") as ex:
        squared, parsed, thread = asyncio.run(main(ex))
    assert (squared, parsed) == (81, 255)
    assert thread.name.startswith("aio_")  # type: ignore[attr-defined]


def test_asyncio_wrap_future() -> None:
    async def main(ex: PriorityExecutor) -> tuple[int, int]:
        high = asyncio.wrap_future(ex.submit(int, 7, priority=Priority.HIGH))
        delayed = asyncio.wrap_future(ex.submit(int, 8, delay=0.01))
        return await high, await delayed

    with PriorityExecutor(2) as ex:
        assert asyncio.run(main(ex)) == (7, 8)


def test_asyncio_cancel_of_the_wrapper_cancels_the_queued_task() -> None:
    ran: list[str] = []

    async def main(ex: PriorityExecutor, queued: Future[None]) -> None:
        wrapper = asyncio.wrap_future(queued)
        await asyncio.sleep(0)
        wrapper.cancel()
        with pytest.raises(asyncio.CancelledError):
            await wrapper

    with PriorityExecutor(1) as ex, blocked_worker(ex) as (release, _):
        queued = ex.submit(ran.append, "queued")
        asyncio.run(main(ex, queued))
        assert queued.cancelled()
        release.set()
    assert ran == []


# -- constructor -----------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1])
def test_max_workers_must_be_positive_same_message_as_threadpoolexecutor(bad: int) -> None:
    with pytest.raises(ValueError) as tpe_error:
        ThreadPoolExecutor(bad)
    with pytest.raises(ValueError) as our_error:
        PriorityExecutor(bad)
    assert str(our_error.value) == "max_workers must be greater than 0"
    assert str(our_error.value) == str(tpe_error.value)
    with pytest.raises(ValueError, match=r"^max_workers must be greater than 0$"):
        PriorityExecutor(max_workers=bad)


@pytest.mark.timeout(30)
def test_default_max_workers_is_threadpoolexecutors_default() -> None:
    tpe = ThreadPoolExecutor()
    expected = tpe._max_workers  # type: ignore[attr-defined]
    tpe.shutdown()
    prefix = unique_prefix("default")
    started = threading.Semaphore(0)
    release = threading.Event()

    def task() -> str:
        started.release()
        assert release.wait(TIMEOUT)
        return threading.current_thread().name

    ex = PriorityExecutor(thread_name_prefix=prefix)
    try:
        futures = [ex.submit(task) for _ in range(expected + 2)]
        for _ in range(expected):
            assert started.acquire(timeout=TIMEOUT)
        stats = ex.stats()
        assert stats.running == expected
        assert stats.ready == 2
        assert len(threads_named(prefix)) == expected
        assert not started.acquire(timeout=0.05)
    finally:
        release.set()
        ex.shutdown(wait=True)
    names = {f.result() for f in futures}
    assert names == {f"{prefix}_{i}" for i in range(expected)}


def test_thread_names_with_prefix() -> None:
    prefix = unique_prefix("named")
    barrier = threading.Barrier(3, timeout=TIMEOUT)

    def name() -> str:
        barrier.wait()  # three tasks at once: three threads
        return threading.current_thread().name

    with PriorityExecutor(3, thread_name_prefix=prefix) as ex:
        names = {f.result(timeout=TIMEOUT) for f in [ex.submit(name) for _ in range(3)]}
    assert names == {f"{prefix}_0", f"{prefix}_1", f"{prefix}_2"}


def test_thread_names_without_prefix() -> None:
    pattern = re.compile(r"^PriorityExecutor-(\d+)_(\d+)$")
    with PriorityExecutor(1) as ex1, PriorityExecutor(1) as ex2:
        name1 = ex1.submit(lambda: threading.current_thread().name).result(timeout=TIMEOUT)
        name2 = ex2.submit(lambda: threading.current_thread().name).result(timeout=TIMEOUT)
    m1, m2 = pattern.match(name1), pattern.match(name2)
    assert m1 is not None, name1
    assert m2 is not None, name2
    assert m1.group(2) == m2.group(2) == "0"
    assert int(m2.group(1)) > int(m1.group(1))  # each executor has its own number


def test_threads_start_lazily_and_never_exceed_max_workers() -> None:
    prefix = unique_prefix("lazy")
    with PriorityExecutor(4, thread_name_prefix=prefix) as ex:
        assert threads_named(prefix) == []
        ex.submit(int).result(timeout=TIMEOUT)
        assert len(threads_named(prefix)) == 1
        names = {ex.submit(lambda: threading.current_thread().name).result() for _ in range(50)}
        assert names <= {f"{prefix}_{i}" for i in range(4)}
        assert len(threads_named(prefix)) <= 4
    for thread in threads_named(prefix):
        thread.join(TIMEOUT)
    assert threads_named(prefix) == []


def test_initializer_runs_once_per_thread_with_initargs() -> None:
    prefix = unique_prefix("init")
    calls: list[tuple[str, tuple[object, ...]]] = []
    local = threading.local()

    def initializer(*args: object) -> None:
        calls.append((threading.current_thread().name, args))
        local.value = args

    barrier = threading.Barrier(3, timeout=TIMEOUT)

    def task() -> object:
        barrier.wait()
        return local.value

    with PriorityExecutor(
        3, thread_name_prefix=prefix, initializer=initializer, initargs=("a", 1)
    ) as ex:
        results = [f.result(timeout=TIMEOUT) for f in [ex.submit(task) for _ in range(3)]]
        results += [ex.submit(lambda: local.value).result(timeout=TIMEOUT) for _ in range(10)]
    assert results == [("a", 1)] * 13
    assert sorted(calls) == [(f"{prefix}_{i}", ("a", 1)) for i in range(3)]


def test_initializer_must_be_callable() -> None:
    with pytest.raises(TypeError):
        PriorityExecutor(1, initializer=5)  # type: ignore[arg-type]


def test_failing_initializer_breaks_the_pool(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.CRITICAL, logger="concurrent.futures")
    clock = ManualClock()
    may_fail = threading.Event()

    def initializer() -> None:
        assert may_fail.wait(TIMEOUT)
        raise Boom("init failed")

    ex = PriorityExecutor(1, initializer=initializer, clock=clock)
    try:
        pending = [ex.submit(int, i) for i in range(3)]
        delayed = ex.submit(int, delay=5)
        may_fail.set()
        for future in [*pending, delayed]:
            with pytest.raises(BrokenThreadPool):
                future.result(timeout=TIMEOUT)
        with pytest.raises(BrokenThreadPool):
            ex.submit(int)
        with pytest.raises(BrokenThreadPool):
            ex.submit(int, delay=1)
        stats = ex.stats()
        assert stats.failed == 4
        assert (stats.ready, stats.scheduled, stats.running, stats.completed) == (0, 0, 0, 0)
    finally:
        ex.shutdown(wait=True)
    records = [r for r in caplog.records if r.name == "concurrent.futures"]
    assert len(records) == 1
    assert records[0].levelno == logging.CRITICAL
    assert "initializer" in records[0].getMessage()
    assert records[0].exc_info is not None
    assert records[0].exc_info[0] is Boom


def test_failing_initializer_same_as_threadpoolexecutor(caplog: pytest.LogCaptureFixture) -> None:
    """Side by side: the same exception type, message, and log record."""
    caplog.set_level(logging.CRITICAL, logger="concurrent.futures")

    def initializer() -> None:
        raise Boom("init failed")

    outcomes = []
    for cls in (ThreadPoolExecutor, PriorityExecutor):
        caplog.clear()
        ex = cls(1, initializer=initializer)
        future = ex.submit(int)
        with pytest.raises(BrokenThreadPool) as info:
            future.result(timeout=TIMEOUT)
        with pytest.raises(BrokenThreadPool) as later:
            ex.submit(int)
        ex.shutdown(wait=True)
        records = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
        outcomes.append((str(info.value), str(later.value), records))
    assert outcomes[1] == outcomes[0]


# -- garbage collection, fork ----------------------------------------------------------------


@pytest.mark.timeout(30)
def test_executor_dropped_without_shutdown_runs_its_work_then_its_threads_exit() -> None:
    prefix = unique_prefix("dropped")
    started, release = threading.Event(), threading.Event()

    def blocker() -> str:
        started.set()
        assert release.wait(TIMEOUT)
        return "blocker"

    ex = PriorityExecutor(2, thread_name_prefix=prefix)
    futures = [ex.submit(blocker)]
    assert started.wait(TIMEOUT)
    futures += [ex.submit(int, i) for i in range(10)]
    futures.append(ex.submit(str, "late", delay=0.05))
    ref = weakref.ref(ex)
    del ex
    gc.collect()
    assert ref() is None, "the executor's threads keep it alive"
    release.set()
    results = [f.result(timeout=TIMEOUT) for f in futures]
    assert results == ["blocker", *range(10), "late"]
    threads = threads_named(prefix)
    for thread in threads:
        thread.join(5)
    assert [t.name for t in threads if t.is_alive()] == []


@pytest.mark.timeout(30)
def test_idle_executor_dropped_without_shutdown_lets_its_threads_exit() -> None:
    prefix = unique_prefix("idle")
    ex = PriorityExecutor(3, thread_name_prefix=prefix)
    barrier = threading.Barrier(3, timeout=TIMEOUT)
    for f in [ex.submit(barrier.wait) for _ in range(3)]:
        f.result(timeout=TIMEOUT)
    threads = threads_named(prefix)
    assert len(threads) == 3
    ref = weakref.ref(ex)
    del ex
    gc.collect()
    assert ref() is None
    for thread in threads:
        thread.join(5)
    assert [t.name for t in threads if t.is_alive()] == []


@pytest.mark.timeout(60)
def test_executor_dropped_without_shutdown_still_runs_delayed_work_at_exit() -> None:
    source = """
        import gc, weakref
        from priority_executor import PriorityExecutor

        def start():
            ex = PriorityExecutor(1)
            ex.submit(say, "queued")
            ex.submit(say, "delayed", delay=0.2)
            return weakref.ref(ex)

        ref = start()
        gc.collect()
        say("collected", ref() is None)
    """
    proc = run_script(source)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert sorted(lines) == ["collected True", "delayed", "queued"]
    assert lines[-1] == "delayed"


def _wait_for_child(pid: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.WIFEXITED(status), f"child ended by signal: {status}"
            return os.WEXITSTATUS(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung")
        time.sleep(0.01)


def _child_checks(inherited: PriorityExecutor) -> int:
    try:
        inherited.submit(int)
    except RuntimeError:
        pass
    else:
        return 10
    try:
        inherited.submit(int, delay=0.01)
    except RuntimeError:
        pass
    else:
        return 11
    inherited.stats()  # its lock is usable
    with PriorityExecutor(2) as fresh:
        if fresh.submit(int, 5).result(timeout=5) != 5:
            return 12
        if fresh.submit(int, 6, delay=0.01).result(timeout=5) != 6:
            return 13
    inherited.shutdown(wait=True)  # must not wait for the parent's threads
    return 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")
@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")
@pytest.mark.timeout(60)
def test_fork_while_busy() -> None:
    ex = PriorityExecutor(2)
    try:
        with blocked_worker(ex) as (release, blocker):
            queued = [ex.submit(int, i) for i in range(3)]
            delayed = ex.submit(int, 9, delay=0.2)  # the promoter thread is asleep
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child
                code = 1
                try:
                    code = _child_checks(ex)
                finally:
                    os._exit(code)
            assert _wait_for_child(pid, 20) == 0
            release.set()
            assert [f.result(timeout=TIMEOUT) for f in queued] == [0, 1, 2]
            assert delayed.result(timeout=TIMEOUT) == 9
            assert blocker.result(timeout=TIMEOUT) is None
            assert ex.submit(int, 3).result(timeout=TIMEOUT) == 3  # the parent's still works
    finally:
        ex.shutdown(wait=True)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")
@pytest.mark.timeout(60)
def test_fork_while_busy_child_exits_normally() -> None:
    """The child runs the interpreter's normal exit, where executors are shut down."""
    source = """
        import faulthandler, os, signal, sys, threading, time, warnings
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        from priority_executor import PriorityExecutor

        ex = PriorityExecutor(2)
        release = threading.Event()
        ex.submit(release.wait, 10)
        ex.submit(say, "parent delayed", delay=0.2)
        pid = os.fork()
        if pid == 0:
            faulthandler.dump_traceback_later(15, exit=True)  # never outlive the test
            try:
                ex.submit(int)
            except RuntimeError:
                say("child refused")
            fresh = PriorityExecutor(1)
            fresh.submit(say, "child fresh", delay=0.05)
            sys.exit(0)  # no shutdown: interpreter exit must run it and not hang
        code = reap(pid)
        say("child hung" if code is None else f"child status {code}")
        release.set()
    """
    proc = run_script(source)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    # The parent's delayed task runs at 0.2 s, whenever the child is done.
    assert sorted(lines) == ["child fresh", "child refused", "child status 0", "parent delayed"]
    lines.remove("parent delayed")
    assert lines == ["child refused", "child fresh", "child status 0"]


# -- map -------------------------------------------------------------------------------------


def test_map_results_in_input_order() -> None:
    def slow_inverse(i: int) -> int:
        time.sleep((10 - i) * 0.002)
        return -i

    with PriorityExecutor(4) as ex:
        assert list(ex.map(slow_inverse, range(10))) == [-i for i in range(10)]
        assert list(ex.map(pow, [2, 3, 4], [5, 2])) == [32, 9]  # shortest iterable wins
        assert list(ex.map(int, [])) == []
        assert list(ex.map(str, range(5), chunksize=3)) == ["0", "1", "2", "3", "4"]


def test_map_reraises_the_first_failure_in_input_order() -> None:
    def maybe_fail(i: int) -> int:
        if i == 3:
            raise Boom(str(i))
        return i

    with PriorityExecutor(2) as ex:
        results = ex.map(maybe_fail, range(6))
        assert [next(results) for _ in range(3)] == [0, 1, 2]
        with pytest.raises(Boom, match="3"):
            next(results)


def test_map_with_priority_runs_before_normal_backlog() -> None:
    order: list[str] = []
    with PriorityExecutor(1) as ex, blocked_worker(ex) as (release, _):
        backlog = [ex.submit(order.append, f"bg{i}") for i in range(3)]
        results = ex.map(order.append, ["m0", "m1", "m2"], priority=Priority.HIGH)
        low = ex.map(order.append, ["l0", "l1"], priority=Priority.LOW)
        release.set()
        assert list(results) == [None, None, None]
        assert list(low) == [None, None]
        for f in backlog:
            f.result(timeout=TIMEOUT)
    assert order == ["m0", "m1", "m2", "bg0", "bg1", "bg2", "l0", "l1"]


def test_map_submits_at_once_not_lazily() -> None:
    ran: list[int] = []
    with PriorityExecutor(2) as ex:
        ex.map(ran.append, range(5))  # never iterated
    assert sorted(ran) == list(range(5))


def _map_task_blocking_at(
    blocked: int,
) -> tuple[Callable[[int], int], list[int], threading.Event, threading.Event]:
    """A task for map(): it records its argument and, for ``blocked``, waits to be released.

    Returns the task, the recorded arguments, the "blocked task started" and the release events.
    """
    ran: list[int] = []
    started, release = threading.Event(), threading.Event()

    def task(i: int) -> int:
        ran.append(i)
        if i == blocked:
            started.set()
            assert release.wait(TIMEOUT)
        return i

    return task, ran, started, release


def test_map_timeout_raises_and_cancels_the_rest() -> None:
    task, ran, started, release = _map_task_blocking_at(0)
    ex = PriorityExecutor(1)
    try:
        results = ex.map(task, range(5), timeout=0.2)
        assert started.wait(TIMEOUT)
        with pytest.raises(cf.TimeoutError):
            list(results)
        stats = ex.stats()
        assert stats.cancelled == 4
        assert stats.ready == 0
    finally:
        release.set()
        ex.shutdown(wait=True)
    assert ran == [0]
    stats = ex.stats()
    assert (stats.completed, stats.cancelled) == (1, 4)


def test_map_early_exit_cancels_the_rest() -> None:
    task, ran, second_started, release = _map_task_blocking_at(1)
    ex = PriorityExecutor(1)
    try:
        results = ex.map(task, range(5))
        assert next(results) == 0
        assert second_started.wait(TIMEOUT)
        results.close()  # as breaking out of a for loop over the results
        stats = ex.stats()
        assert (stats.cancelled, stats.ready, stats.running) == (3, 0, 1)
    finally:
        release.set()
        ex.shutdown(wait=True)
    assert ran == [0, 1]


# -- stats -----------------------------------------------------------------------------------


def _stats_tuple(s: ExecutorStats) -> tuple[int, ...]:
    return (s.scheduled, s.ready, s.running, s.completed, s.failed, s.cancelled, s.expired)


def test_stats_counts_each_task_in_one_field() -> None:
    clock = ManualClock()
    ex = PriorityExecutor(1, clock=clock)
    assert _stats_tuple(ex.stats()) == (0, 0, 0, 0, 0, 0, 0)
    try:
        with blocked_worker(ex) as (release, _):
            ok = ex.submit(int, 1)
            failing = ex.submit(fail)
            expiring = ex.submit(int, expires=1)
            delayed = ex.submit(int, 2, delay=5)
            dropped = ex.submit(int, delay=6)
            assert dropped.cancel()
            snapshot = ex.stats()
            assert _stats_tuple(snapshot) == (1, 3, 1, 0, 0, 1, 0)
            clock.advance(1)  # the expiring one misses its deadline
            assert expiring.cancelled()
            assert _stats_tuple(ex.stats()) == (1, 2, 1, 0, 0, 1, 1)
            release.set()
            assert ok.result(timeout=TIMEOUT) == 1
            with pytest.raises(Boom):
                failing.result(timeout=TIMEOUT)
            clock.advance(4)
            assert delayed.result(timeout=TIMEOUT) == 2
    finally:
        ex.shutdown(wait=True)
    assert _stats_tuple(ex.stats()) == (0, 0, 0, 3, 1, 1, 1)
    # A snapshot does not move, and cannot be changed.
    assert _stats_tuple(snapshot) == (1, 3, 1, 0, 0, 1, 0)
    with pytest.raises(AttributeError):
        snapshot.completed = 5  # type: ignore[misc]
    assert all(type(v) is int for v in _stats_tuple(snapshot))


def test_a_future_cancelled_while_waiting_is_counted_before_its_callbacks_run() -> None:
    """As a plain future's first done-callback would, the task learns of a cancel() before
    the user's callbacks run; after a reschedule, the task that stands for it does."""
    seen: list[ExecutorStats] = []
    with PriorityExecutor(1) as ex, blocked_worker(ex):
        waiting = ex.submit(int)
        moved = ex.submit(int, delay=60)
        assert ex.reschedule(moved, delay=30)
        for future in (waiting, moved):
            future.add_done_callback(lambda _: seen.append(ex.stats()))
            assert future.cancel()
    assert [(s.ready, s.scheduled, s.cancelled) for s in seen] == [(0, 1, 1), (0, 0, 2)]


@pytest.mark.parametrize("fails", [False, True], ids=["returns", "raises"])
def test_a_done_future_is_already_counted_by_stats(fails: bool) -> None:
    """Whoever sees a future done, even its done-callback, finds its task counted."""

    def task(gate: threading.Event) -> None:
        gate.wait(TIMEOUT)
        if fails:
            raise ValueError("boom")

    seen = []
    with PriorityExecutor(1) as ex:
        gate = threading.Event()
        future = ex.submit(task, gate)
        future.add_done_callback(lambda _: seen.append(ex.stats()))
        gate.set()
        cf.wait([future], timeout=TIMEOUT)
    assert (seen[0].running, seen[0].completed, seen[0].failed) == (0, int(not fails), int(fails))


# A future's lock: the executor's futures wait on a lock of their own rather than a
# threading.Condition (see priority_executor/_task.py, FutureLock). What a waiter sees must
# not change.


def test_every_thread_blocked_in_result_wakes_when_the_future_completes() -> None:
    with PriorityExecutor(max_workers=1) as ex, blocked_worker(ex) as (release, _):
        future = ex.submit(int, 7)
        waiting = threading.Barrier(9, timeout=TIMEOUT)
        results: list[object] = []

        def wait_for_it(timeout: float | None) -> None:
            waiting.wait()
            try:
                results.append(future.result(timeout=timeout))
            except cf.TimeoutError:
                results.append("timed out")

        # Four give up early: their sleepers leave, and must not keep the rest asleep.
        timeouts = [None, TIMEOUT] * 2 + [0.01] * 4
        threads = [threading.Thread(target=wait_for_it, args=(t,)) for t in timeouts]
        for thread in threads:
            thread.start()
        waiting.wait()
        deadline = time.monotonic() + TIMEOUT
        while results.count("timed out") < 4 and time.monotonic() < deadline:
            time.sleep(0.01)  # for the early ones to time out, not for a due time
        release.set()
        for thread in threads:
            thread.join(TIMEOUT)
        assert sorted(map(str, results)) == ["7"] * 4 + ["timed out"] * 4
        assert future.result(timeout=0) == 7  # and later callers see it at once


@pytest.mark.parametrize("timeout", [0, -1.0, float("nan"), 0.001])
def test_result_of_a_pending_future_times_out_as_threadpoolexecutors(timeout: float) -> None:
    outcomes = []
    for executor_class in (ThreadPoolExecutor, PriorityExecutor):
        with executor_class(max_workers=1) as ex:
            release = threading.Event()
            blocker = ex.submit(release.wait, TIMEOUT)
            queued = ex.submit(int, 1)
            try:
                queued.result(timeout=timeout)
            except Exception as exc:  # the type is what is compared
                outcomes.append(type(exc))
            release.set()
            assert blocker.result(timeout=TIMEOUT) and queued.result(timeout=TIMEOUT) == 1
    assert outcomes == [cf.TimeoutError, cf.TimeoutError]


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs signal.setitimer")
def test_a_result_interrupted_by_a_signal_handler_leaves_the_future_usable() -> None:
    # The handler's exception comes out of result() in the main thread, as it does from
    # a threading.Condition; the future's lock is let go and its completion still wakes
    # the next waiter.
    def interrupt(signum: int, frame: object) -> None:
        raise Boom("interrupted")

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        with PriorityExecutor(max_workers=1) as ex, blocked_worker(ex) as (release, _):
            future = ex.submit(int, 3)
            signal.setitimer(signal.ITIMER_REAL, 0.05)
            with pytest.raises(Boom, match="interrupted"):
                future.result(timeout=TIMEOUT)
            assert not future.done()
            threading.Timer(0.05, release.set).start()
            assert future.result(timeout=TIMEOUT) == 3
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_futures_private_fields_are_what_the_executors_futures_set() -> None:
    # A tripwire on CPython internals: the executor's futures set Future's private fields
    # themselves, stand in for its Condition with a lock answering the calls Future makes,
    # and make its list of done-callbacks on first use. A Python that changes any of it
    # must fail here, not in users' programs.
    import concurrent.futures._base as futures_base
    import inspect

    from priority_executor import _task

    assert _task.OWN_FUTURE_INIT
    calls = set(re.findall(r"_condition\.(\w+)", inspect.getsource(futures_base)))
    assert calls == {"acquire", "release", "wait", "notify_all"}
    # And what else a threading.Condition answers, for code that waits on _condition.
    condition_methods = {name for name in vars(threading.Condition) if name[0] != "_"}
    assert calls | condition_methods - {"notifyAll"} <= set(dir(_task.FutureLock))
    with PriorityExecutor(max_workers=1) as ex:
        future = ex.submit(int)
        assert future.result(timeout=TIMEOUT) == 0
        assert set(vars(future)) == set(vars(Future())) - {"_done_callbacks"} | {
            "_task",
            "_owner",
        }


def test_future_appends_a_done_callback_only_under_its_lock() -> None:
    # The tripwire for the list of done-callbacks made on first use (see OwnFuture): two
    # threads must never both make one. In concurrent.futures, _done_callbacks is appended
    # to in a "with self._condition" block, and otherwise only read: by _invoke_callbacks,
    # once the future is done.
    import ast
    import concurrent.futures._base as futures_base
    import inspect

    tree = ast.parse(inspect.getsource(futures_base))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}

    def enclosing(node: ast.AST) -> list[ast.AST]:
        found = []
        while node in parents:
            node = parents[node]
            found.append(node)
        return found

    def under_lock(node: ast.AST) -> bool:
        return any(
            isinstance(outer, ast.With)
            and any(
                isinstance(item.context_expr, ast.Attribute)
                and item.context_expr.attr == "_condition"
                for item in outer.items
            )
            for outer in enclosing(node)
        )

    # Every use, as (function, method called on the list, under the lock): a second use in
    # one function must show too.
    uses = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "_done_callbacks":
            function = next(f for f in enclosing(node) if isinstance(f, ast.FunctionDef))
            method = parents[node].attr if isinstance(parents[node], ast.Attribute) else None
            uses.append((function.name, method, under_lock(node)))
    assert sorted(uses, key=str) == [
        ("__init__", None, False),
        ("_invoke_callbacks", None, False),
        ("add_done_callback", "append", True),
    ]


def test_done_callbacks_added_from_many_threads_each_run_once() -> None:
    # The list of done-callbacks is made by the first add_done_callback(): threads adding
    # theirs while the future completes must not make one each, nor lose a callback.
    for _ in range(50):
        assert sorted(_callbacks_added_while_completing(threads=4, each=10)) == list(range(40))


def _callbacks_added_while_completing(threads: int, each: int) -> list[int]:
    """What the callbacks that ``threads`` threads add, ``each`` apiece, to one future as
    it completes report: each its own number."""
    calls: list[int] = []
    start = threading.Barrier(threads + 1, timeout=TIMEOUT)
    with PriorityExecutor(max_workers=1) as ex, blocked_worker(ex) as (release, _):
        future = ex.submit(int, 1)

        def add(first: int) -> None:
            start.wait()
            for n in range(first, first + each):
                future.add_done_callback(lambda _, n=n: calls.append(n))

        adders = [threading.Thread(target=add, args=(i * each,)) for i in range(threads)]
        for thread in adders:
            thread.start()
        start.wait()
        release.set()
        for thread in adders:
            thread.join(TIMEOUT)
    # After shutdown(wait=True), which joins the worker that ran the callbacks it found.
    assert future.result(timeout=0) == 1
    return calls
