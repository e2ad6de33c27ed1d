"""Measure 7: CPU time an idle PE burns while it holds many far-future tasks.

A scheduler that polls, or wakes up on a timer to look at its heap, burns CPU for nothing;
one that sleeps until its next due time burns none. ``time.process_time`` counts every
thread of the process, and the only other thread is the main one, asleep. The target is
absolute, so no anchor runs beside PE (sched + pool, which sleeps on an Event, shows ~40 µs).
"""

from __future__ import annotations

import time
from functools import partial

from benchmarks.config import FAR_FUTURE, Sizes
from benchmarks.pools import noop
from benchmarks.results import PE, Measurement, Row, anchor_row
from benchmarks.runner import Progress, Trial, gc_paused, interleave
from benchmarks.schedulers import PRIORITY_EXECUTOR, Scheduler

VARIANT = "idle"
WORKERS = 4
REFERENCE_SECONDS = 3.0
"""Figures are CPU milliseconds per this much idleness (a --quick run idles less, scales up)."""
LIMIT_MS = 50.0


def run(sizes: Sizes, progress: Progress) -> Measurement:
    """Hold ``sizes.idle_tasks`` far-future tasks, then idle for ``sizes.idle_seconds``."""
    tasks, seconds = sizes.idle_tasks, sizes.idle_seconds
    trial = Trial(PE, PE, partial(idle_cpu, PRIORITY_EXECUTOR, tasks, seconds))
    samples, notes = interleave([trial], sizes.repetitions, progress)
    note = f"{tasks:,} tasks due in {FAR_FUTURE:g} s, then {seconds:g} s idle"
    if seconds != REFERENCE_SECONDS:
        note += f", CPU scaled to {REFERENCE_SECONDS:g} s"
    parameters = {"tasks": tasks, "idle_s": seconds}
    unit = f"CPU ms/{REFERENCE_SECONDS:g} s"
    return Measurement(unit, samples, [note, *notes], parameters)


def judge(measurement: Measurement) -> list[Row]:
    """PE must use under 50 ms of CPU in 3 s of idleness."""
    return [
        anchor_row(
            measurement,
            VARIANT,
            label="",
            baseline=None,
            target=f"< {LIMIT_MS:g} ms (0.05 s)",
            verdict=lambda medians: medians[PE] < LIMIT_MS,
        )
    ]


def idle_cpu(scheduler: Scheduler, tasks: int, seconds: float) -> dict[str, float]:
    """Process CPU milliseconds over ``seconds`` of idleness, per REFERENCE_SECONDS."""
    runner = scheduler.make(WORKERS)
    try:
        with gc_paused():
            for _ in range(tasks):
                runner.schedule(FAR_FUTURE, noop)
        start = time.process_time()
        time.sleep(seconds)  # the idleness under measure
        used = time.process_time() - start
    finally:
        runner.close()
    return {VARIANT: used * 1e3 * REFERENCE_SECONDS / seconds}
