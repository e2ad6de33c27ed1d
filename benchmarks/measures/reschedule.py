"""Measure 15: a ``reschedule()`` beside 100k waiting tasks costs at most twice a ``submit()``.

DESIGN.md promises a reschedule in O(log n), as a submit is: the task is replaced by a copy
queued afresh and the original left as a dead entry, so both should cost about the same,
whatever waits. Two executors are filled once with as many waiting tasks: one with tasks
due between one and two hours from now (*scheduled*, as in measure 9), one with tasks due at
once behind its workers, all of them blocked (*ready*). Each repetition times, in each, a
batch of reschedules of tasks not rescheduled before, the even ones giving a new priority,
the odd ones a new delay of one to two hours (which moves a ready task to the pending heap:
the number waiting does not change), and a batch of as many submits of the backlog's kind
(delayed, or plain), which are cancelled afterwards to restore the backlog, as in measure 9.

Both batches are timed on the calling thread's CPU clock (``time.thread_time``), not on the
wall clock: the workers are blocked or idle and the promoter asleep, so that is all the work
a call does, while a batch of 1k calls lasts about 10 ms, and other processes on a shared
machine preempt enough of those to swing a median of wall times by 2x from run to run.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Executor, Future
from contextlib import ExitStack
from functools import partial
from itertools import cycle, islice
from typing import TYPE_CHECKING, Any, cast

from benchmarks.config import FAR_FUTURE, SEED, Sizes
from benchmarks.measures.submit_cost import far_delays, submit_micros
from benchmarks.measures.throughput import PRIORITIES
from benchmarks.pools import PRIORITY_EXECUTOR, Submit, noop, running, worker_blocked
from benchmarks.results import PE, Measurement, Row, anchor_row
from benchmarks.runner import Progress, Trial, gc_frozen, gc_paused, interleave

if TYPE_CHECKING:
    from priority_executor import PriorityExecutor

WORKERS = 4
MAX_RATIO = 2.0
REPETITIONS_FACTOR = 3
"""A batch of 1k calls lasts about 10 ms: more repetitions steady the medians, at little cost."""
CLOCK = time.thread_time
SUBMIT = "PE submit"
SCHEDULED = "scheduled"
READY = "ready"


def run(sizes: Sizes, progress: Progress) -> Measurement:
    """Time ``sizes.reschedule_calls`` reschedules and submits beside each backlog, interleaved."""
    rng = random.Random(SEED)
    waiting, calls = sizes.reschedule_waiting, sizes.reschedule_calls
    changes: list[dict[str, Any]] = [
        {"priority": rng.randint(*PRIORITIES)} if index % 2 == 0 else {"delay": delay}
        for index, delay in enumerate(far_delays(rng, calls))
    ]
    with ExitStack() as stack:
        trials = []
        for state in (SCHEDULED, READY):
            progress(f"filling PE with {waiting:,} {state} tasks")
            executor = stack.enter_context(running(PRIORITY_EXECUTOR, WORKERS))
            if state == READY:
                for _ in range(WORKERS):
                    stack.enter_context(worker_blocked(executor))
            submit: Submit = executor.submit
            with gc_paused():
                backlog = [submit(noop, delay=delay) for delay in delays(rng, waiting, state)]
            check_waiting(executor, waiting, state)
            label = state_label(waiting, state)
            targets = cycle(rng.sample(backlog, len(backlog)))
            batch = delays(rng, calls, state)
            trials += [
                Trial(
                    PE,
                    f"PE reschedule, {label}",
                    partial(reschedule_micros, executor, label, targets, changes),
                ),
                Trial(
                    SUBMIT,
                    f"{SUBMIT}, {label}",
                    partial(submit_micros, executor, label, batch, CLOCK),
                ),
            ]
        repetitions = REPETITIONS_FACTOR * sizes.repetitions
        with gc_frozen():
            samples, notes = interleave(trials, repetitions, progress)
        progress("cancelling the backlogs")
    note = (
        f"{calls:,} reschedules per batch, of tasks not rescheduled before: even ones "
        f"priority= in [{PRIORITIES[0]}, {PRIORITIES[1]}], odd ones delay= in "
        f"[{FAR_FUTURE:g}, {2 * FAR_FUTURE:g}] s; {SUBMIT}: {calls:,} submits of the backlog's "
        f"kind, cancelled afterwards; {WORKERS} workers (all blocked beside the ready "
        f"backlog), {repetitions} repetitions, GC frozen; timed on the thread's CPU clock"
    )
    parameters = {"waiting": waiting, "calls": calls}
    return Measurement("µs", samples, [note, *notes], parameters)


def judge(measurement: Measurement) -> list[Row]:
    """Beside either backlog, a reschedule must cost at most ``MAX_RATIO`` times a submit."""
    waiting = int(measurement.parameters.get("waiting", 0))
    return [
        anchor_row(
            measurement,
            state_label(waiting, state),
            label=state_label(waiting, state),
            baseline=SUBMIT,
            target=f"PE <= {MAX_RATIO:g}x {SUBMIT}",
            verdict=lambda medians: medians[PE] <= MAX_RATIO * medians[SUBMIT],
        )
        for state in (SCHEDULED, READY)
    ]


def reschedule_micros(
    executor: Executor,
    variant: str,
    targets: Iterator[Future[Any]],
    changes: Sequence[Mapping[str, Any]],
) -> dict[str, float]:
    """Microseconds of CPU per reschedule: the next futures of ``targets``, one change each.

    Raises RuntimeError when a reschedule found its task started or ended.
    """
    reschedule = cast("PriorityExecutor", executor).reschedule
    futures = list(islice(targets, len(changes)))
    start = CLOCK()
    moved = [reschedule(future, **change) for future, change in zip(futures, changes)]
    elapsed = CLOCK() - start
    if not all(moved):
        raise RuntimeError(f"{moved.count(False):,} reschedules found their task not waiting")
    return {variant: elapsed / len(changes) * 1e6}


def check_waiting(executor: Executor, waiting: int, state: str) -> None:
    """Raise RuntimeError unless exactly ``waiting`` tasks wait, all in ``state``.

    The snapshot also moves the ready tasks from the submitters' intake to the ready heap, as
    a worker would: else the first reschedule timed would pay for moving them all.
    """
    tasks = cast("PriorityExecutor", executor).waiting()
    found = sum(task.state == state for task in tasks)
    if len(tasks) != waiting or found != waiting:
        raise RuntimeError(f"{found:,} of {len(tasks):,} waiting tasks {state}, not {waiting:,}")


def delays(rng: random.Random, count: int, state: str) -> Sequence[float | None]:
    """The delays of ``count`` submits of a backlog's kind: far ones, or None (due at once)."""
    return far_delays(rng, count) if state == SCHEDULED else [None] * count


def state_label(waiting: int, state: str) -> str:
    """``"100,000 scheduled"``."""
    return f"{waiting:,} {state}"
