"""Measure 36: from a run-time limit to its task's future failing, on the real clock.

Issue 45 asks that at the limit the future fail at once, on the real clock within a few
milliseconds, with 1,000 limits running at once. Each task submitted through
``executor.options(time_limit=...)`` reads its token's ``deadline`` as its first line (its
start plus the limit, on the executor's clock, ``time.monotonic``); a done-callback reads
that clock when the future fails with ``TaskTimeoutError``. The latency is the difference.

- **1,000 at once**: 1,000 tasks on a pool of 1,000 started, idle workers, with a limit
  longer than their starts take, so that all 1,000 run before the first limit is due
  (checked). Their limits then come due over the spread of their starts.
- **one at a time**: a lone task at a time on 4 idle workers.

Two kinds of task. Hung (series ``PE``): blocked on an Event set only once its future has
failed, as a call on a dead socket is; it overruns, so at each limit its thread leaves the
pool and a replacement worker starts (README, "Run-time limits"), and that is in the
figures. Cooperative (``PE cooperative``): ``current().sleep()``, which returns at the
limit, so the woken tasks end while later limits fire.

ThreadPoolExecutor has no run-time limit. Its anchor is what its caller writes instead:
``concurrent.futures.wait(futures, timeout=limit)`` right after submitting the same hung
tasks, every future still running taken as timed out when it returns (from the call plus
the limit to its return, the same for all of them). It fails no future, asks nothing to
stop and frees no worker: a floor (one timed wake-up of the caller), not a like-for-like.
The warning logged at each limit is made, and dropped by a NullHandler (as in measure 14).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future, wait
from functools import partial
from typing import Any, cast

from benchmarks.config import Sizes
from benchmarks.measures.retries import warnings_dropped
from benchmarks.pools import PRIORITY_EXECUTOR, THREAD_POOL, Pool, running
from benchmarks.results import PE, TPE, Measurement, Row, anchor_row, percentile
from benchmarks.runner import TIMEOUT, Progress, Trial, interleave, wait_all

CONCURRENT = 1_000
CONCURRENT_LIMIT = 0.5
"""Seconds: longer than 1,000 tasks take to start on 1,000 idle workers (about 0.1 s here)."""
LONE_WORKERS = 4
LONE_LIMIT = 0.01
COOPERATIVE = "PE cooperative"
MAX_LATENCY = 5.0
"""Milliseconds: the issue's "within a few milliseconds", at p99."""
SHAPES = ("1,000 at once", "one at a time")
PERCENTILES = (50, 99)


def run(sizes: Sizes, progress: Progress) -> Measurement:
    """Both shapes for each kind of task and TPE's anchor, interleaved."""
    lone = sizes.limit_samples
    shapes = ((SHAPES[0], CONCURRENT, 1), (SHAPES[1], 1, lone))
    trials = [
        Trial(series, f"{series}, {shape}", partial(latencies, shape, batch, rounds, how))
        for shape, batch, rounds in shapes
        for series, how in ((PE, hung), (COOPERATIVE, cooperative), (TPE, caller_waits))
    ]
    samples, notes = interleave(trials, sizes.repetitions, progress)
    note = (
        f"{CONCURRENT:,} tasks at once on {CONCURRENT:,} workers, limit {CONCURRENT_LIMIT:g} s;"
        f" {lone:,} lone tasks on {LONE_WORKERS} workers, limit {LONE_LIMIT:g} s; from each"
        " task's deadline to a done-callback seeing it fail (PE), or from the caller's"
        " wait(timeout=) call plus the limit to its return (TPE, no run-time limit)"
    )
    parameters = {"concurrent": CONCURRENT, "lone_samples": lone}
    return Measurement("ms", samples, [note, *notes], parameters)


def judge(measurement: Measurement) -> list[Row]:
    """Every p99, hung or cooperative, within MAX_LATENCY ms of the limit; p50s are shown."""
    rows = []
    for variant in variants():
        p99 = variant.startswith("p99")
        rows.append(
            anchor_row(
                measurement,
                variant,
                label=variant,
                baseline=None,
                target=f"PE p99 <= {MAX_LATENCY:g} ms" if p99 else "",
                verdict=within_target if p99 else None,
            )
        )
    return rows


def within_target(medians: dict[str, float]) -> bool:
    return max(medians[PE], medians[COOPERATIVE]) <= MAX_LATENCY


def variants(shape: str | None = None) -> list[str]:
    """``"p50, 1,000 at once"`` and so on: of one shape, or of every shape."""
    return [
        f"p{percent}, {name}"
        for name in (SHAPES if shape is None else (shape,))
        for percent in PERCENTILES
    ]


Batch = Callable[[Executor, int, float], list[float]]
"""Submit ``int`` tasks with a time limit of ``float`` s; their latencies, in seconds."""


def latencies(shape: str, batch: int, rounds: int, how: Batch) -> dict[str, float]:
    """p50 and p99, in ms, over ``rounds`` batches of ``batch`` limited tasks each."""
    pool: Pool = THREAD_POOL if how is caller_waits else PRIORITY_EXECUTOR
    limit = CONCURRENT_LIMIT if batch > 1 else LONE_LIMIT
    # Dropped until the pool has shut down: the warnings are logged after the futures fail.
    with warnings_dropped(), running(pool, max(batch, LONE_WORKERS)) as executor:
        late = [seconds for _ in range(rounds) for seconds in how(executor, batch, limit)]
    return {
        name: percentile(late, percent) * 1e3 for name, percent in zip(variants(shape), PERCENTILES)
    }


def hung(executor: Executor, batch: int, limit: float) -> list[float]:
    """Tasks blocked on an Event that is set once every future has failed."""
    release = threading.Event()
    try:
        return limited(executor, batch, limit, partial(release.wait, TIMEOUT))
    finally:
        release.set()


def cooperative(executor: Executor, batch: int, limit: float) -> list[float]:
    """Tasks in the token's sleep, which returns as soon as the limit sets the token."""
    from priority_executor import current

    return limited(executor, batch, limit, lambda: current().sleep(TIMEOUT))


def limited(
    executor: Executor, batch: int, limit: float, block: Callable[[], object]
) -> list[float]:
    """Run ``batch`` tasks doing ``block`` under ``limit``; each one's latency in seconds.

    Raises RuntimeError when a future did not fail with a TimeoutError, or when a task
    started after the first limit was due (the limits were not all running at once).
    """
    from priority_executor import PriorityExecutor, current

    deadlines = [0.0] * batch
    failed = [0.0] * batch

    def task(index: int) -> None:
        deadlines[index] = current().deadline or 0.0
        block()

    def seen(index: int, _: Future[Any]) -> None:
        failed[index] = time.monotonic()

    submit = cast(PriorityExecutor, executor).options(time_limit=limit).submit
    futures = [submit(task, index) for index in range(batch)]
    for index, future in enumerate(futures):
        future.add_done_callback(partial(seen, index))
    wait_all(futures)
    if not all(isinstance(future.exception(), TimeoutError) for future in futures):
        raise RuntimeError("a limited task's future did not fail with a TimeoutError")
    if max(deadlines) - limit >= min(deadlines):
        raise RuntimeError(f"a task started after the first limit, {limit:g} s, was due")
    return [end - deadline for end, deadline in zip(failed, deadlines)]


def caller_waits(executor: Executor, batch: int, limit: float) -> list[float]:
    """TPE: hung tasks, and the caller's ``wait(timeout=limit)`` over them."""
    release = threading.Event()
    futures = [executor.submit(release.wait, TIMEOUT) for _ in range(batch)]
    try:
        called = time.monotonic()
        _, running_still = wait(futures, timeout=limit)
        returned = time.monotonic()
    finally:
        release.set()
    if len(running_still) != batch:
        raise RuntimeError("a hung task ended before the caller's timeout")
    return [returned - (called + limit)] * batch
