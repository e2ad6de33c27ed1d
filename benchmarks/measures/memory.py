"""Measure 6: memory held per pending task, traced with tracemalloc.

PE holds tasks delayed by an hour; ThreadPoolExecutor can only hold tasks by queueing them
behind a blocked worker. Either way the executor keeps the future, the callable's reference
and its own bookkeeping: the bytes per task say what a large backlog costs.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

from benchmarks.config import FAR_FUTURE, Sizes
from benchmarks.pools import PRIORITY_EXECUTOR, THREAD_POOL, Pool, noop, running, worker_blocked
from benchmarks.results import PE, TPE, Measurement, Row, anchor_row
from benchmarks.runner import Progress, Trial, gc_paused, interleave, live_bytes, tracing_memory

VARIANT = "pending task"
HOLDS: tuple[tuple[Pool, Mapping[str, object]], ...] = (
    (PRIORITY_EXECUTOR, {"delay": FAR_FUTURE}),
    (THREAD_POOL, {}),
)
"""Each contender with the submit keywords that keep its tasks pending (its one worker is busy)."""


def run(sizes: Sizes, progress: Progress) -> Measurement:
    """Trace ``sizes.memory_tasks`` pending tasks per contender and repetition."""
    tasks = sizes.memory_tasks
    trials = [
        Trial(pool.name, pool.name, partial(bytes_per_pending_task, pool, hold, tasks))
        for pool, hold in HOLDS
    ]
    samples, notes = interleave(trials, sizes.repetitions, progress)
    note = f"{tasks:,} tasks: PE's delayed by {FAR_FUTURE:g} s, TPE's behind a blocked worker"
    return Measurement("B/task", samples, [note, *notes], {"tasks": tasks})


def judge(measurement: Measurement) -> list[Row]:
    """A pending PE task must not cost more than a queued TPE one."""
    return [
        anchor_row(
            measurement,
            VARIANT,
            label="",
            baseline=TPE,
            target="PE <= 1.0x TPE",
            verdict=lambda medians: medians[PE] <= medians[TPE],
        )
    ]


def bytes_per_pending_task(pool: Pool, hold: Mapping[str, object], tasks: int) -> dict[str, float]:
    """Live bytes added per task by ``tasks`` submits that stay pending (futures dropped)."""
    with running(pool, 1) as executor, worker_blocked(executor), tracing_memory():
        before = live_bytes()
        with gc_paused():
            for _ in range(tasks):
                executor.submit(noop, **hold)
        after = live_bytes()
    return {VARIANT: (after - before) / tasks}
