"""Measure 8: memory is given back after many delayed tasks are submitted and cancelled.

A heap that only marks cancelled entries keeps them (and their futures) until they would have
come due; the contract says such a heap gets compacted. One executor takes the tasks in
rounds, one per repetition: submit a round of delayed tasks, cancel them all, drop the
futures, collect, and read tracemalloc's live bytes. A first round, not judged, gives the
live bytes before (the executor's own footprint, and whatever it builds lazily and keeps:
the heap's and the intake's capacity, the promoter's thread); every later round is compared
with it, so that anything left behind shows, and grows from round to round if it piles up.
Read at the same point of the same calls as the rounds after it, the figure before holds
the benchmark's own state as they do: read before the rounds began, it lacked 2-3 KiB that
the rounds' figures then counted against the executor.
"""

from __future__ import annotations

from concurrent.futures import Executor
from contextlib import ExitStack
from functools import partial

from benchmarks.config import FAR_FUTURE, Sizes
from benchmarks.pools import PRIORITY_EXECUTOR, Submit, noop, running
from benchmarks.results import PE, Measurement, Row
from benchmarks.runner import Progress, Trial, gc_paused, interleave, live_bytes, tracing_memory

WORKERS = 4
MAX_GROWTH = 1.10


def run(sizes: Sizes, progress: Progress) -> Measurement:
    """``sizes.cancel_tasks`` submits and cancels in all, spread over the repetitions."""
    rounds = sizes.repetitions
    per_round = sizes.cancel_tasks // rounds
    with ExitStack() as stack:
        stack.enter_context(tracing_memory())
        executor = stack.enter_context(running(PRIORITY_EXECUTOR, WORKERS))
        trial = Trial(PE, f"PE, {per_round:,} tasks", partial(one_round, executor, per_round))
        figures, notes = interleave([trial], rounds + 1, progress)
    found = figures.get("after", {}).get(PE, [])
    samples = {"before": {PE: found[:1]}, "after": {PE: found[1:]}} if len(found) > 1 else {}
    note = (
        f"{rounds} rounds of {per_round:,} tasks delayed {FAR_FUTURE:g} s on one executor, "
        "each cancelled, futures dropped, after one more that gives the figure before; "
        "judged on the worst round"
    )
    return Measurement("bytes", samples, [note, *notes], {"tasks_per_round": per_round})


def judge(measurement: Measurement) -> list[Row]:
    """Live bytes after every round must be within 10% of live bytes before the first."""
    before = measurement.samples.get("before", {}).get(PE)
    after = measurement.samples.get("after", {}).get(PE)
    ratio = max(after) / before[0] if before and after else None
    worst = measurement.format(max(after) if after else None)
    return [
        Row(
            measure="live bytes after/before",
            pe=f"{worst} after, {measurement.format(before[0] if before else None)} before",
            tpe="-",
            others="-",
            ratio=f"{ratio:.2f}x before" if ratio is not None else "n/a",
            target=f"after <= {MAX_GROWTH:.2f}x before",
            met=ratio <= MAX_GROWTH if ratio is not None else None,
        )
    ]


def one_round(executor: Executor, tasks: int) -> dict[str, float]:
    """Submit and cancel ``tasks`` delayed tasks; the live bytes then."""
    submit_and_cancel(executor, tasks)
    return {"after": live_bytes()}


def submit_and_cancel(executor: Executor, tasks: int) -> None:
    """Submit ``tasks`` far-future tasks, cancel every one, and drop the futures."""
    submit: Submit = executor.submit
    with gc_paused():
        futures = [submit(noop, delay=FAR_FUTURE) for _ in range(tasks)]
        for future in futures:
            future.cancel()
