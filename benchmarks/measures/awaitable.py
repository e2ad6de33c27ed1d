"""Measures 25 and 26: an awaited no-op from a coroutine, ``await executor.asubmit(noop)``,
against the ways asyncio offers: ``await loop.run_in_executor(pool, noop)`` on a
``ThreadPoolExecutor`` (TPE), and ``await asyncio.to_thread(noop)`` on asyncio's default
executor (a ``ThreadPoolExecutor`` too). Also ``run_in_executor`` on a PriorityExecutor
("PE run_in_executor"): what ``asubmit()`` adds or saves beside it.

- Round trip (25): one call at a time, from the await to the result back in the
  coroutine: a worker's wake-up, and the loop's (``call_soon_threadsafe``), p50 and p99.
- Throughput (26): ``sizes.throughput_tasks`` calls, ``IN_FLIGHT`` of them awaited at
  once, from the first to the last result; and (27), from the same runs, the CPU time
  the loop's thread spent per call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

from benchmarks.config import Sizes
from benchmarks.pools import noop, priority_executor
from benchmarks.results import PE, TPE, Measurement, Row, anchor_row, percentile
from benchmarks.runner import Progress, Trial, interleave

WORKERS = 4
IN_FLIGHT = 1000
TO_THREAD = "to_thread"
PE_RUN_IN_EXECUTOR = "PE run_in_executor"
PERCENTILES = (50, 99)
LOOP_CPU = "loop CPU per call"
T = TypeVar("T")

Call = Callable[[], Awaitable[Any]]
"""One awaited no-op, made for a running loop."""
Make = Callable[[asyncio.AbstractEventLoop], "tuple[Call, Executor | None]"]
"""How a series makes its call on a loop, and the pool to shut down after (if its own)."""


def asubmit(loop: asyncio.AbstractEventLoop) -> tuple[Call, Executor | None]:
    executor = priority_executor(WORKERS)
    return partial(executor.asubmit, noop), executor  # type: ignore[attr-defined]


def run_in(
    make: Callable[[int], Executor], loop: asyncio.AbstractEventLoop
) -> tuple[Call, Executor | None]:
    pool = make(WORKERS)
    return partial(loop.run_in_executor, pool, noop), pool


def to_thread(loop: asyncio.AbstractEventLoop) -> tuple[Call, Executor | None]:
    # On asyncio's own default executor, which the loop shuts down itself.
    return partial(asyncio.to_thread, noop), None


CONTENDERS: list[tuple[str, Make]] = [
    (PE, asubmit),
    (TPE, partial(run_in, ThreadPoolExecutor)),
    (TO_THREAD, to_thread),
    (PE_RUN_IN_EXECUTOR, partial(run_in, priority_executor)),
]


def on_loop(make: Make, body: Callable[[Call], Awaitable[T]]) -> T:
    """``body(call)`` on a fresh loop, with the call ``make`` makes for it, once the workers
    have started (a warm-up of a few calls at once)."""
    pool: Executor | None = None

    async def main() -> T:
        nonlocal pool
        call, pool = make(asyncio.get_running_loop())
        await asyncio.gather(*(call() for _ in range(WORKERS * 4)))
        return await body(call)

    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(main())
    finally:
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()
        if pool is not None:
            pool.shutdown()


def run_round_trip(sizes: Sizes, progress: Progress) -> Measurement:
    samples = sizes.latency_samples
    trials = [
        Trial(series, series, partial(round_trip, make, samples)) for series, make in CONTENDERS
    ]
    figures, notes = interleave(trials, sizes.repetitions, progress)
    note = f"{samples:,} calls one at a time from one coroutine, {WORKERS} workers"
    return Measurement("µs", figures, [note, *notes], {"samples": samples})


def round_trip(make: Make, samples: int) -> dict[str, float]:
    async def body(call: Call) -> list[float]:
        times = []
        for _ in range(samples):
            began = time.perf_counter()
            await call()
            times.append(time.perf_counter() - began)
        return times

    times = on_loop(make, body)
    return {f"p{percent}": percentile(times, percent) * 1e6 for percent in PERCENTILES}


def judge_round_trip(measurement: Measurement) -> list[Row]:
    """``asubmit()`` must return no later than ``run_in_executor`` on a TPE, at p50 and p99."""
    return [
        anchor_row(
            measurement,
            f"p{percent}",
            label=f"p{percent}",
            baseline=TPE,
            target="PE <= TPE",
            verdict=lambda medians: medians[PE] <= medians[TPE],
        )
        for percent in PERCENTILES
    ]


def run_throughput(sizes: Sizes, progress: Progress) -> Measurement:
    tasks = sizes.throughput_tasks
    trials = [
        Trial(series, series, partial(throughput, make, tasks)) for series, make in CONTENDERS
    ]
    figures, notes = interleave(trials, sizes.repetitions, progress)
    note = f"{tasks:,} calls, {IN_FLIGHT:,} awaited at once, {WORKERS} workers"
    return Measurement("", figures, [note, *notes], {"tasks": tasks})


def throughput(make: Make, tasks: int) -> dict[str, float]:
    """Tasks/s, and µs of the loop thread's CPU per call: what a submit and its result
    cost the loop, which the wall clock of a busy machine hides."""

    async def body(call: Call) -> dict[str, float]:
        began, cpu = time.perf_counter(), time.thread_time()
        for start in range(0, tasks, IN_FLIGHT):
            await asyncio.gather(*(call() for _ in range(min(IN_FLIGHT, tasks - start))))
        return {
            "throughput": tasks / (time.perf_counter() - began),
            LOOP_CPU: (time.thread_time() - cpu) / tasks * 1e6,
        }

    return on_loop(make, body)


def throughput_view(measurement: Measurement) -> Measurement:
    """Measure 26: the throughput."""
    return only(measurement, "throughput", "tasks/s")


def loop_cpu_view(measurement: Measurement) -> Measurement:
    """Measure 27: the loop thread's CPU per call, from the same runs."""
    return only(measurement, LOOP_CPU, "µs")


def only(measurement: Measurement, variant: str, unit: str) -> Measurement:
    samples = {variant: measurement.samples[variant]} if variant in measurement.samples else {}
    return Measurement(unit, samples, measurement.notes, measurement.parameters)


def judge_loop_cpu(measurement: Measurement) -> list[Row]:
    """``asubmit()`` must cost the loop no more than ``run_in_executor`` on a TPE."""
    return [
        anchor_row(
            measurement,
            LOOP_CPU,
            label=LOOP_CPU,
            baseline=TPE,
            target="PE <= TPE",
            verdict=lambda medians: medians[PE] <= medians[TPE],
        )
    ]


def judge_throughput(measurement: Measurement) -> list[Row]:
    """``asubmit()`` must keep the throughput of ``run_in_executor`` on a TPE."""
    return [
        anchor_row(
            measurement,
            "throughput",
            label="throughput",
            baseline=TPE,
            target="PE >= TPE",
            verdict=lambda medians: medians[PE] >= medians[TPE],
        )
    ]
