"""Measures 1 and 2: no-op throughput, from the first submit to the last task done.

With a no-op task the executor's own cost is all there is: the submit path, the handoff to a
worker and the completion of the future. PE is compared with ThreadPoolExecutor, which it
replaces, and with the handoff floor, which no thread pool can beat.

Both measures are one experiment: PE with plain submits (measure 1) and PE with random
priorities (measure 2) are interleaved with the same TPE and floor runs, which get the same
plain calls in either case. Each measure then views its own PE beside those. PE at a baseline
revision (``--baseline``), if any, runs both ways too, and is viewed the same way.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from benchmarks.config import SEED, Sizes
from benchmarks.pools import (
    BASELINES,
    FLOOR,
    PRIORITY_EXECUTOR,
    THREAD_POOL,
    Pool,
    Submit,
    all_pools,
    noop,
    running,
)
from benchmarks.results import (
    PE,
    TPE,
    Measurement,
    Row,
    anchor_row,
    baseline_rows,
    with_series,
)
from benchmarks.runner import Progress, Trial, completion_rate, interleave

WORKER_COUNTS = (1, 4)
PRIORITIES = (-10, 10)
"""Bounds of the random priorities of measure 2, both included."""


@dataclass(frozen=True)
class Contender:
    """A series of the experiment: which pool, and whether its submits carry priorities."""

    series: str
    pool: Pool
    prioritized: bool = False


def prioritized(series: str) -> str:
    """The name of the prioritized runs of a PE series: ``"PE, random priorities"``."""
    return f"{series}, random priorities"


def contenders() -> list[Contender]:
    """PE and each baseline revision of it, plain and prioritized; then TPE and the floor."""
    executors = (PRIORITY_EXECUTOR, *BASELINES)
    return [
        *(
            contender
            for pool in executors
            for contender in (
                Contender(pool.name, pool),
                Contender(prioritized(pool.name), pool, prioritized=True),
            )
        ),
        Contender(TPE, THREAD_POOL),
        Contender(FLOOR.name, FLOOR),
    ]


def plain_view(measurement: Measurement) -> Measurement:
    """Measure 1's series: every pool's plain runs, under its own name."""
    return with_series(measurement, {pool.name: pool.name for pool in all_pools()})


def prioritized_view(measurement: Measurement) -> Measurement:
    """Measure 2's series: prioritized runs of PE and its baselines stand as their plain ones."""
    executors = (PRIORITY_EXECUTOR, *BASELINES)
    names = {prioritized(pool.name): pool.name for pool in executors}
    return with_series(measurement, {**names, TPE: TPE, FLOOR.name: FLOOR.name})


def run(sizes: Sizes, progress: Progress) -> Measurement:
    """Every contender at every worker count, ``sizes.throughput_tasks`` no-ops a run."""
    tasks = sizes.throughput_tasks
    rng = random.Random(SEED)
    priorities = [rng.randint(*PRIORITIES) for _ in range(tasks)]
    trials = [
        Trial(
            contender.series,
            f"{contender.series}, {workers_label(workers)}",
            partial(
                tasks_per_second,
                contender.pool,
                workers,
                tasks,
                priorities if contender.prioritized else None,
            ),
        )
        for workers in WORKER_COUNTS
        for contender in contenders()
    ]
    samples, notes = interleave(trials, sizes.repetitions, progress)
    note = (
        f"{tasks:,} no-op tasks per run; priorities seeded, in [{PRIORITIES[0]}, {PRIORITIES[1]}]"
    )
    return Measurement("tasks/s", samples, [note, *notes], {"tasks": tasks})


def judge(measurement: Measurement, *, min_ratio: float, stretch: float | None = None) -> list[Row]:
    """One row per worker count: PE must reach ``min_ratio`` times TPE's throughput; with
    ``stretch``, a row that asks for that share of the floor's.

    After each, a row per baseline revision: PE must keep its throughput, within 5%.
    """
    rows = []
    for workers in WORKER_COUNTS:
        label = workers_label(workers)
        rows.append(
            anchor_row(
                measurement,
                label,
                label=label,
                baseline=TPE,
                target=f"PE >= {min_ratio}x TPE",
                verdict=lambda medians: medians[PE] >= min_ratio * medians[TPE],
            )
        )
        if stretch is not None:
            rows.append(
                anchor_row(
                    measurement,
                    label,
                    label=f"{label}, stretch",
                    baseline=FLOOR.name,
                    target=f"PE >= {stretch}x {FLOOR.name}",
                    verdict=lambda medians: medians[PE] >= stretch * medians[FLOOR.name],
                )
            )
        rows += baseline_rows(measurement, label, label=label, higher_is_better=True)
    return rows


def tasks_per_second(
    pool: Pool, workers: int, tasks: int, priorities: Sequence[int] | None
) -> dict[str, float]:
    """Submit ``tasks`` no-ops to idle started workers and wait for all; return tasks/s.

    With ``priorities``, the i-th submit carries the i-th priority (there must be ``tasks``).
    """
    with running(pool, workers) as executor:
        submit: Submit = executor.submit
        if priorities is None:
            rate = completion_rate(lambda: [submit(noop) for _ in range(tasks)])
        else:
            rate = completion_rate(lambda: [submit(noop, priority=p) for p in priorities])
    return {workers_label(workers): rate}


def workers_label(workers: int) -> str:
    """``"1 worker"``, ``"4 workers"``."""
    return f"{workers} worker" if workers == 1 else f"{workers} workers"
