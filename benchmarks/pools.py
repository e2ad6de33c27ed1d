"""The contenders for immediate work: PriorityExecutor, ThreadPoolExecutor and the handoff floor."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from queue import SimpleQueue
from typing import Any, Callable, cast

from benchmarks.results import PE, TPE
from benchmarks.runner import TIMEOUT, wait_all


def noop() -> None:
    """The task that costs nothing, so that only the executor's own work is measured."""


def priority_executor(max_workers: int, **options: Any) -> Executor:
    """A PriorityExecutor with ``options`` (such as ``backend``); raises ImportError while the
    package is not written yet."""
    from priority_executor import PriorityExecutor

    executor: Executor = PriorityExecutor(max_workers=max_workers, **options)
    return executor


def lane(executor: Executor, name: str, **limits: Any) -> Executor:
    """The lane ``name`` of ``executor``, a PriorityExecutor, with ``limits`` (see its ``lane``)."""
    from priority_executor import PriorityExecutor

    lanes = cast(PriorityExecutor, executor)
    return lanes.lane(name, **limits)


Submit = Callable[..., Future[Any]]
"""An executor's ``submit``, typed loosely: which keywords it takes depends on the executor."""

WorkItem = tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class HandoffFloor(Executor):
    """The least work any thread pool must do per task: the lower bound of ``max_workers`` threads.

    ``submit`` makes a real Future and passes it through a ``queue.SimpleQueue`` to the worker
    threads, which call ``set_running_or_notify_cancel()``, run the task and set its result.
    No bookkeeping, no ordering, no cancellation on shutdown: an executor that does more
    cannot be faster than this, so it tells how much of a contender's cost is its own.
    """

    def __init__(self, max_workers: int) -> None:
        self._queue: SimpleQueue[WorkItem | None] = SimpleQueue()
        self._threads = [
            threading.Thread(target=self._work, name=f"HandoffFloor_{i}", daemon=True)
            for i in range(max_workers)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self._queue.put((future, fn, args, kwargs))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        for _ in self._threads:
            self._queue.put(None)
        if wait:
            for thread in self._threads:
                thread.join()

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            future, fn, args, kwargs = item
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:
                    future.set_exception(exc)
                else:
                    future.set_result(result)


@dataclass(frozen=True)
class Pool:
    """A contender for immediate work: a name and a factory taking ``max_workers``."""

    name: str
    make: Callable[[int], Executor]


PRIORITY_EXECUTOR = Pool(PE, priority_executor)
THREAD_POOL = Pool(TPE, ThreadPoolExecutor)
FLOOR = Pool("floor", HandoffFloor)
BASELINES: list[Pool] = []
"""PriorityExecutor at earlier revisions (``--baseline REV``, see ``benchmarks.baseline``)."""


def all_pools() -> tuple[Pool, ...]:
    """Every contender for immediate work: PE, PE at each baseline revision, TPE, the floor."""
    return (PRIORITY_EXECUTOR, *BASELINES, THREAD_POOL, FLOOR)


@contextmanager
def running(pool: Pool, workers: int) -> Iterator[Executor]:
    """An executor of ``pool`` with all its workers started and idle; shut down on exit.

    Starting the workers first keeps thread creation, which ThreadPoolExecutor does lazily on
    submit, out of every measure. On exit whatever has not started is cancelled, so that
    held-back tasks never delay the next measure.
    """
    executor = pool.make(workers)
    try:
        start_workers(executor, workers)
        yield executor
    finally:
        executor.shutdown(wait=True, cancel_futures=True)


def start_workers(executor: Executor, workers: int) -> None:
    """Make every worker thread exist: ``workers`` tasks that can only finish all together."""
    barrier = threading.Barrier(workers + 1)
    futures = [executor.submit(barrier.wait, TIMEOUT) for _ in range(workers)]
    barrier.wait(TIMEOUT)
    wait_all(futures)


@contextmanager
def worker_blocked(executor: Executor) -> Iterator[None]:
    """Occupy a worker of ``executor`` until the block exits (a one-worker pool then queues)."""
    started, release = threading.Event(), threading.Event()

    def block() -> None:
        started.set()
        release.wait(TIMEOUT)

    executor.submit(block)
    if not started.wait(TIMEOUT):
        raise TimeoutError("the blocking task did not start")
    try:
        yield
    finally:
        release.set()
