"""The thirty-six measures, in the order they run and are reported.

Each module holds one idea: a ``run`` that produces the raw figures (interleaving the
contenders) and a ``judge`` that turns their medians into table rows against the target.
Measures with the same ``run`` share one execution of it, each seeing it through its ``view``.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Callable

from benchmarks.config import Sizes
from benchmarks.measures import (
    awaitable,
    backpressure,
    calendar,
    cancellation,
    cpu,
    events,
    fair_share,
    head_of_line,
    idle,
    lane_keys,
    lane_rate,
    lane_scale,
    lane_throughput,
    latency,
    lateness,
    limit_latency,
    memory,
    reschedule,
    retries,
    submit_cost,
    task_cost,
    throughput,
)
from benchmarks.results import Measurement, Row
from benchmarks.runner import Progress

Run = Callable[[Sizes, Progress], Measurement]


def whole(measurement: Measurement) -> Measurement:
    """The view of a measure that does not share its run: everything."""
    return measurement


@dataclass(frozen=True)
class Measure:
    """A measure: its number and ``--only`` key, what it runs and how it is judged.

    ``group``: a second ``--only`` key, shared by the measures of one experiment whose
    figures come in different units, so that one name runs them all.
    """

    number: int
    key: str
    title: str
    run: Run
    judge: Callable[[Measurement], list[Row]]
    view: Callable[[Measurement], Measurement] = whole
    group: str = ""


MEASURES = (
    Measure(
        1,
        "throughput",
        "no-op throughput",
        throughput.run,
        partial(throughput.judge, min_ratio=1.0, stretch=0.85),
        throughput.plain_view,
    ),
    Measure(
        2,
        "priorities",
        "no-op throughput, random priorities",
        throughput.run,
        partial(throughput.judge, min_ratio=1.0),
        throughput.prioritized_view,
    ),
    Measure(3, "latency", "start latency", latency.run, latency.judge),
    Measure(4, "lateness", "lateness", lateness.run_alone, lateness.judge_alone),
    Measure(
        5,
        "backlog",
        "lateness beside far-future backlog",
        lateness.run_beside_backlog,
        lateness.judge_beside_backlog,
    ),
    Measure(6, "memory", "memory per pending task", memory.run, memory.judge),
    Measure(7, "idle", "idle CPU with far-future tasks", idle.run, idle.judge),
    Measure(8, "cancel", "submit + cancel, then gc", cancellation.run, cancellation.judge),
    Measure(9, "submit", "submit cost by backlog", submit_cost.run, submit_cost.judge),
    Measure(10, "cpu", "CPU-bound work", cpu.run, cpu.judge),
    Measure(
        11, "lanes", "no-op throughput in 100 lanes", lane_throughput.run, lane_throughput.judge
    ),
    Measure(
        12,
        "head-of-line",
        "throughput beside a throttled lane",
        head_of_line.run,
        head_of_line.judge,
    ),
    Measure(13, "lane-rate", "lane start rate, 100 per 1 s", lane_rate.run, lane_rate.judge),
    Measure(14, "retries", "retry lateness", retries.run, retries.judge),
    Measure(15, "reschedule", "reschedule vs submit cost", reschedule.run, reschedule.judge),
    Measure(
        16,
        "max-waiting",
        "producer/consumer throughput, max_waiting=1000",
        backpressure.run,
        backpressure.judge,
    ),
    Measure(
        17,
        "rate-lateness",
        "lateness at 50k due a second",
        lateness.run_at_rate,
        lateness.judge_at_rate,
    ),
    Measure(
        18, "task-cost", "a task's cost, submit and worker apart", task_cost.run, task_cost.judge
    ),
    Measure(
        19,
        "fair-throughput",
        "no-op throughput in 1,000 weighted lanes",
        fair_share.run_throughput,
        fair_share.judge_throughput,
    ),
    Measure(
        20,
        "fair-share",
        "start shares of saturated lanes, weights 1-4",
        fair_share.run_share,
        fair_share.judge_share,
    ),
    Measure(
        21,
        "first-start",
        "first start of a lane behind another's backlog",
        fair_share.run_first_start,
        fair_share.judge_first_start,
    ),
    Measure(
        22,
        "calendar-memory",
        "memory per calendar series",
        calendar.run_memory,
        calendar.judge_memory,
        group="calendar",
    ),
    Measure(
        23,
        "calendar-idle",
        "idle CPU with calendar series waiting",
        calendar.run_idle,
        calendar.judge_idle,
        group="calendar",
    ),
    Measure(
        24,
        "calendar-lateness",
        "lateness, calendar series all due at once",
        calendar.run_lateness,
        calendar.judge_lateness,
        group="calendar",
    ),
    Measure(
        25,
        "asyncio-round-trip",
        "an awaited no-op from a coroutine, one at a time",
        awaitable.run_round_trip,
        awaitable.judge_round_trip,
        group="asyncio",
    ),
    Measure(
        26,
        "asyncio-throughput",
        "awaited no-ops from coroutines, 1,000 at once",
        awaitable.run_throughput,
        awaitable.judge_throughput,
        awaitable.throughput_view,
        group="asyncio",
    ),
    Measure(
        27,
        "asyncio-loop-cpu",
        "the loop's CPU per awaited no-op, 1,000 at once",
        awaitable.run_throughput,
        awaitable.judge_loop_cpu,
        awaitable.loop_cpu_view,
        group="asyncio",
    ),
    Measure(
        28,
        "events-throughput",
        "no-op throughput: no subscriber, a no-op one, otel metrics",
        events.run_throughput,
        events.judge_throughput,
        group="events",
    ),
    Measure(
        29,
        "events-latency",
        "start latency: no subscriber, a no-op one, otel metrics",
        events.run_latency,
        events.judge_latency,
        group="events",
    ),
    Measure(
        30,
        "lane-scale",
        "no-op throughput in 1,000 lanes",
        lane_scale.run,
        lane_scale.judge,
    ),
    Measure(
        31,
        "key-memory",
        "memory per idle named lane with a rate",
        lane_keys.run_memory,
        lane_keys.judge_memory,
        group="lane-keys",
    ),
    Measure(
        32,
        "key-idle",
        "threads and timers of idle lanes",
        lane_keys.run_idle,
        lane_keys.judge_idle,
        lane_keys.idle_view,
        group="lane-keys",
    ),
    Measure(
        33,
        "key-throughput",
        "no-op throughput over rate-limited keys",
        lane_keys.run_throughput,
        lane_keys.judge_throughput,
        group="lane-keys",
    ),
    Measure(
        34,
        "limiter-decisions",
        "a key's limit check, decisions a second",
        lane_keys.run_limiters,
        lane_keys.judge_decisions,
        lane_keys.decisions_view,
        group="lane-keys",
    ),
    Measure(
        35,
        "limiter-memory",
        "a key's limit check, bytes a key",
        lane_keys.run_limiters,
        lane_keys.judge_bytes,
        lane_keys.bytes_view,
        group="lane-keys",
    ),
    Measure(
        36,
        "limit-latency",
        "from a run-time limit to the future failing",
        limit_latency.run,
        limit_latency.judge,
    ),
)


def select(names: Sequence[str]) -> list[Measure]:
    """The measures named by key, number or group, in run order; all of them for no names.

    Raises ValueError for a name that is none of these.
    """
    by_name: dict[str, list[Measure]] = {}
    for m in MEASURES:
        for name in (m.key, str(m.number), m.group):
            if name:
                by_name.setdefault(name, []).append(m)
    unknown = [name for name in names if name not in by_name]
    if unknown:
        known = f"{', '.join(m.key for m in MEASURES)}, {', '.join(groups())}, or 1-{len(MEASURES)}"
        raise ValueError(f"unknown measure {', '.join(unknown)} (known: {known})")
    wanted = {m.number for name in names for m in by_name[name]}
    return [m for m in MEASURES if not names or m.number in wanted]


def groups() -> list[str]:
    """The group keys, each once: ``calendar``, ``asyncio``, ``lane-keys``."""
    return list(dict.fromkeys(m.group for m in MEASURES if m.group))


def perform_all(measures: Sequence[Measure], sizes: Sizes) -> list[tuple[Measure, Measurement]]:
    """Run the measures in order, each shared run once; pair every measure with its view."""
    done: dict[Run, Measurement] = {}
    results = []
    for measure in measures:
        if measure.run not in done:
            done[measure.run] = perform(measure, sizes)
        results.append((measure, measure.view(done[measure.run])))
    return results


def perform(measure: Measure, sizes: Sizes) -> Measurement:
    """Run one measure; a failure becomes a note, so that the other measures still report.

    Whatever the measure left behind is collected before the next one starts.
    """
    progress = Progress(measure.number, len(MEASURES), measure.title)
    start = time.perf_counter()
    try:
        return measure.run(sizes, progress)
    except Exception as exc:  # the executor under test may be unfinished or broken
        progress(f"failed: {type(exc).__name__}: {exc}")
        return Measurement(unit="", notes=[f"failed: {type(exc).__name__}: {exc}"])
    finally:
        gc.collect()
        progress(f"done in {time.perf_counter() - start:.1f} s")
