"""Measures 28 and 29: what seeing what it does costs, side by side in one run.

Plain no-op throughput (as measure 1, one worker) and start latency (as measure 3, waited
on an Event) for three PriorityExecutors: with no subscriber (``PE``), with one that does
nothing (``PE, no-op subscriber``), and with ``record_metrics()`` on the OpenTelemetry
SDK's in-memory reader (``PE, otel metrics``; noted as failed without the ``otel`` extra).
Each subscribed executor observes every task it runs: its events are made and delivered by
its dispatcher thread, which shares the GIL and the two cores with the submitter and the
worker, so its whole cost is in these figures. The target (issue 46): a task costs at most
1.05x with one no-op subscriber; callgrind's figures are in docs/performance.md.
"""

from __future__ import annotations

from concurrent.futures import Executor
from functools import partial

from benchmarks.config import Sizes
from benchmarks.measures.latency import EVENT_GAP, via_event
from benchmarks.measures.throughput import tasks_per_second
from benchmarks.pools import PRIORITY_EXECUTOR, Pool, running
from benchmarks.results import PE, Measurement, Row, anchor_row, percentile
from benchmarks.runner import Progress, Trial, interleave

SUBSCRIBED = "PE, no-op subscriber"
OTEL = "PE, otel metrics"
MAX_COST = 1.05
LATENCY_WORKERS = 4
THROUGHPUT = "tasks/s, 1 worker"
LATENCY = "p50 start latency"


def subscribed(workers: int) -> Executor:
    from priority_executor import PriorityExecutor

    executor = PriorityExecutor(workers)
    executor.subscribe(lambda event: None)
    return executor


def with_metrics(workers: int) -> Executor:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from priority_executor import PriorityExecutor, record_metrics

    executor = PriorityExecutor(workers)
    record_metrics(executor, meter_provider=MeterProvider(metric_readers=[InMemoryMetricReader()]))
    return executor


POOLS = (PRIORITY_EXECUTOR, Pool(SUBSCRIBED, subscribed), Pool(OTEL, with_metrics))


def run_throughput(sizes: Sizes, progress: Progress) -> Measurement:
    """``sizes.throughput_tasks`` no-ops a run, one worker, each pool interleaved."""
    tasks = sizes.throughput_tasks
    trials = [Trial(pool.name, pool.name, partial(_rate, pool, tasks)) for pool in POOLS]
    samples, notes = interleave(trials, sizes.repetitions, progress)
    note = f"{tasks:,} no-op tasks a run, 1 worker, from the first submit to the last done"
    return Measurement("tasks/s", samples, [note, *notes], {"tasks": tasks})


def _rate(pool: Pool, tasks: int) -> dict[str, float]:
    (rate,) = tasks_per_second(pool, 1, tasks, None).values()
    return {THROUGHPUT: rate}


def judge_throughput(measurement: Measurement) -> list[Row]:
    """A task with one no-op subscriber costs at most 1.05x: its throughput >= 1/1.05 PE's."""
    return [
        anchor_row(
            measurement,
            THROUGHPUT,
            label=THROUGHPUT,
            baseline=SUBSCRIBED,
            target=f"PE <= {MAX_COST}x {SUBSCRIBED}",
            verdict=lambda m: m[PE] <= MAX_COST * m[SUBSCRIBED],
        )
    ]


def run_latency(sizes: Sizes, progress: Progress) -> Measurement:
    """``sizes.latency_samples`` lone tasks per pool and repetition, waited on an Event."""
    samples = sizes.latency_samples
    trials = [Trial(pool.name, pool.name, partial(_latency, pool, samples)) for pool in POOLS]
    figures, notes = interleave(trials, sizes.repetitions, progress)
    note = (
        f"{samples:,} tasks one at a time, {LATENCY_WORKERS} idle workers, the caller waiting"
        f" on an Event the task sets, {EVENT_GAP * 1e3:g} ms apart"
    )
    return Measurement("µs", figures, [note, *notes])


def _latency(pool: Pool, samples: int) -> dict[str, float]:
    with running(pool, LATENCY_WORKERS) as executor:
        latencies = [via_event(executor) for _ in range(samples)]
    return {LATENCY: percentile(latencies, 50) * 1e6}


def judge_latency(measurement: Measurement) -> list[Row]:
    """Start latency, side by side: no target (the subscriber is off the start's path)."""
    return [anchor_row(measurement, LATENCY, label=LATENCY, baseline=SUBSCRIBED)]
