"""Measure 11: no-op throughput with the tasks spread over 100 lanes of at most 2 running each.

A lane's limits are checked at every start and end of its tasks. With 100 lanes of 2 and only
4 workers no limit is ever reached, so every task can start at once and the lanes' bookkeeping
is all that differs from plain submits. PE with lanes is compared with the same PE (same
workers, same submit loop) without lanes, and with TPE for reference. PE at a baseline
revision (``--baseline``) that has lanes runs with lanes too, in the same loop.
"""

from __future__ import annotations

from functools import partial
from itertools import cycle

from benchmarks.config import Sizes
from benchmarks.measures.throughput import workers_label
from benchmarks.pools import (
    BASELINES,
    PRIORITY_EXECUTOR,
    THREAD_POOL,
    Pool,
    Submit,
    lane,
    noop,
    running,
)
from benchmarks.results import PE, TPE, Measurement, Row, anchor_row, baseline_rows
from benchmarks.runner import Progress, Trial, completion_rate, interleave

LANES = 100
MAX_RUNNING = 2
WORKERS = 4
MIN_RATIO = 0.8
NO_LANES = "PE no lanes"


def run(sizes: Sizes, progress: Progress) -> Measurement:
    """PE with and without lanes, and TPE, ``sizes.throughput_tasks`` no-ops a run."""
    tasks = sizes.throughput_tasks
    trials = [
        Trial(
            PE,
            f"PE, {LANES} lanes",
            partial(tasks_per_second, PRIORITY_EXECUTOR, tasks, in_lanes=True),
        ),
        Trial(
            NO_LANES, NO_LANES, partial(tasks_per_second, PRIORITY_EXECUTOR, tasks, in_lanes=False)
        ),
        Trial(TPE, TPE, partial(tasks_per_second, THREAD_POOL, tasks, in_lanes=False)),
        *(
            Trial(
                pool.name,
                f"{pool.name}, {LANES} lanes",
                partial(tasks_per_second, pool, tasks, in_lanes=True),
            )
            for pool in BASELINES
            if has_lanes(pool)
        ),
    ]
    samples, notes = interleave(trials, sizes.repetitions, progress)
    note = (
        f"{tasks:,} no-op tasks per run, task i in lane t{{i % {LANES}}} "
        f"(max_running={MAX_RUNNING}); the others submit in the same loop"
    )
    return Measurement("tasks/s", samples, [note, *notes], {"tasks": tasks, "lanes": LANES})


def judge(measurement: Measurement) -> list[Row]:
    """PE with lanes must keep ``MIN_RATIO`` of its throughput without them."""
    label = workers_label(WORKERS)
    return [
        anchor_row(
            measurement,
            label,
            label=label,
            baseline=NO_LANES,
            target=f"PE >= {MIN_RATIO}x {NO_LANES}",
            verdict=lambda medians: medians[PE] >= MIN_RATIO * medians[NO_LANES],
        ),
        *baseline_rows(measurement, label, label=label, higher_is_better=True),
    ]


def has_lanes(pool: Pool) -> bool:
    """Whether ``pool``'s executor has lanes (a baseline revision from before them has not)."""
    with running(pool, 1) as executor:
        return hasattr(executor, "lane")


def tasks_per_second(pool: Pool, tasks: int, *, in_lanes: bool) -> dict[str, float]:
    """Submit ``tasks`` no-ops round-robin, to LANES lanes or to the executor; return tasks/s."""
    with running(pool, WORKERS) as executor:
        if in_lanes:
            submits: list[Submit] = [
                lane(executor, f"t{i}", max_running=MAX_RUNNING).submit for i in range(LANES)
            ]
        else:
            # The same round-robin over a list, so that the loop costs the same either way.
            submits = [executor.submit] * LANES
        rate = completion_rate(
            lambda: [submit(noop) for submit, _ in zip(cycle(submits), range(tasks))]
        )
    return {workers_label(WORKERS): rate}
