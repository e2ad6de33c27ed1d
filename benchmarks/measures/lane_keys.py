"""Measures 29-33: a lane per key (a user, a host), by the hundred thousand and the million.

29: the memory an idle named lane with a rate holds (``max_starts=10, per=1.0``), traced
with tracemalloc over ``key_lanes`` lanes that have never run a task (an executor keeps a
lane made with options until its shutdown).

30: that lanes made and left idle cost no thread and no timer: ``idle_lanes`` such lanes
are made, and ``threading.active_count()``, the executor's ``stats()`` (its tasks not
done: scheduled, ready, throttled, running, blocked) and ``waiting()`` are read before
and after (after a pause, so that anything started lazily shows up).

31: no-op throughput with the tasks spread round-robin over ``key_lanes`` lanes, each with a
rate that the run never reaches (``key_tasks`` no-ops, a few per key), against plain submits
to the same executor in the same loop, and ``ThreadPoolExecutor``'s.

32-33: the limit check alone, against the limiter libraries a user would pick instead: a
decision is "may this key start one more now? then count it", made ``DECISIONS_PER_KEY``
times for each of ``limiter_keys`` keys, round-robin, at 2 per second a key (so a third are
refused). PE is the arithmetic a lane runs at each start (``priority_executor._limits.Limits``,
a sliding window), one per key in a dict, as the lane engine keeps one per lane; ``limits``
is its ``MovingWindowRateLimiter`` and ``FixedWindowRateLimiter`` on ``MemoryStorage``;
``pyrate-limiter`` is a ``Limiter`` whose bucket factory gives each key an
``InMemoryBucket`` (no leak task: a key holds at most two items here). 32 is decisions a
second; 33 the live bytes per key after one decision each, traced with tracemalloc.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial
from itertools import cycle
from typing import Any

from benchmarks.config import Sizes
from benchmarks.pools import PRIORITY_EXECUTOR, THREAD_POOL, Pool, Submit, lane, noop, running
from benchmarks.results import PE, TPE, Measurement, Row, anchor_row
from benchmarks.runner import (
    Progress,
    Trial,
    completion_rate,
    gc_paused,
    interleave,
    live_bytes,
    tracing_memory,
)

WORKERS = 4
RATE = {"max_starts": 10, "per": 1.0}
MAX_BYTES = 500
IDLE_PAUSE = 0.5  # seconds after the lanes are made, before counting again
THREADS = "threads"
TASKS = "tasks not done in stats()"
WAITING = "entries in waiting()"
BEFORE = "before"
NOT_DONE = ("scheduled", "ready", "throttled", "running", "blocked")
MIN_RATIO = 0.5
PLAIN = "PE plain"
DECISIONS = "decisions"
BYTES = "bytes per key"
LIMIT, PER = 2, 1.0
DECISIONS_PER_KEY = 3


# 29 --------------------------------------------------------------------------------------


def run_memory(sizes: Sizes, progress: Progress) -> Measurement:
    count = sizes.key_lanes
    trials = [Trial(PE, f"PE, {count:,} idle lanes", partial(bytes_per_lane, count))]
    samples, notes = interleave(trials, sizes.repetitions, progress)
    note = f"{count:,} named lanes made with {rate_text()}, never used"
    return Measurement("B/lane", samples, [note, *notes], {"lanes": count})


def judge_memory(measurement: Measurement) -> list[Row]:
    return [
        anchor_row(
            measurement,
            "idle lane with a rate",
            label="",
            baseline=None,
            target=f"PE <= {MAX_BYTES} B",
            verdict=lambda medians: medians[PE] <= MAX_BYTES,
        )
    ]


def bytes_per_lane(count: int) -> dict[str, float]:
    with running(PRIORITY_EXECUTOR, 2) as executor, tracing_memory():
        lane(executor, "warm-up", **RATE)
        before = live_bytes()
        with gc_paused():
            for i in range(count):
                lane(executor, f"key-{i}", **RATE)
        after = live_bytes()
    return {"idle lane with a rate": (after - before) / count}


# 30 --------------------------------------------------------------------------------------


def run_idle(sizes: Sizes, progress: Progress) -> Measurement:
    count = sizes.idle_lanes
    trials = [Trial(PE, f"PE, {count:,} idle lanes", partial(idle_counts, count))]
    samples, notes = interleave(trials, 1, progress)  # counts: one run says it
    note = (
        f"{count:,} named lanes made with {rate_text()} and left idle, {WORKERS} workers; "
        f"counted before ({BEFORE}) and {IDLE_PAUSE:g} s after"
    )
    return Measurement("", samples, [note, *notes], {"lanes": count})


def judge_idle(measurement: Measurement) -> list[Row]:
    return [
        anchor_row(
            measurement,
            variant,
            label=variant,
            baseline=None,
            target=f"PE = {BEFORE}",
            verdict=lambda medians: medians[PE] == medians[BEFORE],
        )
        for variant in (THREADS, TASKS, WAITING)
    ]


def idle_counts(count: int) -> dict[str, float]:
    with running(PRIORITY_EXECUTOR, WORKERS) as executor:
        before = counts(executor)
        with gc_paused():
            for i in range(count):
                lane(executor, f"key-{i}", **RATE)
        time.sleep(IDLE_PAUSE)
        after = counts(executor)
    # The series "before" rides along under its own name: interleave files it under PE.
    return {**after, **{f"{name}|{BEFORE}": value for name, value in before.items()}}


def idle_view(measurement: Measurement) -> Measurement:
    """Measure 30's samples with the counts before as a series of their own."""
    samples: dict[str, dict[str, list[float]]] = {}
    for variant, series in measurement.samples.items():
        name, _, when = variant.partition("|")
        for values in series.values():
            samples.setdefault(name, {})[BEFORE if when else PE] = values
    return Measurement(measurement.unit, samples, measurement.notes, measurement.parameters)


def counts(executor: Any) -> dict[str, float]:
    stats = executor.stats()
    return {
        THREADS: threading.active_count(),
        TASKS: sum(getattr(stats, name) for name in NOT_DONE),
        WAITING: len(executor.waiting()),
    }


# 31 --------------------------------------------------------------------------------------


def run_throughput(sizes: Sizes, progress: Progress) -> Measurement:
    keys, tasks = sizes.key_lanes, sizes.key_tasks
    trials = [
        Trial(
            PE,
            f"PE, {keys:,} rate-limited lanes",
            partial(throughput, PRIORITY_EXECUTOR, keys, tasks, True),
        ),
        Trial(PLAIN, PLAIN, partial(throughput, PRIORITY_EXECUTOR, keys, tasks, False)),
        Trial(TPE, TPE, partial(throughput, THREAD_POOL, keys, tasks, False)),
    ]
    samples, notes = interleave(trials, sizes.repetitions, progress)
    note = (
        f"{tasks:,} no-op tasks per run, {WORKERS} workers, task i in lane key-{{i % {keys:,}}} "
        f"({rate_text()}, made before the clock starts); the others submit plainly in the "
        "same loop"
    )
    return Measurement("tasks/s", samples, [note, *notes], {"tasks": tasks, "lanes": keys})


def judge_throughput(measurement: Measurement) -> list[Row]:
    return [
        anchor_row(
            measurement,
            "rate-limited keys",
            label="",
            baseline=PLAIN,
            target=f"PE >= {MIN_RATIO}x {PLAIN}",
            verdict=lambda medians: medians[PE] >= MIN_RATIO * medians[PLAIN],
        )
    ]


def throughput(pool: Pool, keys: int, tasks: int, in_lanes: bool) -> dict[str, float]:
    with running(pool, WORKERS) as executor:
        if in_lanes:
            with gc_paused():
                submits: list[Submit] = [
                    lane(executor, f"key-{i}", **RATE).submit for i in range(keys)
                ]
        else:
            submits = [executor.submit] * keys  # the same loop, so that it costs the same
        rate = completion_rate(
            lambda: [submit(noop) for submit, _ in zip(cycle(submits), range(tasks))]
        )
    return {"rate-limited keys": rate}


# 32-33 -----------------------------------------------------------------------------------

Decide = Callable[[str], bool]


def pe_limiter() -> Decide:
    from priority_executor._limits import Limits

    table: dict[str, Limits] = {}
    clock = time.monotonic

    def decide(key: str) -> bool:
        limits = table.get(key)
        if limits is None:
            limits = table[key] = Limits(None, ((LIMIT, PER),), None)
        now = clock()
        if limits.room(now) > 0:
            limits.started(now)
            return True
        return False

    return decide


def limits_limiter(strategy: str) -> Decide:
    from limits import RateLimitItemPerSecond, strategies
    from limits.storage import MemoryStorage

    limiter = getattr(strategies, strategy)(MemoryStorage())
    item = RateLimitItemPerSecond(LIMIT, int(PER))
    return partial(limiter.hit, item)


def pyrate_limiter() -> Decide:
    from pyrate_limiter import BucketFactory, InMemoryBucket, Limiter, Rate, RateItem

    rates = [Rate(LIMIT, int(PER * 1000))]

    class PerKey(BucketFactory):
        def __init__(self) -> None:
            self.buckets: dict[str, InMemoryBucket] = {}

        def wrap_item(self, name: str, weight: int = 1) -> RateItem:
            return RateItem(name, time.monotonic_ns() // 1_000_000, weight=weight)

        def get(self, item: RateItem) -> InMemoryBucket:
            bucket = self.buckets.get(item.name)
            if bucket is None:
                bucket = self.buckets[item.name] = InMemoryBucket(rates)
            return bucket

    limiter = Limiter(PerKey())
    return lambda key: bool(limiter.try_acquire(key, blocking=False))


LIMITERS: dict[str, Callable[[], Decide]] = {
    PE: pe_limiter,
    "limits moving window": partial(limits_limiter, "MovingWindowRateLimiter"),
    "limits fixed window": partial(limits_limiter, "FixedWindowRateLimiter"),
    "pyrate-limiter": pyrate_limiter,
}


def run_limiters(sizes: Sizes, progress: Progress) -> Measurement:
    keys = sizes.limiter_keys
    trials = [
        Trial(name, name, partial(limiter_figures, make, keys)) for name, make in LIMITERS.items()
    ]
    samples, notes = interleave(trials, sizes.repetitions, progress)
    note = (
        f"{keys:,} keys at {LIMIT} per {PER:g} s each, {DECISIONS_PER_KEY} decisions a key "
        "round-robin in one thread; bytes: one decision a key, traced"
    )
    return Measurement("", samples, [note, *notes], {"keys": keys})


def limiter_figures(make: Callable[[], Decide], keys: int) -> dict[str, float]:
    names = [f"key-{i}" for i in range(keys)]
    with tracing_memory():
        before = live_bytes()
        decide = make()
        with gc_paused():
            for name in names:
                decide(name)
        after = live_bytes()
        del decide
    decide = make()
    start = time.perf_counter()
    for _ in range(DECISIONS_PER_KEY):
        for name in names:
            decide(name)
    seconds = time.perf_counter() - start
    return {DECISIONS: DECISIONS_PER_KEY * keys / seconds, BYTES: (after - before) / keys}


def decisions_view(measurement: Measurement) -> Measurement:
    return only(measurement, DECISIONS, "/s")


def bytes_view(measurement: Measurement) -> Measurement:
    return only(measurement, BYTES, "bytes")


def only(measurement: Measurement, variant: str, unit: str) -> Measurement:
    samples = {variant: measurement.samples[variant]} if variant in measurement.samples else {}
    return Measurement(unit, samples, measurement.notes, measurement.parameters)


def judge_decisions(measurement: Measurement) -> list[Row]:
    return [anchor_row(measurement, DECISIONS, label="", baseline=None)]


def judge_bytes(measurement: Measurement) -> list[Row]:
    return [anchor_row(measurement, BYTES, label="", baseline=None)]


def rate_text() -> str:
    return ", ".join(f"{name}={value}" for name, value in RATE.items())
