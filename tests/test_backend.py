"""Backends: ready tasks run on a process pool or a Dask cluster, while every decision
(priority, due time, deadline, series) is still taken in this process.

The behaviour tests run on a ``ProcessPoolExecutor`` and on a real Dask ``LocalCluster`` (two
worker processes on 127.0.0.1); the Dask ones are skipped only where the ``dask`` extra is
not installed. The tasks live in ``remote.py``, which the other processes import by name.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import pytest
import remote
from helpers import TIMEOUT, run_script, stats_fields, wait_until

from priority_executor import PriorityExecutor
from priority_executor.testing import ManualClock

# A Dask worker that dies is noticed, restarted and its task rerun within seconds.
DASK_TIMEOUT = 45.0
# As for the pool that backend="process" creates: this process has threads, so no fork.
START_METHOD = multiprocessing.get_context(
    "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
)


@pytest.fixture(scope="module")
def distributed() -> ModuleType:
    try:
        import distributed
    except ImportError:
        if os.environ.get("PRIORITY_EXECUTOR_REQUIRE_DASK"):  # CI: this run must not skip
            raise
        pytest.skip("the dask extra is not installed: pip install '.[dask]'")
    return distributed


def local_cluster(distributed: ModuleType, n_workers: int) -> Any:
    return distributed.LocalCluster(
        n_workers=n_workers,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
    )


@pytest.fixture(scope="module")  # stopped after this module: its threads allocate memory
def dask_executor(distributed: ModuleType) -> Iterator[Executor]:
    with local_cluster(distributed, 2) as cluster, distributed.Client(cluster) as client:
        # pure=False: Dask would otherwise run equal calls once and share their result.
        yield client.get_executor(pure=False)


@pytest.fixture(params=["process", "dask"])
def backend(request: pytest.FixtureRequest) -> Iterator[Executor]:
    """An executor passed in by the user: a process pool of two, or a Dask cluster."""
    if request.param == "dask":
        yield request.getfixturevalue("dask_executor")
        return
    pool = ProcessPoolExecutor(2, mp_context=START_METHOD)
    yield pool
    pool.shutdown(wait=True, cancel_futures=True)


class Gate:
    """Files that a blocked task and the test both see, in whatever process it runs."""

    def __init__(self, folder: Path) -> None:
        self.path = str(folder / "open")
        self.started = str(folder / "started")

    def block(self) -> tuple[Callable[..., int], str, str]:
        """Arguments of ``submit()`` for a task that blocks until ``open()``."""
        return remote.wait_for, self.path, self.started

    def wait_started(self) -> None:
        wait_until(lambda: os.path.exists(self.started), DASK_TIMEOUT, what="the blocker")

    def open(self) -> None:
        Path(self.path).touch()


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[Gate]:
    gate = Gate(tmp_path)
    yield gate
    gate.open()  # a failed test must not leave a backend's worker blocked


def test_results_and_errors_come_back_on_the_executors_own_futures(backend: Executor) -> None:
    with PriorityExecutor(2, backend=backend) as ex:
        squared = ex.submit(remote.square, 7)
        failed = ex.submit(remote.fail, "no luck")
        where = ex.submit(remote.pid)
        assert squared.result(TIMEOUT) == 49
        with pytest.raises(ValueError, match="no luck"):
            failed.result(TIMEOUT)
        assert where.result(TIMEOUT) != os.getpid()
        assert list(ex.map(remote.square, range(5), timeout=TIMEOUT)) == [0, 1, 4, 9, 16]
        assert all(isinstance(f, Future) for f in (squared, failed, where))
    assert stats_fields(ex) == dict(
        scheduled=0,
        ready=0,
        throttled=0,
        running=0,
        completed=7,
        failed=1,
        cancelled=0,
        expired=0,
        skipped=0,
        blocked=0,
    )


def test_with_one_slot_tasks_reach_the_backend_in_policy_order(backend: Executor) -> None:
    clock = ManualClock()
    handed: list[object] = []
    with PriorityExecutor(1, backend=backend, clock=clock) as ex:
        priorities = [3, 1, 4, 1, 5, 9, 2, 6]
        futures = [ex.submit(remote.echo, p, priority=p, delay=1) for p in priorities]
        for future in futures:
            # One slot: each task is handed over only after the previous one completed.
            future.add_done_callback(lambda f: handed.append(f.result()))
        clock.advance(1)
        assert not wait(futures, DASK_TIMEOUT).not_done
    assert handed == sorted(priorities, reverse=True)


def test_delays_and_deadlines_apply_until_hand_off(backend: Executor, gate: Gate) -> None:
    clock = ManualClock()
    with PriorityExecutor(1, backend=backend, clock=clock) as ex:
        blocker = ex.submit(*gate.block())
        gate.wait_started()
        assert ex.stats().running == 1  # in the backend: it holds the only slot
        late = ex.submit(remote.square, 2, expires=5)
        later = ex.submit(remote.square, 3, delay=10)
        clock.advance(5)
        assert late.cancelled()
        gate.open()
        assert blocker.result(DASK_TIMEOUT) != os.getpid()
        wait_until(lambda: ex.stats().running == 0, what="the slot to be free")
        assert not later.done() and ex.stats().scheduled == 1
        clock.advance(5)
        assert later.result(DASK_TIMEOUT) == 9
    assert ex.stats().expired == 1


def test_cancel_before_hand_off_never_reaches_the_backend(
    backend: Executor, gate: Gate, tmp_path: Path
) -> None:
    ran = tmp_path / "ran"
    with PriorityExecutor(1, backend=backend) as ex:
        blocker = ex.submit(*gate.block())
        gate.wait_started()
        queued = ex.submit(remote.touch, str(ran))
        assert queued.cancel()
        assert wait([queued], timeout=0).done == {queued}
        gate.open()
        blocker.result(DASK_TIMEOUT)
    assert not ran.exists()
    assert ex.stats().cancelled == 1


def test_cancel_after_hand_off_is_forwarded_to_the_backend(backend: Executor, gate: Gate) -> None:
    with PriorityExecutor(1, backend=backend) as ex:
        blocker = ex.submit(*gate.block())
        gate.wait_started()
        cancelled = blocker.cancel()
        if isinstance(backend, ProcessPoolExecutor):
            assert not cancelled  # a process runs it: it cannot be stopped
        else:
            assert cancelled  # Dask releases a running task and drops its result
        gate.open()
        if cancelled:
            assert wait([blocker], timeout=DASK_TIMEOUT).done == {blocker}
            assert blocker.cancelled()
        else:
            assert blocker.result(DASK_TIMEOUT) != os.getpid()
        assert ex.submit(remote.square, 4).result(DASK_TIMEOUT) == 16


class RecordingPool(ProcessPoolExecutor):
    """A process pool that remembers the futures it hands out, with their arguments."""

    def __init__(self, max_workers: int) -> None:
        super().__init__(max_workers, mp_context=START_METHOD)
        self.handed: list[tuple[Future[Any], tuple[Any, ...]]] = []
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future = super().submit(fn, *args, **kwargs)
        with self._lock:
            self.handed.append((future, args))
        return future


def test_cancel_is_true_while_the_backend_has_not_started_the_task(
    gate: Gate, tmp_path: Path
) -> None:
    pool = RecordingPool(1)
    try:
        with PriorityExecutor(4, backend=pool) as ex:
            blocker = ex.submit(*gate.block())
            gate.wait_started()
            paths = [str(tmp_path / f"ran-{i}") for i in range(3)]
            ours = {path: ex.submit(remote.touch, path) for path in paths}

            # The pool moves 2 calls into its call queue (started, for its futures) while its
            # one process is blocked; the third stays in its own queue.
            def settled() -> bool:
                return len(pool.handed) == 4 and sum(f.running() for f, _ in pool.handed) == 3

            wait_until(settled, what="the pool to queue its calls")
            [(not_started, (waiting,))] = [(f, a) for f, a in pool.handed if not f.running()]
            queued_in_pool = next(path for path in paths if path != waiting)
            assert ours[queued_in_pool].running() and not ours[waiting].running()
            assert ours[waiting].cancel()
            assert not_started.cancelled()
            # Reported at once, although the pool sees it only when its queue gets there.
            assert wait([ours[waiting]], timeout=0).done == {ours[waiting]}
            wait_until(lambda: ex.stats().cancelled == 1, what="the slot to be freed")
            assert not ours[queued_in_pool].cancel()
            gate.open()
            blocker.result(TIMEOUT)
            assert ours[queued_in_pool].result(TIMEOUT) is None
        assert not os.path.exists(waiting)
        assert ex.stats().cancelled == 1
        assert ex.stats().completed == 3
    finally:
        pool.shutdown()


def test_cancel_racing_hand_off_and_start_a_cancelled_task_never_runs(tmp_path: Path) -> None:
    # Cancels land before the claim, between claim and hand-off, in the pool's queue and
    # after the start: whichever step decides, True means the call never ran.
    paths = [str(tmp_path / f"ran-{i}") for i in range(300)]
    pool = ProcessPoolExecutor(2, mp_context=START_METHOD)
    try:
        with PriorityExecutor(3, backend=pool) as ex:
            futures = [ex.submit(remote.touch, path) for path in paths]
            answers = {future.cancel() for future in futures[::-1]}
        assert answers == {True, False}
        for future, path in zip(futures, paths):
            assert wait([future], timeout=0).done == {future}
            assert future.cancelled() != os.path.exists(path), path
        stats = ex.stats()
        assert stats.cancelled == sum(f.cancelled() for f in futures) > 0
        assert stats.completed == len(paths) - stats.cancelled > 0
    finally:
        pool.shutdown()


def test_a_process_killed_mid_task_breaks_the_executor_and_nothing_hangs() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, backend="process", clock=clock) as ex:
        dying = ex.submit(remote.die, priority=1, delay=1)
        waiting = ex.submit(remote.square, 2, delay=1)
        delayed = ex.submit(remote.square, 3, delay=100)
        clock.advance(1)
        with pytest.raises(BrokenProcessPool):
            dying.result(TIMEOUT)
        # Failed before `dying` was: whoever sees it fail finds the executor broken.
        for future in (waiting, delayed):
            assert isinstance(future.exception(0), BrokenProcessPool)
        with pytest.raises(BrokenProcessPool, match="terminated abruptly"):
            ex.submit(remote.square, 4)
    assert ex.stats().failed == 3


def test_a_dask_worker_killed_mid_task_has_its_task_rerun(
    dask_executor: Executor, tmp_path: Path
) -> None:
    with PriorityExecutor(1, backend=dask_executor) as ex:
        marker = str(tmp_path / "died")
        assert ex.submit(remote.die_once, marker).result(DASK_TIMEOUT) == "survived"
        assert ex.submit(remote.square, 5).result(DASK_TIMEOUT) == 25


def says_it_cannot_pickle(exc: BaseException | None) -> bool:
    """Whether the error, or one that caused it, says what could not be pickled."""
    while exc is not None:
        if "pickle" in str(exc) and "lock" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def test_a_lost_dask_cluster_breaks_the_executor_and_nothing_hangs(
    distributed: ModuleType, gate: Gate
) -> None:
    cluster = local_cluster(distributed, 1)
    client = distributed.Client(cluster)
    try:
        with PriorityExecutor(1, backend=client.get_executor(pure=False)) as ex:
            in_flight = ex.submit(*gate.block())
            waiting = ex.submit(remote.square, 2)
            gate.wait_started()
            cluster.close()
            # Dask reports the task it lost as cancelled; the next hand-off meets a closed
            # client, which breaks the executor.
            assert wait([in_flight], DASK_TIMEOUT).done == {in_flight}
            assert in_flight.cancelled()
            refusal = type(waiting.exception(DASK_TIMEOUT))
            with pytest.raises(refusal):
                ex.submit(remote.square, 3)
        assert stats_fields(ex) == dict(
            scheduled=0,
            ready=0,
            throttled=0,
            running=0,
            completed=0,
            failed=1,
            cancelled=1,
            expired=0,
            skipped=0,
            blocked=0,
        )
    finally:
        client.close()
        cluster.close()


def test_what_cannot_be_pickled_fails_only_its_own_future(backend: Executor) -> None:
    with PriorityExecutor(2, backend=backend) as ex:
        unpicklable = ex.submit(remote.echo, threading.Lock())
        fine = ex.submit(remote.square, 6)
        # A process pool says "cannot pickle '_thread.lock' object"; Dask, that it could
        # not serialize the task, caused by that same error.
        assert says_it_cannot_pickle(unpicklable.exception(DASK_TIMEOUT))
        assert fine.result(DASK_TIMEOUT) == 36
        assert ex.submit(remote.square, 7).result(DASK_TIMEOUT) == 49


def test_a_local_function_fails_on_a_process_pool() -> None:
    with PriorityExecutor(1, backend="process") as ex:
        future = ex.submit(lambda: 1)
        # "Can't pickle <function <lambda>...>", or on 3.13 "Can't get local object '...'".
        with pytest.raises(Exception, match=r"pickle|local object"):
            future.result(TIMEOUT)
        assert ex.submit(remote.square, 2).result(TIMEOUT) == 4


def test_recurring_runs_call_the_backend(backend: Executor, tmp_path: Path) -> None:
    clock = ManualClock()
    log = tmp_path / "runs"
    with PriorityExecutor(1, backend=backend, clock=clock) as ex:
        series = ex.submit_recurring(remote.log_pid, str(log), interval=1)
        wait_until(lambda: ex.stats().completed == 1, DASK_TIMEOUT, what="the first run")
        clock.advance(1)
        wait_until(lambda: ex.stats().completed == 2, DASK_TIMEOUT, what="the second run")
        assert series.cancel()
        failing = ex.submit_recurring(remote.fail, "stop", interval=1)
        with pytest.raises(ValueError, match="stop"):
            failing.result(DASK_TIMEOUT)
    pids = log.read_text().split()
    assert len(pids) == 2 and str(os.getpid()) not in pids


def test_shutdown_leaves_a_backend_passed_in_running(backend: Executor) -> None:
    with PriorityExecutor(1, backend=backend) as ex:
        assert ex.submit(remote.square, 2).result(DASK_TIMEOUT) == 4
    assert backend.submit(remote.square, 3).result(DASK_TIMEOUT) == 9


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize("wait_for_it", [True, False])
def test_shutdown_stops_the_process_pool_it_created(wait_for_it: bool) -> None:
    ex = PriorityExecutor(2, backend="process")
    pids = {ex.submit(remote.pid).result(TIMEOUT) for _ in range(4)}
    ex.shutdown(wait=wait_for_it)
    if wait_for_it:
        assert all(gone(pid) for pid in pids)
    else:
        wait_until(lambda: all(gone(pid) for pid in pids), what="the pool's processes to exit")


def test_shutdown_of_an_unused_process_backend_returns() -> None:
    PriorityExecutor(backend="process").shutdown()


def test_the_initializer_runs_in_the_processes_of_a_pool_it_creates() -> None:
    with PriorityExecutor(1, backend="process", initializer=remote.remember, initargs=(7,)) as ex:
        assert ex.submit(remote.remembered).result(TIMEOUT) == 7


def test_a_failing_initializer_breaks_the_pool_it_creates() -> None:
    with PriorityExecutor(1, backend="process", initializer=remote.fail, initargs=("x",)) as ex:
        with pytest.raises(BrokenProcessPool):
            ex.submit(remote.square, 2).result(TIMEOUT)
        with pytest.raises(BrokenProcessPool):
            ex.submit(remote.square, 3)


@pytest.mark.parametrize(
    ("backend", "error"),
    [("thread", ValueError), (42, TypeError), (ProcessPoolExecutor, TypeError)],
)
def test_a_backend_that_is_not_an_executor_is_refused(backend: Any, error: type) -> None:
    with pytest.raises(error, match="backend"):
        PriorityExecutor(backend=backend)


def test_an_initializer_belongs_to_a_backend_passed_in() -> None:
    pool = ProcessPoolExecutor(1, mp_context=START_METHOD)
    try:
        with pytest.raises(TypeError, match="initializer"):
            PriorityExecutor(backend=pool, initializer=remote.remember, initargs=(1,))
    finally:
        pool.shutdown()


@pytest.mark.parametrize("shorthand", [True, False])
def test_delayed_tasks_still_reach_a_process_pool_at_exit(shorthand: bool) -> None:
    # The pool's module is imported after priority_executor: its exit hook, which makes it
    # refuse work, is registered after the executor's. The pool has run a task before exit:
    # Python 3.12+ cannot fork at exit, so a pool cannot start its processes then.
    backend = '"process"' if shorthand else "ProcessPoolExecutor(1)"
    result = run_script(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(remote.__file__)!r})
        import remote
        from priority_executor import PriorityExecutor
        from concurrent.futures import ProcessPoolExecutor
        ex = PriorityExecutor(1, backend={backend})
        say("started", ex.submit(remote.square, 2).result())
        future = ex.submit(remote.square, 9, delay=0.3)
        future.add_done_callback(lambda f: say("done", f.result()))
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "started 4\ndone 81\n"
