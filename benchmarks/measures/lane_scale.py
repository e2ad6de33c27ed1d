"""Measure 28: no-op throughput with a tenant per lane, 1,000 lanes, against plain submits.

Two ways of spreading the tasks over 1,000 lanes, in the same run: lanes of
``max_running=2`` (a cap per tenant), and lanes of weights 1 to 4 (fair share, every start
through the shares). Task i goes to lane i % 1,000, so with ``throughput_tasks`` no-ops each
lane gets a handful: what a thousand tenants cost where measure 11 has a hundred. Both are
compared with plain submits to the same PriorityExecutor in the same loop, which is the
anchor of both rows, and with ``ThreadPoolExecutor``'s plain submits for reference.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from benchmarks.config import Sizes
from benchmarks.pools import PRIORITY_EXECUTOR, THREAD_POOL, Pool, Submit, lane, noop, running
from benchmarks.results import PE, TPE, Measurement, Row, anchor_row
from benchmarks.runner import Progress, Trial, completion_rate, interleave

WORKERS = 4
LANES = 1_000
MAX_RUNNING = 2
CAPPED = f"max_running={MAX_RUNNING}"
WEIGHTED = "weights 1-4"
MIN_RATIO = {CAPPED: 0.8, WEIGHTED: 0.7}
PLAIN = "PE plain"


def run(sizes: Sizes, progress: Progress) -> Measurement:
    """PE in capped lanes, in weighted lanes and plain, and TPE, ``throughput_tasks`` a run."""
    tasks = sizes.throughput_tasks
    trials = [
        Trial(PE, f"PE, {CAPPED}", partial(in_lanes, tasks, CAPPED)),
        Trial(PE, f"PE, {WEIGHTED}", partial(in_lanes, tasks, WEIGHTED)),
        Trial(PLAIN, PLAIN, partial(plain, PRIORITY_EXECUTOR, tasks)),
        Trial(TPE, TPE, partial(plain, THREAD_POOL, tasks)),
    ]
    samples, notes = interleave(trials, sizes.repetitions, progress)
    note = (
        f"{tasks:,} no-op tasks per run, {WORKERS} workers, task i in lane i % {LANES:,} "
        f"(max_running={MAX_RUNNING}, or weight 1 + i % 4); {PLAIN} and TPE submit plainly "
        "in the same loop, one run the anchor of both rows"
    )
    return Measurement("tasks/s", samples, [note, *notes], {"tasks": tasks, "lanes": LANES})


def judge(measurement: Measurement) -> list[Row]:
    return [
        anchor_row(
            measurement,
            variant,
            label=variant,
            baseline=PLAIN,
            target=f"PE >= {ratio}x {PLAIN}",
            verdict=partial(at_least, ratio),
        )
        for variant, ratio in MIN_RATIO.items()
    ]


def at_least(ratio: float, medians: Mapping[str, float]) -> bool:
    return medians[PE] >= ratio * medians[PLAIN]


def in_lanes(tasks: int, variant: str) -> dict[str, float]:
    """Tasks/s over LANES lanes made as ``variant`` says."""
    with running(PRIORITY_EXECUTOR, WORKERS) as executor:
        submits = [lane(executor, f"t{i}", **limits(variant, i)).submit for i in range(LANES)]
        return {variant: spread(submits, tasks)}


def plain(pool: Pool, tasks: int) -> dict[str, float]:
    """Tasks/s submitted plainly, in the same loop; the figure anchors both variants."""
    with running(pool, WORKERS) as executor:
        rate = spread([executor.submit] * LANES, tasks)
    return dict.fromkeys(MIN_RATIO, rate)


def limits(variant: str, i: int) -> dict[str, Any]:
    return {"max_running": MAX_RUNNING} if variant == CAPPED else {"weight": 1 + i % 4}


def spread(submits: list[Submit], tasks: int) -> float:
    return completion_rate(lambda: [submits[i % LANES](noop) for i in range(tasks)])
