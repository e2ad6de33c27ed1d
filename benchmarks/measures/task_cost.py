"""Measure 18: where a task's time goes, the submit and the worker's side apart.

Throughput (measure 1) runs both sides at once, and on a 2-core machine under one GIL their
costs add up. Here they are timed apart, for each pool with one worker: first a batch of
no-op submits while the worker is held, on the submitting thread's CPU clock (the submit's
own cost: the future, the task, the queue); then, released, the worker runs the batch, timed
from the release to the last future done (the worker's cost: taking a task, running it,
completing its future). The figures explain measure 1; no target is set on them.
"""

from __future__ import annotations

import time
from functools import partial

from benchmarks.config import Sizes
from benchmarks.pools import (
    FLOOR,
    PRIORITY_EXECUTOR,
    THREAD_POOL,
    Pool,
    noop,
    running,
    worker_blocked,
)
from benchmarks.results import TPE, Measurement, Row, anchor_row
from benchmarks.runner import Progress, Trial, gc_paused, interleave, wait_all

SIDES = ("submit", "worker")


def run(sizes: Sizes, progress: Progress) -> Measurement:
    """PE, TPE and the floor, ``sizes.throughput_tasks`` no-ops a batch, interleaved."""
    tasks = sizes.throughput_tasks
    trials = [
        Trial(pool.name, pool.name, partial(side_costs, pool, tasks))
        for pool in (PRIORITY_EXECUTOR, THREAD_POOL, FLOOR)
    ]
    samples, notes = interleave(trials, sizes.repetitions, progress)
    note = (
        f"{tasks:,} no-op tasks a batch, 1 worker, GC paused: submit = submitting thread's CPU"
        " time per"
        " submit while the worker is held; worker = time per task from its release to the"
        " last future done"
    )
    return Measurement("µs", samples, [note, *notes], {"tasks": tasks})


def judge(measurement: Measurement) -> list[Row]:
    """One row per side, PE beside TPE and the floor."""
    return [anchor_row(measurement, side, label=side, baseline=TPE) for side in SIDES]


def side_costs(pool: Pool, tasks: int) -> dict[str, float]:
    """Microseconds per task of each side, for one batch through a fresh one-worker pool."""
    with running(pool, 1) as executor, gc_paused():
        submit = executor.submit
        with worker_blocked(executor):
            start = time.thread_time()
            futures = [submit(noop) for _ in range(tasks)]
            submitting = time.thread_time() - start
            released = time.perf_counter()
        wait_all(futures)
        working = time.perf_counter() - released
    return {"submit": submitting / tasks * 1e6, "worker": working / tasks * 1e6}
