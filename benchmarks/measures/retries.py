"""Measure 14: lateness of retries, from the time a retry is due to the time it starts.

Every task fails twice, then succeeds, on an executor made with ``retry=Retry(3,
backoff=0.001)``: attempt k + 1 is due ``0.001 * 2 ** (k - 1)`` s after attempt k ended. Each
attempt reads ``time.monotonic``, the executor's clock, as its first line and, when it fails,
as its last: a retry's lateness is its start minus that end plus the backoff, so it includes
what the executor does between the exception and queueing the retry. The first attempts are
due at the seeded delays of measure 4, spread over its window, so that the figure is the
scheduler's timing and not a queue of every task due at once.

The control does the same without ``Retry``: the task, instead of raising, resubmits itself
with ``delay=`` the same backoff. Those are plain delayed tasks, submitted at the same moments
from the same worker threads, and their lateness is measured the same way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from functools import partial
from typing import Any

from benchmarks.config import Sizes
from benchmarks.measures.lateness import seeded_delays
from benchmarks.pools import PRIORITY_EXECUTOR, Pool, Submit, priority_executor, running
from benchmarks.results import PE, Measurement, Row, anchor_row, percentile
from benchmarks.runner import Progress, Trial, interleave, wait_all

WORKERS = 4
ATTEMPTS = 3
BACKOFF = 0.001
FACTOR = 2.0
WAITS = tuple(BACKOFF * FACTOR**k for k in range(ATTEMPTS - 1))
"""The wait before attempt k + 2, as DESIGN.md defines it (``max_backoff`` is far above)."""
MAX_RATIO = 1.5
RESUBMIT = "PE resubmit"


def run(sizes: Sizes, progress: Progress) -> Measurement:
    """``sizes.retry_tasks`` tasks, first due over ``sizes.lateness_window``, both ways."""
    delays = seeded_delays(sizes.retry_tasks, sizes.lateness_window)
    trials = [
        Trial(PE, "PE, Retry", partial(retry_lateness, delays, retried=True)),
        Trial(RESUBMIT, RESUBMIT, partial(retry_lateness, delays, retried=False)),
    ]
    samples, notes = interleave(trials, sizes.repetitions, progress)
    note = (
        f"{len(delays):,} tasks failing {ATTEMPTS - 1} times, first due in "
        f"[0, {sizes.lateness_window:g} s], {WORKERS} workers; PE: Retry({ATTEMPTS}, "
        f"backoff={BACKOFF:g}), its warnings dropped by a NullHandler; {RESUBMIT}: "
        "each failure resubmits the task with delay=the same backoff"
    )
    parameters = {"tasks": len(delays), "window_s": sizes.lateness_window}
    return Measurement("ms", samples, [note, *notes], parameters)


def judge(measurement: Measurement) -> list[Row]:
    """Retries may be late by at most ``MAX_RATIO`` times plain delayed tasks, at p99."""
    return [
        anchor_row(measurement, "p50", label="p50", baseline=RESUBMIT),
        anchor_row(
            measurement,
            "p99",
            label="p99",
            baseline=RESUBMIT,
            target=f"PE p99 <= {MAX_RATIO}x {RESUBMIT}",
            verdict=lambda p99: p99[PE] <= MAX_RATIO * p99[RESUBMIT],
        ),
    ]


class Flake(Exception):
    """What a failing attempt raises."""


class Attempts:
    """A task that fails until its last attempt; it notes when each attempt starts and fails."""

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.failures: list[float] = []

    def run(self) -> int:
        """One attempt: the number it is when it succeeds; raises Flake before the last."""
        self.starts.append(time.monotonic())
        if len(self.starts) == ATTEMPTS:
            return ATTEMPTS
        self.failures.append(time.monotonic())
        raise Flake

    def lateness(self) -> list[float]:
        """Every retry's start minus its due time, the failure before it plus its wait."""
        return [
            start - (failed + wait)
            for start, failed, wait in zip(self.starts[1:], self.failures, WAITS)
        ]


def resubmitting(submit: Submit, attempts: Attempts, done: Future[int]) -> None:
    """The control's task: an attempt whose failure submits the next one, delayed."""
    try:
        done.set_result(attempts.run())
    except Flake:
        submit(resubmitting, submit, attempts, done, delay=WAITS[len(attempts.failures) - 1])


def retry_lateness(delays: Sequence[float], *, retried: bool) -> dict[str, float]:
    """p50 and p99, in ms, of the retries' lateness: by ``Retry``, or by resubmitting.

    Raises RuntimeError when a task did not end with its last attempt's result.
    """
    tasks = [Attempts() for _ in delays]
    pool = retrying_pool() if retried else PRIORITY_EXECUTOR
    futures: list[Future[Any]]
    with running(pool, WORKERS) as executor, warnings_dropped():
        submit: Submit = executor.submit
        if retried:
            futures = [submit(task.run, delay=delay) for task, delay in zip(tasks, delays)]
        else:
            futures = [Future() for _ in tasks]
            for task, delay, done in zip(tasks, delays, futures):
                submit(resubmitting, submit, task, done, delay=delay)
        wait_all(futures)
    wrong = sum(future.exception() is not None or future.result() != ATTEMPTS for future in futures)
    if wrong:
        raise RuntimeError(f"{wrong:,} of {len(futures):,} tasks lack attempt {ATTEMPTS}'s result")
    late = [seconds * 1e3 for task in tasks for seconds in task.lateness()]
    return {"p50": percentile(late, 50), "p99": percentile(late, 99)}


def retrying_pool() -> Pool:
    """PE with ``retry=Retry(ATTEMPTS, backoff=BACKOFF, factor=FACTOR)``."""
    from priority_executor import Retry

    retry = Retry(ATTEMPTS, backoff=BACKOFF, factor=FACTOR)
    return Pool(PE, partial(priority_executor, retry=retry))


@contextmanager
def warnings_dropped() -> Iterator[None]:
    """Keep the warning logged for every retried failure off stderr while the block runs.

    The records are still made, so their cost stays in the figures; only the writing of
    thousands of tracebacks to the terminal, which depends on the terminal, is left out.
    """
    logger = logging.getLogger("priority_executor")
    handler, propagate = logging.NullHandler(), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.propagate = propagate
        logger.removeHandler(handler)
