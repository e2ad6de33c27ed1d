"""Measure 13: how closely a lane keeps a start-rate limit of 100 starts per 1 s window.

Enough tasks for ``sizes.rate_seconds`` of starts are queued in the lane at once, so the limit
alone paces them. Each task reads ``time.monotonic``, the executor's clock, as its first line.
Three figures come of those starts. The most starts in any window of 1 s (sliding, so every start
opens one) may not exceed 100: it is judged on the worst repetition, since one window over is a
broken promise. But a task reads the clock some time after the executor let it start, not
equally late every time: up to a GIL switch interval, or more, when its thread waits for the GIL
in between. So 101 starts can seem to fall within 1 s when the start times the executor itself
records (read in an ad-hoc probe) never do. The same count is taken over windows shorter by
``SLACK`` too, which that jitter alone should not break. The sustained rate, the starts after
the first window's 100 per second from the first start to the last, is 100/s for a limiter that
admits each start the moment the window allows it; one that opens late, by polling or
oversleeping, falls short.
"""

from __future__ import annotations

import bisect
import sys
import time
from collections.abc import Sequence
from functools import partial
from typing import Callable

from benchmarks.config import Sizes
from benchmarks.pools import PRIORITY_EXECUTOR, lane, running
from benchmarks.results import PE, Measurement, Row
from benchmarks.runner import Progress, Trial, interleave, wait_all

MAX_STARTS = 100
PER = 1.0
LIMIT = MAX_STARTS / PER
MIN_RATE = 95.0
SLACK = sys.getswitchinterval()
"""How late a task's first line may be beyond another's (seen: over 1 ms) that a window allows."""
STRICT, SLACKED, SUSTAINED = "peak", "peak, slack", "sustained"
WORKERS = 4


def run(sizes: Sizes, progress: Progress) -> Measurement:
    """One PE, as nothing else has lanes: a backlog of ``sizes.rate_seconds`` of starts."""
    windows = round(sizes.rate_seconds / PER)
    tasks = MAX_STARTS * (windows + 1)  # the first window's, then one more per window
    trial = Trial(PE, PE, partial(start_rates, tasks))
    samples, notes = interleave([trial], sizes.repetitions, progress)
    note = (
        f"{tasks:,} no-op tasks queued at once in a lane of max_starts={MAX_STARTS} "
        f"per {PER:g} s, {WORKERS} workers: {windows * PER:g} s of starts"
    )
    parameters = {"tasks": tasks, "seconds": windows * PER}
    return Measurement("starts/s", samples, [note, *notes], parameters)


def judge(measurement: Measurement) -> list[Row]:
    """No window may hold more than the limit; the sustained rate must reach ``MIN_RATE``."""
    sustained = measurement.medians(SUSTAINED).get(PE)
    return [
        *(
            limit_row(
                measurement,
                f"most starts in any {window:g} s window, worst repetition",
                worst(measurement, variant),
                target=f"<= {MAX_STARTS}/{window:g} s",
                met=lambda peak: peak <= LIMIT,
            )
            for variant, window in ((STRICT, PER), (SLACKED, PER - SLACK))
        ),
        limit_row(
            measurement,
            "sustained rate",
            sustained,
            target=f">= {MIN_RATE:g}/s",
            met=lambda rate: rate >= MIN_RATE,
        ),
    ]


def worst(measurement: Measurement, variant: str) -> float | None:
    """PE's highest figure of ``variant`` over the repetitions, if any."""
    values = measurement.samples.get(variant, {}).get(PE)
    return max(values) if values else None


def limit_row(
    measurement: Measurement,
    label: str,
    value: float | None,
    *,
    target: str,
    met: Callable[[float], bool],
) -> Row:
    """A row with PE's figure as a fraction of the limit; no TPE or other anchor to compare."""
    return Row(
        measure=label,
        pe=measurement.format(value),
        tpe="n/a",
        others="-",
        ratio="n/a" if value is None else f"{value / LIMIT:.3f}x limit",
        target=target,
        met=None if value is None else met(value),
    )


def start_rates(tasks: int) -> dict[str, float]:
    """The peak and sustained rates of ``tasks`` no-ops started through the limited lane.

    Raises RuntimeError when a task did not run (its future done, its start not noted).
    """
    starts: list[float] = []

    def note_start() -> None:
        starts.append(time.monotonic())  # list.append is atomic: the workers need no lock

    with running(PRIORITY_EXECUTOR, WORKERS) as executor:
        limited = lane(executor, "limited", max_starts=MAX_STARTS, per=PER)
        wait_all([limited.submit(note_start) for _ in range(tasks)])
    if len(starts) != tasks:
        raise RuntimeError(f"{tasks - len(starts):,} of {tasks:,} tasks never started")
    starts.sort()
    return {
        STRICT: most_starts(starts, PER) / PER,
        SLACKED: most_starts(starts, PER - SLACK) / PER,
        SUSTAINED: (tasks - MAX_STARTS) / (starts[-1] - starts[0]),
    }


def most_starts(starts: Sequence[float], window: float) -> int:
    """The most of the sorted ``starts`` in any span [s, s + ``window``) opened by one of them."""
    return max(bisect.bisect_left(starts, start + window) - i for i, start in enumerate(starts))
