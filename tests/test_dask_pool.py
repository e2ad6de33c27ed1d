"""dask's threaded scheduler runs its tasks on a ``PriorityExecutor`` it is given, as on a
``ThreadPoolExecutor``, keeping as many in flight as the executor has workers.

Skipped where the ``dask`` extra is not installed, except in CI's Dask step.
"""

from __future__ import annotations

import os
import threading
from types import ModuleType

import pytest
from helpers import TIMEOUT, unique_prefix

from priority_executor import PriorityExecutor


@pytest.fixture(scope="module")
def dask() -> ModuleType:
    try:
        import dask
    except ImportError:
        if os.environ.get("PRIORITY_EXECUTOR_REQUIRE_DASK"):  # CI: this run must not skip
            raise
        pytest.skip("the dask extra is not installed: pip install '.[dask]'")
    return dask


def run_graph(dask: ModuleType, workers: int, **compute: object) -> set[str]:
    """Compute 2 * ``workers`` tasks that each wait until ``workers`` of them run at once;
    return the names of the threads that ran them."""
    together = threading.Barrier(workers, timeout=TIMEOUT)
    threads: set[str] = set()

    def task(i: int) -> int:
        threads.add(threading.current_thread().name)
        together.wait()
        return i

    tasks = [dask.delayed(task)(i) for i in range(2 * workers)]
    assert dask.compute(*tasks, **compute) == tuple(range(2 * workers))
    return threads


def test_dask_uses_the_executor_set_as_its_pool(dask: ModuleType) -> None:
    prefix = unique_prefix("dask-pool")
    with PriorityExecutor(4, thread_name_prefix=prefix) as pool, dask.config.set(pool=pool):
        threads = run_graph(dask, 4, scheduler="threads")
    assert {name.rsplit("_", 1)[0] for name in threads} == {prefix}


def test_dask_uses_the_executor_given_as_its_scheduler(dask: ModuleType) -> None:
    # More workers than CPUs: dask would otherwise keep only CPU-count tasks in flight.
    workers = (os.cpu_count() or 1) + 2
    prefix = unique_prefix("dask-scheduler")
    with PriorityExecutor(workers, thread_name_prefix=prefix) as pool:
        threads = run_graph(dask, workers, scheduler=pool)
    assert {name.rsplit("_", 1)[0] for name in threads} == {prefix}
