"""Measures 4, 5 and 17: lateness of delayed tasks, the time from their due time to their start.

Tasks get seeded random delays in [0, window]; each one reads the runner's clock as its first
line. Measure 4 runs them alone; measure 5 runs them beside a backlog of tasks due in an hour,
which a scheduler that scans or re-sorts its pending tasks pays for on every due task;
measure 17 runs ten times as many in the same window, 50,000 due a second, which a scheduler
that spends more than 20 us on a due task cannot keep up with: its lateness then grows
through the window instead of staying flat.

In measures 4 and 5 a delay counts from its own submit, so tasks come due while the loop
still submits: lateness with a busy producer. Measure 17 submits every task first, each due
at a fixed offset from one start ``sizes.rate_lateness_lead`` seconds ahead, so that every
contender faces the same 50,000 due tasks a second, however fast its submits are. (With
delays counted from each submit, a contender whose submits slow down as tasks come due
spreads its own load: PE's loop, which hands the GIL to the workers whenever a submit
promotes a due task, took about 6 s for 100k submits, and faced some 17,000 due a second.)
Each repetition also reports how long the submits took (``submit_s``); a submit that came
after its task's due time is noted, as it makes that task due later than planned.

Measures 4 and 17 also run PE with the cyclic GC paused for the whole repetition ("PE no
GC"): every submit creates a ``Future``, objects the GC tracks, and a full collection stops
every thread; the difference is what the collector costs.
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Sequence
from functools import partial
from typing import Callable

from benchmarks.config import FAR_FUTURE, SEED, Sizes
from benchmarks.pools import noop
from benchmarks.results import PE, Measurement, Row, Verdict, anchor_row, percentile
from benchmarks.runner import TIMEOUT, Progress, Trial, gc_paused, interleave
from benchmarks.schedulers import APSCHEDULER, PRIORITY_EXECUTOR, SCHED_POOL, TIMER, Scheduler

WORKERS = 4
PE_GC_PAUSED = f"{PE} no GC"
SUBMIT_SECONDS = "submit_s"
LATE_SUBMITS = "late_submits"


def run_alone(sizes: Sizes, progress: Progress) -> Measurement:
    """Measure 4: every contender; the Timer one with at most ``TIMER.max_pending`` tasks."""
    schedulers = (PRIORITY_EXECUTOR, SCHED_POOL, APSCHEDULER, TIMER)
    delays = seeded_delays(sizes.lateness_tasks, sizes.lateness_window)
    return _measure(sizes, progress, schedulers, delays, backlog=0, gc_paused_too=True)


def run_beside_backlog(sizes: Sizes, progress: Progress) -> Measurement:
    """Measure 5: PE and sched+pool, each also holding ``sizes.backlog_tasks`` far-future tasks."""
    delays = seeded_delays(sizes.lateness_tasks, sizes.lateness_window)
    schedulers = (PRIORITY_EXECUTOR, SCHED_POOL)
    measurement = _measure(sizes, progress, schedulers, delays, sizes.backlog_tasks)
    measurement.notes.append(
        "APScheduler left out (it adds ~12k jobs/s, so the backlog alone would cost it seconds "
        "per repetition); Timer too (a thread per pending task)"
    )
    return measurement


def run_at_rate(sizes: Sizes, progress: Progress) -> Measurement:
    """Measure 17: PE and sched+pool, ``sizes.rate_lateness_tasks`` due in a short window
    that starts once every task is submitted."""
    delays = seeded_delays(sizes.rate_lateness_tasks, sizes.rate_lateness_window)
    schedulers = (PRIORITY_EXECUTOR, SCHED_POOL)
    lead = sizes.rate_lateness_lead
    measurement = _measure(
        sizes, progress, schedulers, delays, backlog=0, gc_paused_too=True, lead=lead
    )
    rate = sizes.rate_lateness_tasks / sizes.rate_lateness_window
    measurement.notes.append(
        f"{rate:,.0f} due a second, from {lead:g} s after the first submit; "
        "APScheduler and Timer left out (see measure 5)"
    )
    for series, seconds in measurement.samples.pop(SUBMIT_SECONDS, {}).items():
        measurement.notes.append(
            f"{series}: {len(seconds)} repetitions submitted in {min(seconds):.2f}-"
            f"{max(seconds):.2f} s"
        )
    for series, late in measurement.samples.pop(LATE_SUBMITS, {}).items():
        if any(late):
            measurement.notes.append(
                f"{series}: {max(late):,.0f} submits came after their task's due time "
                "(the lead is too short for this machine)"
            )
    return measurement


def judge_alone(measurement: Measurement) -> list[Row]:
    """PE's p99 must be within 2 ms and no more than sched+pool's."""
    return _judge(
        measurement,
        target=f"PE p99 <= 2 ms and <= {SCHED_POOL.name}",
        verdict=lambda p99: p99[PE] <= 2.0 and p99[PE] <= p99[SCHED_POOL.name],
    )


def judge_beside_backlog(measurement: Measurement) -> list[Row]:
    """PE's p99 must stay within 5 ms despite the backlog."""
    return _judge(measurement, target="PE p99 <= 5 ms", verdict=lambda p99: p99[PE] <= 5.0)


def judge_at_rate(measurement: Measurement) -> list[Row]:
    """PE's p99 must stay within 50 ms: it keeps up with the due tasks."""
    return _judge(measurement, target="PE p99 <= 50 ms", verdict=lambda p99: p99[PE] <= 50.0)


def lateness(
    scheduler: Scheduler,
    delays: Sequence[float],
    backlog: int,
    gc_off: bool = False,
    lead: float | None = None,
) -> dict[str, float]:
    """p50 and p99 lateness, in ms, of one task per delay, after ``backlog`` far-future tasks;
    ``gc_off``: with the cyclic GC paused throughout. Each delay counts from its task's
    submit; with a ``lead``, from one start that many seconds after the first submit (then
    also ``submit_s``, the seconds the submits took, and ``late_submits``)."""
    if gc_off:
        with gc_paused():
            return lateness(scheduler, delays, backlog, lead=lead)
    runner = scheduler.make(WORKERS)
    clock = runner.clock
    try:
        with gc_paused():
            for _ in range(backlog):
                runner.schedule(FAR_FUTURE, noop)
        log = StartLog(len(delays), clock)
        began = clock()
        late_submits = 0
        if lead is None:
            dues = [runner.schedule(delay, log.record, i) for i, delay in enumerate(delays)]
        else:
            window_opens, dues = began + lead, []
            for i, delay in enumerate(delays):
                wait = window_opens + delay - clock()
                if wait < 0:
                    late_submits += 1
                dues.append(runner.schedule(max(0.0, wait), log.record, i))
        submitted = clock() - began
        if not log.all_started.wait(max(delays) + (lead or 0.0) + TIMEOUT):
            raise TimeoutError("not every delayed task started")
    finally:
        runner.close()
    late = [(start - due) * 1e3 for start, due in zip(log.starts, dues)]
    figures = {"p50": percentile(late, 50), "p99": percentile(late, 99)}
    if lead is not None:
        figures[SUBMIT_SECONDS] = submitted
        figures[LATE_SUBMITS] = late_submits
    return figures


def seeded_delays(tasks: int, window: float) -> list[float]:
    """``tasks`` random delays in [0, ``window``] seconds, the same ones in every run."""
    rng = random.Random(SEED)
    return [rng.uniform(0, window) for _ in range(tasks)]


class StartLog:
    """Each task's start on the runner's clock, and an Event set once the last one started."""

    def __init__(self, tasks: int, clock: Callable[[], float]) -> None:
        self.starts = [math.nan] * tasks
        self.all_started = threading.Event()
        self._clock = clock
        self._left = tasks
        self._lock = threading.Lock()

    def record(self, index: int) -> None:
        """The task itself: note the time first, then count down."""
        self.starts[index] = self._clock()
        with self._lock:
            self._left -= 1
            if not self._left:
                self.all_started.set()


def _measure(
    sizes: Sizes,
    progress: Progress,
    schedulers: Sequence[Scheduler],
    delays: Sequence[float],
    backlog: int,
    gc_paused_too: bool = False,
    lead: float | None = None,
) -> Measurement:
    window = max(delays)
    notes = [f"{len(delays):,} tasks, delays in [0, {window:.3g} s], {WORKERS} workers"]
    trials = []
    for scheduler in schedulers:
        own = delays[: scheduler.max_pending]  # the same delays, the first ones when capped
        if len(own) < len(delays):
            notes.append(f"{scheduler.name}: {len(own):,} tasks only, as a thread each")
        run = partial(lateness, scheduler, own, backlog, lead=lead)
        trials.append(Trial(scheduler.name, scheduler.name, run))
    if gc_paused_too:
        run = partial(lateness, PRIORITY_EXECUTOR, delays, backlog, gc_off=True, lead=lead)
        trials.append(Trial(PE_GC_PAUSED, PE_GC_PAUSED, run))
        notes.append(f"{PE_GC_PAUSED}: PE with the cyclic GC paused for the whole repetition")
    samples, failures = interleave(trials, sizes.repetitions, progress)
    parameters = {"tasks": len(delays), "window_s": window, "backlog": backlog}
    if lead is not None:
        parameters["lead_s"] = lead
    return Measurement("ms", samples, notes + failures, parameters)


def _judge(measurement: Measurement, *, target: str, verdict: Verdict) -> list[Row]:
    return [
        anchor_row(measurement, "p50", label="p50", baseline=SCHED_POOL.name),
        anchor_row(
            measurement,
            "p99",
            label="p99",
            baseline=SCHED_POOL.name,
            target=target,
            verdict=verdict,
        ),
    ]
