"""Measures 22-24 (``--only calendar``): 10,000 calendar series (2,000 in a quick run),
beside as many interval series and beside APScheduler 3 running the same cron jobs.

Three contenders in each: PE with a ``Cron`` series each (a mix of expressions, one
``Cron`` object per series, as a user writes them), PE with interval series
(``interval=60``), and APScheduler's ``BackgroundScheduler`` with a ``CronTrigger`` job
per series, the same expressions in UTC.

- Measure 22, memory: live bytes per waiting series, traced with tracemalloc as measure 6
  does; the series are due in an hour, so none runs while they are counted.
- Measure 23, idle CPU: process CPU time while the series wait (first runs an hour away).
  A PE series that waits for a wall-clock time makes the promoter wake every
  ``WallTime.PERIOD`` (1 s) to look for a step of the system clock; an interval series
  waits on the monotonic clock alone, and APScheduler sleeps until its next job. The
  difference between PE's two series is what those wake-ups cost.
- Measure 24, lateness: every series due at one boundary, on the wall clock; each run's
  first line reads ``time.time()``, minus the boundary is its lateness. A full run waits
  for a real minute boundary ("* * * * *"; up to a minute per repetition, so fewer
  repetitions); a ``--quick`` one for the next whole second, with a schedule object of
  its own on PE and ``CronTrigger(second="*")`` on APScheduler. All the series are made
  before the boundary, their first slot pinned to it (``run_at`` half a second before it
  for PE's Cron series: the first slot after that; ``run_at`` the boundary itself for its
  interval series; ``start_date`` half a second before it for APScheduler, which rounds
  it up to the second), so that a slow set-up cannot spread them over two boundaries.

Every trial shuts its executor or scheduler down and checks that none of the threads it
started is left.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from benchmarks.config import FAR_FUTURE, Sizes
from benchmarks.results import PE, Measurement, Row, anchor_row, percentile
from benchmarks.runner import (
    TIMEOUT,
    Progress,
    Trial,
    gc_paused,
    interleave,
    live_bytes,
    tracing_memory,
)

if TYPE_CHECKING:
    from priority_executor import Schedule as PESchedule

UTC = timezone.utc
EXPRESSIONS = ("* * * * *", "*/5 * * * *", "0 * * * *", "30 2 * * *", "0 9 * * MON-FRI")
"""The mix: series ``i`` gets ``EXPRESSIONS[i % 5]``."""
EVERY_MINUTE = EXPRESSIONS[0]
INTERVAL = 60.0
WORKERS = 8
PE_INTERVAL = "PE interval"
APSCHEDULER = "APScheduler"
CONTENDERS = (PE, PE_INTERVAL, APSCHEDULER)
IDLE_PER = 60.0
"""Idle CPU is reported per this many seconds of idleness, whatever the window."""
PIN = 0.5
"""How long before its first slot a calendar series or job is told to start, so that the
first slot after that is the one (see the module's docstring)."""
THREADS_GONE = 5.0
"""Seconds a trial's threads get to end after its shutdown before they count as left."""


# -- the contenders ----------------------------------------------------------------------


class Schedule(Protocol):
    """What a series runs on: a Cron expression, or the quick run's every second."""

    def for_pe(self, index: int) -> PESchedule:
        """The ``interval=`` of PE's series ``index``."""
        ...

    def for_apscheduler(self, index: int, start: datetime) -> Any:
        """APScheduler's trigger for job ``index``, whose first run is at or after ``start``."""
        ...


@dataclass(frozen=True)
class CronMix:
    """Series ``i`` on ``expressions[i % len(expressions)]``, in UTC."""

    expressions: Sequence[str]

    def for_pe(self, index: int) -> PESchedule:
        from priority_executor import Cron

        return Cron(self.expressions[index % len(self.expressions)], tz="UTC")

    def for_apscheduler(self, index: int, start: datetime) -> Any:
        from apscheduler.triggers.cron import CronTrigger

        # The fields as CronTrigger.from_crontab() passes them, which takes no start_date.
        minute, hour, day, month, day_of_week = self.expressions[
            index % len(self.expressions)
        ].split()
        return CronTrigger(
            minute=minute,
            hour=hour,
            day=day,
            month=month,
            day_of_week=day_of_week,
            start_date=start,
            timezone=UTC,
        )


class EverySecond:
    """PE's schedule on the second, which five cron fields cannot give."""

    def next_after(self, moment: datetime) -> datetime:
        return moment.replace(microsecond=0) + timedelta(seconds=1)


class OnTheSecond:
    """Every series on the second: the quick run's boundary."""

    def for_pe(self, index: int) -> PESchedule:
        return EverySecond()

    def for_apscheduler(self, index: int, start: datetime) -> Any:
        from apscheduler.triggers.cron import CronTrigger

        return CronTrigger(second="*", start_date=start, timezone=UTC)


class Contender(Protocol):
    """Holds ``count`` series of one kind; each run calls ``fn(index)``."""

    def add(self, fn: Callable[[int], object], count: int, first: float) -> None:
        """Make ``count`` series whose first run is due at the wall-clock time ``first``,
        a boundary of their schedule (or for an interval series, any time)."""
        ...

    def close(self) -> None:
        """Cancel every series and stop every thread."""
        ...


class PESeries:
    """PE with a series each: on ``schedule`` (``calendar``) or every INTERVAL seconds."""

    def __init__(self, schedule: Schedule, *, calendar: bool) -> None:
        from priority_executor import PriorityExecutor

        self._schedule = schedule if calendar else None
        self._executor = PriorityExecutor(max_workers=WORKERS)

    def add(self, fn: Callable[[int], object], count: int, first: float) -> None:
        submit, schedule = self._executor.submit_recurring, self._schedule
        if schedule is None:
            run_at = datetime.fromtimestamp(first, UTC)
            for index in range(count):
                submit(fn, index, interval=INTERVAL, run_at=run_at)
        else:
            run_at = datetime.fromtimestamp(first - PIN, UTC)  # the first slot after it
            for index in range(count):
                submit(fn, index, interval=schedule.for_pe(index), run_at=run_at)

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


class APSchedulerCron:
    """APScheduler 3's BackgroundScheduler on a pool of WORKERS threads, a cron job each.

    A late run runs however late (a grace time longer than any run here) and missed runs
    are caught up once, as PE's Cron series do by default.
    """

    def __init__(self, schedule: Schedule) -> None:
        from apscheduler.executors.pool import ThreadPoolExecutor as APSchedulerPool
        from apscheduler.schedulers.background import BackgroundScheduler

        self._schedule = schedule
        self._scheduler = BackgroundScheduler(
            timezone=UTC,
            executors={"default": APSchedulerPool(WORKERS)},
            job_defaults={"misfire_grace_time": int(FAR_FUTURE), "coalesce": True},
        )
        self._scheduler.start()

    def add(self, fn: Callable[[int], object], count: int, first: float) -> None:
        # Rounded up to the second by CronTrigger: the first slot at or after it.
        start_date = datetime.fromtimestamp(first - PIN, UTC)
        add_job, schedule = self._scheduler.add_job, self._schedule
        for index in range(count):
            add_job(fn, schedule.for_apscheduler(index, start_date), args=(index,))

    def close(self) -> None:
        self._scheduler.remove_all_jobs()
        self._scheduler.shutdown(wait=True)


MAKERS: dict[str, Callable[[Schedule], Contender]] = {
    PE: partial(PESeries, calendar=True),
    PE_INTERVAL: partial(PESeries, calendar=False),
    APSCHEDULER: APSchedulerCron,
}


@contextmanager
def contender(name: str, schedule: Schedule) -> Iterator[Contender]:
    """A contender, closed on exit; raises if a thread it started outlives its close."""
    before = set(threading.enumerate())
    made = MAKERS[name](schedule)
    try:
        yield made
    finally:
        made.close()
        check_threads_gone(before)


def check_threads_gone(before: set[threading.Thread]) -> None:
    """Raise RuntimeError if a thread started since ``before`` is still alive."""
    give_up = time.monotonic() + THREADS_GONE
    for thread in set(threading.enumerate()) - before:
        thread.join(max(0.0, give_up - time.monotonic()))
    left = [thread.name for thread in set(threading.enumerate()) - before]
    if left:
        raise RuntimeError(f"threads left after shutdown: {', '.join(sorted(left))}")


def ignore(index: int) -> None:
    """A run that does nothing (its series is never due while it is measured)."""


# -- measure 22: memory ------------------------------------------------------------------

MEMORY = "per series"


def run_memory(sizes: Sizes, progress: Progress) -> Measurement:
    """Bytes per waiting series of each contender, ``sizes.calendar_series`` of them."""
    count = sizes.calendar_series
    trials = [
        Trial(name, name, partial(bytes_per_series, name, count, CronMix(EXPRESSIONS)))
        for name in CONTENDERS
    ]
    samples, notes = interleave(trials, sizes.repetitions, progress)
    note = (
        f"{count:,} series each, first due in {FAR_FUTURE:g} s, handles dropped; "
        f"PE's and APScheduler's on {mix_note()}, one Cron or CronTrigger each; "
        f"{PE_INTERVAL}: interval={INTERVAL:g}"
    )
    return Measurement("B/series", samples, [note, *notes], {"series": count})


def judge_memory(measurement: Measurement) -> list[Row]:
    """No target: PE's calendar series beside its interval series and APScheduler's jobs."""
    return [with_ratios(measurement, MEMORY, label="", baselines=(PE_INTERVAL, APSCHEDULER))]


def bytes_per_series(name: str, count: int, schedule: Schedule) -> dict[str, float]:
    """Live bytes added per series by ``count`` series that wait (one made before counting,
    so that whatever the first one sets up, such as the promoter thread, is not counted)."""
    with contender(name, schedule) as made, tracing_memory():
        start = time.time() + FAR_FUTURE
        made.add(ignore, 1, start)
        before = live_bytes()
        with gc_paused():
            made.add(ignore, count, start)
        after = live_bytes()
    return {MEMORY: (after - before) / count}


def mix_note() -> str:
    """The expressions of the mix, quoted, for a note."""
    return " / ".join(f'"{expression}"' for expression in EXPRESSIONS)


# -- measure 23: idle CPU ----------------------------------------------------------------

IDLE = "idle"


def run_idle(sizes: Sizes, progress: Progress) -> Measurement:
    """CPU used by each contender's process over ``sizes.calendar_idle_seconds`` of idleness
    while ``sizes.calendar_series`` series wait."""
    count, seconds = sizes.calendar_series, sizes.calendar_idle_seconds
    trials = [
        Trial(name, name, partial(idle_cpu, name, count, seconds, CronMix(EXPRESSIONS)))
        for name in CONTENDERS
    ]
    samples, notes = interleave(trials, sizes.repetitions, progress)
    notes.insert(
        0,
        f"{count:,} series each (as in measure 22), first due in {FAR_FUTURE:g} s; "
        f"{seconds:g} s idle, CPU time of the whole process scaled to {IDLE_PER:g} s",
    )
    medians = Measurement("", samples).medians(IDLE)
    if PE in medians and PE_INTERVAL in medians:
        period = wall_period()
        extra = (medians[PE] - medians[PE_INTERVAL]) / (IDLE_PER / period) * 1e3
        notes.append(
            f"PE's promoter wakes every {period:g} s while a calendar series waits "
            f"(WallTime.PERIOD): {extra:.0f} us a wake-up over {PE_INTERVAL}'s, from the medians"
        )
    unit = f"CPU ms/{IDLE_PER:g} s"
    return Measurement(unit, samples, notes, {"series": count, "idle_s": seconds})


def judge_idle(measurement: Measurement) -> list[Row]:
    """No target: what PE's wall-clock wake-ups cost beside APScheduler's idle scheduler."""
    return [with_ratios(measurement, IDLE, label="", baselines=(PE_INTERVAL, APSCHEDULER))]


def idle_cpu(name: str, count: int, seconds: float, schedule: Schedule) -> dict[str, float]:
    """Process CPU milliseconds over ``seconds`` of idleness, per IDLE_PER seconds."""
    with contender(name, schedule) as made:
        with gc_paused():
            made.add(ignore, count, time.time() + FAR_FUTURE)
        start = time.process_time()
        time.sleep(seconds)  # the idleness under measure
        used = time.process_time() - start
    return {IDLE: used * 1e3 * IDLE_PER / seconds}


def wall_period() -> float:
    """How often PE's promoter looks for a step of the wall clock while a series waits for
    a wall-clock time (imported when a measure runs, as every contender is)."""
    from priority_executor._clock import WallTime

    return WallTime.PERIOD


# -- measure 24: lateness at the boundary ------------------------------------------------

PERCENTILES = ("p50", "p99", "max")
EARLY = "early"
SETUP = "setup_s"


def run_lateness(sizes: Sizes, progress: Progress) -> Measurement:
    """Lateness of the first run of ``sizes.calendar_series`` series all due at one
    boundary, every ``sizes.calendar_boundary_s`` seconds of the wall clock."""
    count, period = sizes.calendar_series, sizes.calendar_boundary_s
    lead = sizes.calendar_lead_s
    schedule: Schedule
    if period == 60.0:
        schedule, what = CronMix([EVERY_MINUTE]), f'the minute boundary, "{EVERY_MINUTE}"'
    elif period == 1.0:
        schedule = OnTheSecond()
        what = (
            "the next whole second (a quick run: a schedule object on the second for PE, "
            'CronTrigger(second="*") for APScheduler), not a minute boundary'
        )
    else:
        raise ValueError(f"calendar_boundary_s must be 60 or 1, not {period:g}")
    trials = [
        Trial(name, name, partial(boundary_lateness, name, count, period, lead, schedule))
        for name in CONTENDERS
    ]
    samples, notes = interleave(trials, sizes.calendar_boundary_repetitions, progress)
    notes.insert(
        0,
        f"{count:,} series each, all first due at {what}; {WORKERS} workers; "
        f"{PE_INTERVAL}: interval={INTERVAL:g}, run_at=the boundary; lateness = time.time() "
        f"at a run's start minus the boundary; {sizes.calendar_boundary_repetitions} "
        "repetitions",
    )
    for series, early in samples.pop(EARLY, {}).items():
        if any(early):
            notes.append(f"{series}: up to {max(early):,.0f} runs started before the boundary")
    for series, seconds in samples.pop(SETUP, {}).items():
        notes.append(f"{series}: series made in {min(seconds):.2f}-{max(seconds):.2f} s")
    parameters = {"series": count, "boundary_s": period, "lead_s": lead}
    return Measurement("ms", samples, notes, parameters)


def judge_lateness(measurement: Measurement) -> list[Row]:
    """No target: p50, p99 and max of each, PE's beside its interval series' and APScheduler's."""
    return [
        with_ratios(measurement, variant, label=variant, baselines=(PE_INTERVAL, APSCHEDULER))
        for variant in PERCENTILES
    ]


def boundary_lateness(
    name: str, count: int, period: float, lead: float, schedule: Schedule
) -> dict[str, float]:
    """Make ``count`` series due at the first boundary at least ``lead`` seconds away, wait
    for their first runs, and return their lateness in ms."""
    boundary = next_boundary(period, lead)
    log = FirstRuns(count)
    with contender(name, schedule) as made:
        began = time.time()
        with gc_paused():
            made.add(log.record, count, boundary)
        ended = time.time()
        if ended >= boundary - PIN:
            raise TimeoutError(
                f"making {count:,} series took {ended - began:.1f} s, past the time their "
                f"first runs are pinned to: calendar_lead_s={lead:g} is too short here"
            )
        if not log.all_started.wait(boundary - time.time() + TIMEOUT):
            raise TimeoutError(f"not every series ran within {TIMEOUT:g} s of the boundary")
    late = [(start - boundary) * 1e3 for start in log.starts]
    return {
        "p50": percentile(late, 50),
        "p99": percentile(late, 99),
        "max": max(late),
        EARLY: sum(1 for value in late if value < 0),
        SETUP: ended - began,
    }


def next_boundary(period: float, lead: float) -> float:
    """The first multiple of ``period`` seconds of the wall clock at least ``lead`` s away."""
    return math.ceil((time.time() + lead) / period) * period


class FirstRuns:
    """The wall time of each series' first run, and an Event set once every series ran.

    Later runs of a series (on the second, a quick run's series run again before they are
    cancelled) are not counted.
    """

    def __init__(self, series: int) -> None:
        self.starts = [math.nan] * series
        self.all_started = threading.Event()
        self._left = series
        self._lock = threading.Lock()

    def record(self, index: int) -> None:
        """The run itself: note the time first, then count down."""
        now = time.time()
        if not math.isnan(self.starts[index]):
            return  # a series' runs never overlap: its first one has returned
        self.starts[index] = now
        with self._lock:
            self._left -= 1
            if not self._left:
                self.all_started.set()


# -- rows --------------------------------------------------------------------------------


def with_ratios(
    measurement: Measurement, variant: str, *, label: str, baselines: Sequence[str]
) -> Row:
    """The anchor row of ``variant`` with PE's ratio to each of ``baselines``."""
    row = anchor_row(measurement, variant, label=label, baseline=baselines[0])
    medians = measurement.medians(variant)
    pe = medians.get(PE)
    ratios = [
        f"{pe / medians[name]:.2f}x {name}" if pe is not None and medians.get(name) else "n/a"
        for name in baselines
    ]
    return replace(row, ratio=", ".join(ratios))
