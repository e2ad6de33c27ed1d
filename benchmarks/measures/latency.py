"""Measure 3: start latency, from ``submit()`` to the first line of the task, on idle workers.

This is what a lone request pays when the pool is not busy: waking a worker and handing it
the task. The task is ``time.perf_counter`` itself, so its first line is the clock reading.
"""

from __future__ import annotations

import time
from concurrent.futures import Executor
from functools import partial

from benchmarks.config import Sizes
from benchmarks.pools import Pool, all_pools, running
from benchmarks.results import PE, TPE, Measurement, Row, anchor_row, baseline_rows, percentile
from benchmarks.runner import TIMEOUT, Progress, Trial, interleave

WORKERS = 4
GAP = 0.0002
"""Seconds between samples, so that the worker of the previous sample is waiting again."""


def run(sizes: Sizes, progress: Progress) -> Measurement:
    """Time ``sizes.latency_samples`` lone tasks per contender and repetition."""
    samples = sizes.latency_samples
    trials = [
        Trial(pool.name, pool.name, partial(start_latency, pool, samples)) for pool in all_pools()
    ]
    figures, notes = interleave(trials, sizes.repetitions, progress)
    note = f"{samples:,} tasks one at a time, {GAP * 1e3:g} ms apart, {WORKERS} idle workers"
    return Measurement("µs", figures, [note, *notes])


def judge(measurement: Measurement) -> list[Row]:
    """PE must start a task no later than TPE, at the median and at the 99th percentile.

    After each, a row per baseline revision: PE must start tasks within 5% as early as it.
    """
    rows = []
    for variant in ("p50", "p99"):
        rows.append(
            anchor_row(
                measurement,
                variant,
                label=variant,
                baseline=TPE,
                target="PE <= TPE",
                verdict=lambda medians: medians[PE] <= medians[TPE],
            )
        )
        rows += baseline_rows(measurement, variant, label=variant, higher_is_better=False)
    return rows


def start_latency(pool: Pool, samples: int) -> dict[str, float]:
    """p50 and p99, in µs, of ``samples`` start latencies on idle started workers."""
    with running(pool, WORKERS) as executor:
        latencies = [_one_start(executor) for _ in range(samples)]
    return {"p50": percentile(latencies, 50) * 1e6, "p99": percentile(latencies, 99) * 1e6}


def _one_start(executor: Executor) -> float:
    time.sleep(GAP)  # a pause by design: nothing signals that a worker is back to waiting
    submitted = time.perf_counter()
    started: float = executor.submit(time.perf_counter).result(TIMEOUT)
    return started - submitted
