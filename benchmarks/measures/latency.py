"""Measure 3: start latency, from ``submit()`` to the first line of the task.

This is what a lone request pays when the pool is not busy: waking a worker and handing it
the task. Warm, every worker is started and idle first. Cold, as an executor made at
start-up and handed one request at a time is: a new executor for each ``COLD_REQUESTS``
requests, its workers started as the requests come (ThreadPoolExecutor starts one per
submit until it has ``max_workers``), so thread creation is part of what the first ones pay.
The task reads the clock as its first line. The caller waits for it in one of two ways,
interleaved as separate trials:

- in ``result()`` (the task is ``time.perf_counter`` itself). The woken worker needs the
  GIL, which the caller holds until it blocks: PE's future, whose lock is its condition,
  gets its caller blocked sooner than TPE's, and that hides part of the worker's own path
  from its wake-up to the task.
- on a ``threading.Event`` that the task sets, the same for every contender: what is left
  is the wake-up path itself (the caller's ``submit()`` after the wake-up, the worker's
  way to the task), as for a caller that waits on anything but the future.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor
from functools import partial

from benchmarks.config import Sizes
from benchmarks.pools import Pool, all_pools, running
from benchmarks.results import PE, TPE, Measurement, Row, anchor_row, baseline_rows, percentile
from benchmarks.runner import TIMEOUT, Progress, Trial, interleave

WORKERS = 4
GAP = 0.0002
"""Seconds between samples waited in ``result()``, so that the worker of the previous sample
is waiting again."""
EVENT_GAP = 0.00015
"""Seconds between samples waited on an Event. The caller wakes before the task's future is
complete, and the worker parks again after that, both well within the pause."""
ON_EVENT = "on an Event"
"""The suffix of the variants whose caller waits on an Event: ``"p50 on an Event"``."""
PERCENTILES = (50, 99)
COLD = "cold "
"""The prefix of the variants on a cold pool: ``"cold p50 on an Event"``."""
COLD_REQUESTS = 10
"""Requests handed to each new executor in the cold variants."""


def run(sizes: Sizes, progress: Progress) -> Measurement:
    """Time ``sizes.latency_samples`` lone tasks per contender, way of waiting and repetition."""
    samples = sizes.latency_samples
    trials = [
        Trial(
            pool.name,
            f"{pool.name} {prefix}{way}",
            partial(start_latency, pool, samples, waiting, cold=bool(prefix)),
        )
        for prefix in ("", COLD)
        for waiting, way in ((via_result, "in result()"), (via_event, ON_EVENT))
        for pool in all_pools()
    ]
    figures, notes = interleave(trials, sizes.repetitions, progress)
    note = (
        f"{samples:,} tasks one at a time, {WORKERS} idle workers; the caller waits in"
        f" result(), {GAP * 1e3:g} ms apart, or on an Event the task sets,"
        f" {EVENT_GAP * 1e3:g} ms apart; cold: a new executor, no worker started, for each"
        f" {COLD_REQUESTS} of them"
    )
    return Measurement("µs", figures, [note, *notes])


def judge(measurement: Measurement) -> list[Row]:
    """PE must start a task no later than TPE, at the median and at the 99th percentile,
    whichever way the caller waits.

    After each, a row per baseline revision: PE must start tasks within 5% as early as it.
    """
    rows = []
    for variant in (
        *(f"{prefix}{variant}" for prefix in ("", COLD) for variant in variants("")),
        *(f"{prefix}{variant}" for prefix in ("", COLD) for variant in variants(f" {ON_EVENT}")),
    ):
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


def variants(suffix: str) -> list[str]:
    """The names of the percentiles of one way of waiting: ``["p50", "p99"]`` and so on."""
    return [f"p{percent}{suffix}" for percent in PERCENTILES]


Waiting = Callable[[Executor], float]
"""One sample: submit a lone task, wait for it one way, return its start latency in seconds."""


def start_latency(pool: Pool, samples: int, waiting: Waiting, cold: bool) -> dict[str, float]:
    """p50 and p99, in µs, of ``samples`` start latencies: on idle started workers, or
    ``cold``, on new executors that start their workers as the requests come."""
    if cold:
        latencies = []
        for _ in range(max(1, samples // COLD_REQUESTS)):
            executor = pool.make(WORKERS)
            try:
                latencies += [waiting(executor) for _ in range(COLD_REQUESTS)]
            finally:
                executor.shutdown(wait=True, cancel_futures=True)
    else:
        with running(pool, WORKERS) as executor:
            latencies = [waiting(executor) for _ in range(samples)]
    prefix = COLD if cold else ""
    suffix = f" {ON_EVENT}" if waiting is via_event else ""
    return {
        f"{prefix}{name}": percentile(latencies, percent) * 1e6
        for name, percent in zip(variants(suffix), PERCENTILES)
    }


def via_result(executor: Executor) -> float:
    """The caller blocks in ``result()``; the task is the clock reading itself."""
    time.sleep(GAP)  # a pause by design: nothing signals that a worker is back to waiting
    submitted = time.perf_counter()
    started: float = executor.submit(time.perf_counter).result(TIMEOUT)
    return started - submitted


def via_event(executor: Executor) -> float:
    """The caller blocks on an Event that the task sets after reading the clock."""
    started: list[float] = []
    done = threading.Event()

    def task() -> None:
        started.append(time.perf_counter())
        done.set()

    time.sleep(EVENT_GAP)  # as in via_result
    submitted = time.perf_counter()
    executor.submit(task)
    if not done.wait(TIMEOUT):
        raise TimeoutError(f"a lone task did not start within {TIMEOUT:g} s")
    return started[0] - submitted
