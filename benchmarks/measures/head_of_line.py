"""Measure 12: throughput of other tasks beside a lane that holds a throttled backlog.

Before the timed tasks are submitted, as many wait in a lane limited to one start a second:
all but the first are throttled. The contract says a throttled task holds back no task of
another lane, so the timed no-ops, in a lane of their own or submitted plainly, should run as
fast as on the same executor without that backlog. A scheduler that scans past throttled
tasks, or keeps them in the heap the workers pop from, pays for them on every start instead.

The cyclic GC is frozen (``gc.freeze``) over the timed part on both sides. Otherwise its full
collections scan the held tasks again, which costs as much for 10k far-future plain tasks as
for 10k throttled ones (about 0.88x each in an ad-hoc A/B) and says nothing about head-of-line
blocking. Shutting down with ``cancel_futures=True`` must then drop the backlog: a throttled
future still pending once shutdown returns fails the trial.
"""

from __future__ import annotations

from concurrent.futures import Future
from functools import partial
from typing import Any

from benchmarks.config import Sizes
from benchmarks.pools import PRIORITY_EXECUTOR, Submit, lane, noop, running
from benchmarks.results import PE, Measurement, Row, anchor_row
from benchmarks.runner import Progress, Trial, completion_rate, gc_frozen, gc_paused, interleave

WORKERS = 4
MAX_STARTS = 1
PER = 1.0
MIN_RATIO = 0.9
REPETITIONS_FACTOR = 3
"""A timed run lasts about 0.2 s, no longer than the machine's hiccups: more repetitions steady
the medians, at little cost."""
ALONE = "PE alone"
OTHER_LANE = "in another lane"
PLAIN = "plain submits"


def run(sizes: Sizes, progress: Progress) -> Measurement:
    """Each way of submitting the timed tasks, beside the throttled backlog and without it."""
    tasks = sizes.head_of_line_tasks
    trials = [
        Trial(
            series, f"{series}, {variant}", partial(tasks_per_second, tasks, variant, beside=beside)
        )
        for variant in (OTHER_LANE, PLAIN)
        for series, beside in ((PE, True), (ALONE, False))
    ]
    repetitions = REPETITIONS_FACTOR * sizes.repetitions
    samples, notes = interleave(trials, repetitions, progress)
    note = (
        f"{tasks:,} no-op tasks timed, {WORKERS} workers, {repetitions} repetitions, GC frozen; "
        f"PE: after {tasks:,} tasks queued in a lane of max_starts={MAX_STARTS} per {PER:g} s, "
        f"dropped at shutdown; {ALONE}: without them"
    )
    return Measurement("tasks/s", samples, [note, *notes], {"tasks": tasks})


def judge(measurement: Measurement) -> list[Row]:
    """Beside the backlog, the other tasks must keep ``MIN_RATIO`` of their throughput."""
    return [
        anchor_row(
            measurement,
            variant,
            label=variant,
            baseline=ALONE,
            target=f"PE >= {MIN_RATIO}x {ALONE}",
            verdict=lambda medians: medians[PE] >= MIN_RATIO * medians[ALONE],
        )
        for variant in (OTHER_LANE, PLAIN)
    ]


def tasks_per_second(tasks: int, variant: str, *, beside: bool) -> dict[str, float]:
    """Tasks/s of ``tasks`` no-ops submitted the ``variant`` way, ``beside`` the backlog or not.

    Raises RuntimeError when shutdown left a throttled task neither run nor cancelled.
    """
    held: list[Future[Any]] = []
    with running(PRIORITY_EXECUTOR, WORKERS) as executor:
        if beside:
            throttled = lane(executor, "throttled", max_starts=MAX_STARTS, per=PER)
            with gc_paused():
                held = [throttled.submit(noop) for _ in range(tasks)]
        submit: Submit = (
            lane(executor, "other").submit if variant == OTHER_LANE else executor.submit
        )
        # Collections that scan the held tasks again would cost the same beside any 10k live
        # futures, throttled or not: frozen, on both sides, they leave throttling's own cost.
        with gc_frozen():
            rate = completion_rate(lambda: [submit(noop) for _ in range(tasks)])
    pending = sum(not future.done() for future in held)
    if pending:
        raise RuntimeError(f"{pending:,} throttled tasks still pending after shutdown")
    return {variant: rate}
