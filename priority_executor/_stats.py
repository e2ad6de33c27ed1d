from __future__ import annotations

from dataclasses import dataclass

from ._task import (
    BLOCKED,
    CANCELLED,
    COMPLETED,
    EXPIRED,
    FAILED,
    PENDING,
    READY,
    SKIPPED,
    STARTED,
    THROTTLED,
)


@dataclass(frozen=True)
class ExecutorStats:
    """A snapshot of where every task submitted to an executor stands.

    Each task is in exactly one of the state fields. Each run of a recurring series counts
    once; a cancelled series counts once more, in ``cancelled``. A task that is tried again
    counts once, in the state its latest attempt left it in; ``retries`` counts events, not
    tasks.
    """

    scheduled: int  # waiting for its due time, or for a retry's
    ready: int  # due, waiting for a worker
    throttled: int  # due, held back by its lane's limits
    running: int
    completed: int  # returned normally
    failed: int  # raised, or could not be scheduled (a broken policy or pool)
    cancelled: int  # by the user or by shutdown(cancel_futures=True)
    expired: int  # not started by its deadline (its first attempt, or a retry)
    retries: int = 0  # retries queued so far
    skipped: int = 0  # runs of calendar series later than their misfire grace, not made
    # Of those running: threads whose call ran past its time limit and goes on (its future
    # failed at the limit; it is counted failed once its call returns).
    overrunning: int = 0
    blocked: int = 0  # waiting for its upstreams (see PriorityExecutor.options(after=))


def make_stats(counts: list[int], retries: int, overrunning: int = 0) -> ExecutorStats:
    """A snapshot from counts by state (see ``_task``)."""
    return ExecutorStats(
        scheduled=counts[PENDING],
        ready=counts[READY],
        throttled=counts[THROTTLED],
        running=counts[STARTED],
        completed=counts[COMPLETED],
        failed=counts[FAILED],
        cancelled=counts[CANCELLED],
        expired=counts[EXPIRED],
        retries=retries,
        skipped=counts[SKIPPED],
        overrunning=overrunning,
        blocked=counts[BLOCKED],
    )
