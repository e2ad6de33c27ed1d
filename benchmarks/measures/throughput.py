"""Measures 1 and 2: no-op throughput, from the first submit to the last task done.

With a no-op task the executor's own cost is all there is: the submit path, the handoff to a
worker and the completion of the future. PE is compared with ThreadPoolExecutor, which it
replaces, and with the handoff floor, which no thread pool can beat.

Both measures are one experiment: PE with plain submits (measure 1) and PE with random
priorities (measure 2) are interleaved with the same TPE and floor runs, which get the same
plain calls in either case. Each measure then views its own PE beside those.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from benchmarks.config import SEED, Sizes
from benchmarks.pools import FLOOR, PRIORITY_EXECUTOR, THREAD_POOL, Pool, Submit, noop, running
from benchmarks.results import PE, TPE, Measurement, Row, anchor_row
from benchmarks.runner import Progress, Trial, interleave, wait_all

WORKER_COUNTS = (1, 4)
PRIORITIES = (-10, 10)
"""Bounds of the random priorities of measure 2, both included."""


@dataclass(frozen=True)
class Contender:
    """A series of the experiment: which pool, and whether its submits carry priorities."""

    series: str
    pool: Pool
    prioritized: bool = False


PE_PRIORITIZED = "PE, random priorities"
CONTENDERS = (
    Contender(PE, PRIORITY_EXECUTOR),
    Contender(PE_PRIORITIZED, PRIORITY_EXECUTOR, prioritized=True),
    Contender(TPE, THREAD_POOL),
    Contender(FLOOR.name, FLOOR),
)
PLAIN_VIEW = {PE: PE, TPE: TPE, FLOOR.name: FLOOR.name}
"""Measure 1's series, by their name in the experiment."""
PRIORITIZED_VIEW = {PE_PRIORITIZED: PE, TPE: TPE, FLOOR.name: FLOOR.name}
"""Measure 2's series: the prioritized PE runs stand as PE."""


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
        for contender in CONTENDERS
    ]
    samples, notes = interleave(trials, sizes.repetitions, progress)
    note = (
        f"{tasks:,} no-op tasks per run; priorities seeded, in [{PRIORITIES[0]}, {PRIORITIES[1]}]"
    )
    return Measurement("tasks/s", samples, [note, *notes], {"tasks": tasks})


def judge(measurement: Measurement, *, min_ratio: float) -> list[Row]:
    """One row per worker count: PE must reach ``min_ratio`` times TPE's throughput."""
    return [
        anchor_row(
            measurement,
            workers_label(workers),
            label=workers_label(workers),
            baseline=TPE,
            target=f"PE >= {min_ratio}x TPE",
            verdict=lambda medians: medians[PE] >= min_ratio * medians[TPE],
        )
        for workers in WORKER_COUNTS
    ]


def tasks_per_second(
    pool: Pool, workers: int, tasks: int, priorities: Sequence[int] | None
) -> dict[str, float]:
    """Submit ``tasks`` no-ops to idle started workers and wait for all; return tasks/s.

    With ``priorities``, the i-th submit carries the i-th priority (there must be ``tasks``).
    """
    with running(pool, workers) as executor:
        submit: Submit = executor.submit
        start = time.perf_counter()
        if priorities is None:
            futures = [submit(noop) for _ in range(tasks)]
        else:
            futures = [submit(noop, priority=priority) for priority in priorities]
        wait_all(futures)
        elapsed = time.perf_counter() - start
    return {workers_label(workers): tasks / elapsed}


def workers_label(workers: int) -> str:
    """``"1 worker"``, ``"4 workers"``."""
    return f"{workers} worker" if workers == 1 else f"{workers} workers"
