"""Measure 10: CPU-bound work, wall time from the first submit to the last task done.

Pure-Python tasks hold the GIL, so worker threads take turns: a thread pool runs them no
faster than one thread. With ``backend="process"`` PE hands every ready task to a process
pool of its own while priorities and deadlines stay in this process; on CPU-bound work that
should beat threads by up to the number of CPUs. A bare ProcessPoolExecutor is what that
backend can reach at best; PE on a local Dask cluster of as many single-thread worker
processes shows what the round trip through Dask's scheduler costs on top.

Every executor, with its processes or cluster, is started once before the repetitions and
warmed with one task per worker: a long-lived service pays start-up once, not per batch.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Callable

from benchmarks.busywork import spin
from benchmarks.config import Sizes
from benchmarks.measures.throughput import workers_label
from benchmarks.pools import priority_executor
from benchmarks.results import PE, TPE, Measurement, Row, anchor_row, with_series
from benchmarks.runner import Progress, Trial, interleave, wait_all

WORKERS = os.cpu_count() or 1
VARIANT = workers_label(WORKERS)
PE_THREADS = "PE threads"
PE_PROCESS = "PE process"
PE_DASK = "PE Dask"
PROCESS_POOL = "PPE"
CALIBRATION_LOOPS = 200_000


@dataclass(frozen=True)
class Contender:
    """A series: how to start its executor for ``max_workers``; leaving it shuts it down."""

    series: str
    start: Callable[[int], AbstractContextManager[Executor]]


@contextmanager
def on_dask(workers: int) -> Iterator[Executor]:
    """PE handing its tasks to a local Dask cluster of ``workers`` single-thread processes."""
    try:
        import distributed
    except ImportError as exc:
        raise ImportError("distributed is not installed: pip install '.[dask]'") from exc
    with (
        distributed.LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster) as client,
        priority_executor(
            workers,
            # pure=False: Dask would otherwise run the equal calls once and share their result.
            backend=client.get_executor(pure=False),
        ) as executor,
    ):
        yield executor


CONTENDERS = (
    Contender(PE_THREADS, priority_executor),
    Contender(PE_PROCESS, partial(priority_executor, backend="process")),
    Contender(TPE, ThreadPoolExecutor),
    Contender(PROCESS_POOL, ProcessPoolExecutor),
    # Last: the pools above fork their processes before Dask's event-loop threads exist.
    Contender(PE_DASK, on_dask),
)


def run(sizes: Sizes, progress: Progress) -> Measurement:
    """``sizes.cpu_tasks`` tasks of ``sizes.cpu_task_seconds`` each, per contender and run."""
    tasks = sizes.cpu_tasks
    loops = loops_lasting(sizes.cpu_task_seconds)
    skipped = []
    with ExitStack() as started:
        trials = []
        for contender in CONTENDERS:
            progress(f"starting {contender.series}")
            try:
                executor = started.enter_context(contender.start(WORKERS))
                warm(executor, loops)
            except Exception as exc:  # Dask not installed, or a backend that is unfinished
                skipped.append(f"{contender.series} skipped: {type(exc).__name__}: {exc}")
                progress(f"{contender.series} failed: {type(exc).__name__}: {exc}")
                continue
            trials.append(
                Trial(
                    contender.series, contender.series, partial(wall_time, executor, tasks, loops)
                )
            )
        samples, failures = interleave(trials, sizes.repetitions, progress)
        progress("shutting down")
    notes = [
        f"{tasks} tasks of {loops:,} pure-Python loop iterations (~{sizes.cpu_task_seconds * 1e3:g}"
        f" ms alone) a run, {WORKERS} workers each; executors started and warmed before the "
        "repetitions",
        f"{PE_PROCESS} (the PE column) = PriorityExecutor(backend='process'); {PE_DASK} = PE on "
        f"a Dask LocalCluster of {WORKERS} single-thread processes; {PROCESS_POOL} = a bare "
        "ProcessPoolExecutor",
        *skipped,
        *failures,
    ]
    parameters = {
        "tasks": tasks,
        "task_s": sizes.cpu_task_seconds,
        "loops": loops,
        "workers": WORKERS,
    }
    return Measurement("s", samples, notes, parameters)


def judge(measurement: Measurement) -> list[Row]:
    """PE on processes, in the PE column, must finish before both PE on threads and TPE."""
    as_pe = {c.series: PE if c.series == PE_PROCESS else c.series for c in CONTENDERS}
    return [
        anchor_row(
            with_series(measurement, as_pe),
            VARIANT,
            label=f"PE on processes, {VARIANT}",
            baseline=PE_THREADS,
            target="process backend faster than threads",
            verdict=lambda medians: medians[PE] < min(medians[PE_THREADS], medians[TPE]),
        )
    ]


def loops_lasting(seconds: float) -> int:
    """Iterations of ``spin`` that take ``seconds`` in this process, on the fastest of 3 tries."""
    fastest = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        spin(CALIBRATION_LOOPS)
        fastest = min(fastest, time.perf_counter() - start)
    return max(1, round(CALIBRATION_LOOPS * seconds / fastest))


def warm(executor: Executor, loops: int) -> None:
    """One task per worker: processes are forked or spawned, and import the task, untimed."""
    wait_all(executor.submit(spin, loops) for _ in range(WORKERS))


def wall_time(executor: Executor, tasks: int, loops: int) -> dict[str, float]:
    """Seconds from the first of ``tasks`` submits to the last of them done."""
    start = time.perf_counter()
    wait_all([executor.submit(spin, loops) for _ in range(tasks)])
    return {VARIANT: time.perf_counter() - start}
