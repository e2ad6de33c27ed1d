"""Measures 19-21: fair share between weighted lanes.

19: no-op throughput with the tasks spread over 1,000 lanes with weights (1 to 4), against
plain submits to the same executor in the same loop; beside it the same 1,000 lanes without
weights (what lanes cost before fair share), and ``ThreadPoolExecutor``'s plain submits.
Once a lane has a weight, every start goes through the shares (see
priority_executor/_fair.py): the gap between the two lane figures is what that costs.

20: how closely the starts follow the weights under saturation. Four lanes of weights 1, 2,
3 and 4 each queue the same number of no-ops while every worker is held; then the workers
go, and each task records its lane as it starts. Over the first half of the starts (when
every lane still has tasks waiting), a lane's share of the starts should be its weight's
share (10%, 20%, 30%, 40%). The figure is the largest gap, in percentage points, over the
lanes. ``ThreadPoolExecutor``, first in first out, gives each lane the share of its
submissions (25%): what a pool without weights does.

21: how long a lane that becomes busy waits for its first start behind another lane's
backlog of no-ops, once that backlog runs: from its submit to its start. A FIFO
``ThreadPoolExecutor`` starts it after the whole backlog.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import Executor
from functools import partial

from benchmarks.config import Sizes
from benchmarks.measures.throughput import workers_label
from benchmarks.pools import PRIORITY_EXECUTOR, THREAD_POOL, Pool, Submit, lane, noop, running
from benchmarks.results import PE, TPE, Measurement, Row, anchor_row
from benchmarks.runner import Progress, Trial, completion_rate, interleave, wait_all

WORKERS = 4
LANES = 1_000
MIN_RATIO = 0.8
PLAIN = "PE plain"
UNWEIGHTED = "PE lanes without weights"
WEIGHTS = (1, 2, 3, 4)
MAX_ERROR = 2.0  # percentage points
SHARE = "share error"
FIRST_START = "first start"
MAX_DELAY = 0.010  # seconds: "within one task's time", and then some for the wake-up


def run_throughput(sizes: Sizes, progress: Progress) -> Measurement:
    """PE with 1,000 weighted lanes and with plain submits, and TPE, ``throughput_tasks``
    no-ops a run."""
    tasks = sizes.throughput_tasks
    trials = [
        Trial(
            PE, f"PE, {LANES} weighted lanes", partial(throughput, PRIORITY_EXECUTOR, tasks, True)
        ),
        Trial(PLAIN, PLAIN, partial(throughput, PRIORITY_EXECUTOR, tasks, None)),
        Trial(UNWEIGHTED, UNWEIGHTED, partial(throughput, PRIORITY_EXECUTOR, tasks, False)),
        Trial(TPE, TPE, partial(throughput, THREAD_POOL, tasks, None)),
    ]
    samples, notes = interleave(trials, sizes.repetitions, progress)
    note = (
        f"{tasks:,} no-op tasks per run, {WORKERS} workers, task i in lane w{{i % {LANES}}} "
        f"of weight 1 + i % 4 (without a weight for {UNWEIGHTED}); the others submit "
        "plainly in the same loop"
    )
    return Measurement("tasks/s", samples, [note, *notes], {"tasks": tasks, "lanes": LANES})


def judge_throughput(measurement: Measurement) -> list[Row]:
    label = workers_label(WORKERS)
    return [
        anchor_row(
            measurement,
            label,
            label=label,
            baseline=PLAIN,
            target=f"PE >= {MIN_RATIO}x {PLAIN}",
            verdict=lambda medians: medians[PE] >= MIN_RATIO * medians[PLAIN],
        )
    ]


def throughput(pool: Pool, tasks: int, weighted: bool | None) -> dict[str, float]:
    """Tasks/s in LANES lanes, with weights or not, or (None) submitted plainly."""
    with running(pool, WORKERS) as executor:
        if weighted is not None:
            submits: list[Submit] = [
                lane(executor, f"w{i}", **({"weight": 1 + i % 4} if weighted else {})).submit
                for i in range(LANES)
            ]
        else:
            submits = [executor.submit] * LANES  # the same loop, so that it costs the same
        rate = completion_rate(
            lambda: [submits[i % LANES](noop) for i in range(tasks)]  # type: ignore[misc]
        )
    return {workers_label(WORKERS): rate}


def run_share(sizes: Sizes, progress: Progress) -> Measurement:
    """Four saturated lanes of weights 1-4 on PE; the same four kinds of task on TPE."""
    each = max(1_000, sizes.throughput_tasks // 10)
    trials = [
        Trial(PE, f"PE, lanes of weights {WEIGHTS}", partial(share_error, PRIORITY_EXECUTOR, each)),
        Trial(TPE, TPE, partial(share_error, THREAD_POOL, each)),
    ]
    samples, notes = interleave(trials, sizes.repetitions, progress)
    note = (
        f"{each:,} no-op tasks per lane, {len(WEIGHTS)} lanes of weights {WEIGHTS} queued "
        f"round-robin while {WORKERS} workers are held; shares over the first half of the "
        "starts; TPE: the same tasks, submitted plainly"
    )
    return Measurement("pp", samples, [note, *notes], {"tasks per lane": each})


def judge_share(measurement: Measurement) -> list[Row]:
    return [
        anchor_row(
            measurement,
            SHARE,
            label="largest gap to a lane's weighted share of starts",
            baseline=None,
            target=f"PE <= {MAX_ERROR:g} pp",
            verdict=lambda medians: medians[PE] <= MAX_ERROR,
        )
    ]


def share_error(pool: Pool, each: int) -> dict[str, float]:
    order: list[int] = []  # list.append is atomic: each task appends its lane as it starts
    with running(pool, WORKERS) as executor:
        go = hold(executor)
        if pool is PRIORITY_EXECUTOR:
            submits = [lane(executor, f"s{w}", weight=w).submit for w in WEIGHTS]
        else:
            submits = [executor.submit] * len(WEIGHTS)
        futures = [
            submit(order.append, index) for _ in range(each) for index, submit in enumerate(submits)
        ]
        go.set()
        wait_all(futures)
    counted = Counter(order[: len(order) // 2])
    total = sum(WEIGHTS)
    gap = max(
        abs(100 * counted[index] / (len(order) // 2) - 100 * weight / total)
        for index, weight in enumerate(WEIGHTS)
    )
    return {SHARE: gap}


def run_first_start(sizes: Sizes, progress: Progress) -> Measurement:
    """A backlog of ``backlog_tasks`` no-ops in one lane, then one task in another."""
    backlog = sizes.backlog_tasks
    trials = [
        Trial(PE, "PE, weighted lanes", partial(first_start, PRIORITY_EXECUTOR, backlog)),
        Trial(TPE, TPE, partial(first_start, THREAD_POOL, backlog)),
    ]
    samples, notes = interleave(trials, sizes.repetitions, progress)
    note = (
        f"{backlog:,} no-op tasks queued in lane 'bulk' (weight 1), then, once they run, one "
        f"in lane 'new', {WORKERS} workers; from its submit to its start. TPE: the same, "
        "submitted plainly"
    )
    return Measurement("s", samples, [note, *notes], {"backlog": backlog})


def judge_first_start(measurement: Measurement) -> list[Row]:
    return [
        anchor_row(
            measurement,
            FIRST_START,
            label="a newly busy lane's first start",
            baseline=TPE,
            target=f"PE <= {MAX_DELAY * 1000:g} ms",
            verdict=lambda medians: medians[PE] <= MAX_DELAY,
        )
    ]


def first_start(pool: Pool, backlog: int) -> dict[str, float]:
    started: list[float] = []
    with running(pool, WORKERS) as executor:
        if pool is PRIORITY_EXECUTOR:
            bulk, new = lane(executor, "bulk", weight=1), lane(executor, "new")
        else:
            bulk = new = executor
        go = hold(executor)
        futures = [bulk.submit(noop) for _ in range(backlog)]
        go.set()
        # Once the backlog runs (taken in from the submitters' queue, where a drain of
        # all of it would be timed too): the lane becomes busy behind what is left.
        futures[WORKERS].result()
        submitted = time.perf_counter()
        # Waited for alone first: a wait() on the whole backlog would hold the GIL that long.
        new.submit(lambda: started.append(time.perf_counter())).result()
        wait_all(futures)
    return {FIRST_START: started[0] - submitted}


def hold(executor: Executor) -> threading.Event:
    """Occupy every worker until the event is set, so that what is submitted meanwhile
    is all queued before anything starts."""
    go, holding = threading.Event(), threading.Semaphore(0)

    def blocker() -> None:
        holding.release()
        go.wait()

    for _ in range(WORKERS):
        executor.submit(blocker)
    for _ in range(WORKERS):
        holding.acquire()
    return go
