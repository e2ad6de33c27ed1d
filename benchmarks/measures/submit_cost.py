"""Measure 9: the cost of one delayed submit barely grows with the number of pending tasks.

A heap makes a submit O(log n); a sorted list, O(n). Two executors are filled once, one with
few and one with many tasks due between one and two hours from now; each repetition times a
batch of further submits into each, then cancels the batch to restore the backlog.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from concurrent.futures import Executor
from contextlib import ExitStack
from functools import partial
from typing import Callable

from benchmarks.config import FAR_FUTURE, SEED, Sizes
from benchmarks.pools import PRIORITY_EXECUTOR, Submit, noop, running
from benchmarks.results import PE, Measurement, Row
from benchmarks.runner import Progress, Trial, gc_frozen, gc_paused, interleave

WORKERS = 4
MAX_RATIO = 1.5


def run(sizes: Sizes, progress: Progress) -> Measurement:
    """Time ``sizes.submit_batch`` submits beside a small and a large backlog, interleaved."""
    rng = random.Random(SEED)
    batch = far_delays(rng, sizes.submit_batch)
    with ExitStack() as stack:
        trials = []
        for pending in (sizes.submit_pending_small, sizes.submit_pending_large):
            progress(f"filling PE with {pending:,} pending tasks")
            executor = stack.enter_context(running(PRIORITY_EXECUTOR, WORKERS))
            submit: Submit = executor.submit
            with gc_paused():
                for delay in far_delays(rng, pending):
                    submit(noop, delay=delay)
            label = pending_label(pending)
            trials.append(Trial(PE, f"PE, {label}", partial(submit_micros, executor, label, batch)))
        with gc_frozen():
            samples, notes = interleave(trials, sizes.repetitions, progress)
        progress("cancelling the backlogs")
    parameters = {
        "pending_small": sizes.submit_pending_small,
        "pending_large": sizes.submit_pending_large,
        "batch": sizes.submit_batch,
    }
    note = f"{len(batch):,} submits per batch, delays in [{FAR_FUTURE:g}, {2 * FAR_FUTURE:g}] s"
    return Measurement("µs", samples, [note, *notes], parameters)


def judge(measurement: Measurement) -> list[Row]:
    """A submit beside the large backlog must cost at most 1.5 times one beside the small one."""
    small_label = pending_label(int(measurement.parameters.get("pending_small", 0)))
    large_label = pending_label(int(measurement.parameters.get("pending_large", 0)))
    small = measurement.medians(small_label).get(PE)
    large = measurement.medians(large_label).get(PE)
    ratio = large / small if small and large is not None else None
    return [
        Row(
            measure=f"{large_label} vs {small_label}" if measurement.parameters else "",
            pe=f"{measurement.format(large)} vs {measurement.format(small)}",
            tpe="-",
            others="-",
            ratio=f"{ratio:.2f}x" if ratio is not None else "n/a",
            target=f"ratio <= {MAX_RATIO:g}",
            met=ratio <= MAX_RATIO if ratio is not None else None,
        )
    ]


def submit_micros(
    executor: Executor,
    variant: str,
    delays: Sequence[float | None],
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, float]:
    """Microseconds per submit over one batch, each with its delay (None: a plain submit, due
    at once), timed on ``clock``; the batch is cancelled afterwards."""
    submit: Submit = executor.submit
    start = clock()
    futures = [submit(noop, delay=delay) for delay in delays]
    elapsed = clock() - start
    for future in futures:
        future.cancel()
    return {variant: elapsed / len(delays) * 1e6}


def far_delays(rng: random.Random, count: int) -> list[float]:
    """``count`` seeded delays between one and two FAR_FUTUREs: never due, in random order."""
    return [FAR_FUTURE * (1 + rng.random()) for _ in range(count)]


def pending_label(pending: int) -> str:
    """``"10,000 pending"``."""
    return f"{pending:,} pending"
