"""Measure 16: producer/consumer throughput with ``max_waiting=1000``, at least 0.9x without.

With ``max_waiting``, a submit first takes room among the tasks waiting to start, and a
submitter that finds none parks until a worker starts one. Producer threads submit no-ops
as fast as they can, the workers are the consumers; the time is from the first submit to
the last task done. The same PE without ``max_waiting`` (same workers, same producers, same
loop) is the anchor: what the bound costs (taking room at every submit, waking the parked
producers) shows as the ratio to it. With one producer, and with a few, which then also
contend for the room freed: each parked one is woken whenever room may have come.
"""

from __future__ import annotations

from concurrent.futures import Executor, Future, ThreadPoolExecutor
from functools import partial
from typing import Any

from benchmarks.config import Sizes
from benchmarks.pools import PRIORITY_EXECUTOR, Pool, Submit, noop, priority_executor, running
from benchmarks.results import PE, Measurement, Row, anchor_row
from benchmarks.runner import Progress, Trial, completion_rate, interleave

WORKERS = 4
MAX_WAITING = 1000
PRODUCER_COUNTS = (1, 4)
MIN_RATIO = 0.9
UNBOUNDED = "PE unbounded"
BOUNDED = Pool(PE, partial(priority_executor, max_waiting=MAX_WAITING))


def run(sizes: Sizes, progress: Progress) -> Measurement:
    """PE with and without ``max_waiting``, ``sizes.throughput_tasks`` no-ops a run, by
    number of producers."""
    tasks = sizes.throughput_tasks
    trials = [
        Trial(
            series,
            f"{series}, {producers_label(producers)}",
            partial(tasks_per_second, pool, tasks, producers),
        )
        for producers in PRODUCER_COUNTS
        for series, pool in ((PE, BOUNDED), (UNBOUNDED, PRIORITY_EXECUTOR))
    ]
    samples, notes = interleave(trials, sizes.repetitions, progress)
    note = (
        f"{tasks:,} no-op tasks per run, split evenly between the producer threads, "
        f"{WORKERS} workers; PE: max_waiting={MAX_WAITING}; {UNBOUNDED}: without"
    )
    parameters = {"tasks": tasks, "max_waiting": MAX_WAITING}
    return Measurement("tasks/s", samples, [note, *notes], parameters)


def judge(measurement: Measurement) -> list[Row]:
    """With the bound, the pipeline must keep ``MIN_RATIO`` of its throughput without it."""
    return [
        anchor_row(
            measurement,
            producers_label(producers),
            label=producers_label(producers),
            baseline=UNBOUNDED,
            target=f"PE >= {MIN_RATIO}x {UNBOUNDED}",
            verdict=lambda medians: medians[PE] >= MIN_RATIO * medians[UNBOUNDED],
        )
        for producers in PRODUCER_COUNTS
    ]


def tasks_per_second(pool: Pool, tasks: int, producers: int) -> dict[str, float]:
    """Tasks/s of ``tasks`` no-ops submitted by ``producers`` threads at once."""
    with running(pool, WORKERS) as executor:
        rate = completion_rate(partial(produce, executor, tasks, producers))
    return {producers_label(producers): rate}


def produce(executor: Executor, tasks: int, producers: int) -> list[Future[Any]]:
    """Submit ``tasks`` no-ops to ``executor`` from ``producers`` threads; return the futures
    once every producer is done (raise what a producer raised)."""
    submit: Submit = executor.submit

    def producer(count: int) -> list[Future[Any]]:
        return [submit(noop) for _ in range(count)]

    shares = [len(range(index, tasks, producers)) for index in range(producers)]
    with ThreadPoolExecutor(producers, thread_name_prefix="producer") as threads:
        return [future for share in threads.map(producer, shares) for future in share]


def producers_label(producers: int) -> str:
    """``"1 producer"``, ``"4 producers"``."""
    return f"{producers} producer" if producers == 1 else f"{producers} producers"
