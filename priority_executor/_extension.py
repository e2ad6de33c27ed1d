"""A task's extension: the one object that carries what features add to a task (a start
deadline, a lane, a retry policy, a recurrence, upstreams to wait for), and answers the
scheduler's hooks for them (see ``_task.Hooks``).

A plain task has none: the scheduler tests ``task.ext is None`` and goes on. Each hook here
asks the feature's own module: a lane its ``LaneState`` (``_lanes``), a retry its
``Retry`` policy (``_retry``), a series its ``Recurrence`` (``_recurring``).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, cast

from ._calendar import Calendar
from ._lane_engine import LaneState
from ._recurring import Recurrence
from ._retry import Retry, log_retry
from ._run import run
from ._runtime import Pooled, RunLimit
from ._task import (
    BLOCKED,
    EXPIRED,
    FAILED,
    PENDING,
    READY,
    STARTED,
    THROTTLED,
    Call,
    Core,
    Expiry,
    Tally,
    Task,
)

if TYPE_CHECKING:
    from ._dependencies import Upstreams
    from ._effects import Effects
    from ._events import Observer
    from ._gate import Gate
    from ._options import Options


class Extension:
    """The extension of a task with a deadline, a retry policy, a recurrence or a wall-clock
    due time, and maybe a lane (a task whose one feature is its lane has the lane itself:
    see LaneState)."""

    __slots__ = (
        "attempt",
        "deadline",
        "error",
        "expiry",
        "lane",
        "observer",
        "options",
        "recurrence",
        "retry",
        "run_limit",
        "time_limit",
        "upstreams",
        "wall_due",
    )
    lock_free = False  # it needs the promoter

    def __init__(
        self,
        deadline: float | None,
        lane: LaneState | None,
        retry: Retry | None,
        recurrence: Recurrence | Calendar | None,
        wall_due: float | None = None,
        options: Options | None = None,
        time_limit: float | None = None,
        observer: Observer | None = None,
    ) -> None:
        self.deadline = deadline
        # How long each run may take, in seconds: the call's, its lane's or its executor's
        # (see _runtime).
        self.time_limit = time_limit
        self.run_limit: RunLimit | None = None  # its run's, from its start to its end
        self.observer = observer  # if it is observed: told of each move (see _events)
        self.options = options  # those of the call that submitted it (see _options)
        # The wall-clock time it waits for (a run_at datetime, a calendar run): where that
        # falls on the executor's clock moves when the wall clock steps (see WallTime).
        self.wall_due = wall_due
        self.expiry: Expiry | None = None  # while the task waits, if it has a deadline
        self.lane = lane
        self.retry = retry
        self.recurrence = recurrence
        self.attempt = 1  # which attempt runs or waits, with a retry policy
        # The last attempt's exception while its retry waits: the task's outcome, should the
        # retry not start by the deadline (see late()).
        self.error: BaseException | None = None
        # The futures it waits for, if it was submitted after some (see _dependencies).
        self.upstreams: Upstreams | None = None

    def check_open(self) -> None:
        if self.lane is not None and self.lane.closed:
            raise RuntimeError("cannot schedule new futures after the lane's shutdown")

    def start(self, task: Task, entry: tuple[Any, ...], core: Core, effects: Effects) -> int:
        deadline = self.deadline
        if deadline is not None and deadline <= core.now():
            # Its expiry may still be on its way: never start a task that is late.
            return self.late()
        lane = self.lane
        if lane is not None and lane.start(task, entry, core, effects) == THROTTLED:
            return THROTTLED
        self.error = None  # an attempt starts: the last one's outcome is no longer the task's
        return STARTED

    def moved(self, task: Task, was: int, state: int, core: Core, effects: Effects) -> None:
        if state == STARTED:
            if self.time_limit is not None:
                # Its run starts: the limit's alarm is set in the claim's own locked step.
                limit = RunLimit(task, self, self.time_limit, cast(Pooled, core), effects)
                self.run_limit = limit
            retry = self.retry
            # The first attempt starts: the retry budget is every later attempt's start
            # deadline, as an expires= is (a series has no deadline: not for its runs).
            if (
                retry is not None
                and retry.budget is not None
                and self.attempt == 1
                and self.recurrence is None
            ):
                end = core.now() + retry.budget
                self.deadline = end if self.deadline is None else min(self.deadline, end)
        if self.wall_due is not None and (was == PENDING) is not (state == PENDING):
            if state == PENDING:
                core.wall_time.waiting += 1
            else:
                # Due (or claimed): its due time stays where its wall time fell then, as
                # any due task's, which a policy's key may have read.
                core.wall_time.waiting -= 1
                self.wall_due = None
        waiting = state <= READY
        if waiting is not (was <= READY):
            # Queued (new, or again), or out of the queue: its deadline's alarm goes with it.
            if waiting:
                if self.deadline is not None:
                    self.expiry = Expiry(task, self.deadline)
                    core.set_alarm(self.expiry, effects)
            elif self.expiry is not None:
                self.expiry.task = None  # a finished task, and its result, must not live on
                self.expiry = None
                core.alarm_died()
        if self.upstreams is not None and (was == BLOCKED) is not (state == BLOCKED):
            self.upstreams.moved(task, state, core)
        if self.lane is not None:
            self.lane.moved(task, was, state, core, effects)
        if self.observer is not None:
            self.observer.moved(task, was, state, self.attempt, self.error)

    def let_go(self) -> None:
        self.error = None

    def counted(self, state: int) -> None:
        if self.lane is not None:
            self.lane.counts[state] += 1

    def late(self) -> int:
        # A retry's future then ends with its last attempt's exception (see Task.abandon):
        # a task counts where its future ended.
        return FAILED if self.error is not None else EXPIRED

    def again_in(
        self, task: Task, exc: BaseException, now: float, effects: Effects
    ) -> float | None:
        """The one place that asks a retry policy "again, and when?"."""
        lane, retry = self.lane, self.retry
        if retry is None or (lane is not None and lane.cancelled):
            return None  # by the lane's shutdown(cancel_futures=True)
        wait = retry.again(exc, self.attempt)
        deadline = self.deadline
        if wait is None or (deadline is not None and now + wait >= deadline):
            return None  # the deadline bounds every attempt's start
        self.attempt += 1
        self.wall_due = None  # a retry waits for its backoff, not for a wall-clock time
        if self.recurrence is None:
            self.error = exc
        effects.later.append(
            functools.partial(log_retry, task.fn, lane, self.attempt - 1, retry.attempts, wait, exc)
        )
        return wait

    def begin(self, wall: float) -> bool:
        # A retry's attempt stands for the run whose first attempt began.
        return self.attempt > 1 or self.recurrence.begin(wall)  # type: ignore[union-attr]

    def skipped(self, task: Task, wall: float) -> None:
        calendar: Calendar = self.recurrence  # type: ignore[assignment]  # only one skips
        calendar.skipped(task.fn, self.lane, wall)

    def look_ahead(self) -> None:
        self.recurrence.look_ahead()  # type: ignore[union-attr]  # a series'

    def next_due(self, core: Core) -> float | None:
        self.attempt = 1  # a run ended for good: the next one that fails counts anew
        recurrence: Recurrence | Calendar = self.recurrence  # type: ignore[assignment]
        due = recurrence.next_due(core.now(), core.wall_time.place)
        self.wall_due = recurrence.wall_due
        return due

    def copy(self, task: Task) -> Extension:
        new = Extension(
            self.deadline,
            self.lane,
            self.retry,
            self.recurrence,
            self.wall_due,
            self.options,
            self.time_limit,
            self.observer,  # the same task, for its events and timings
        )
        new.attempt = self.attempt
        new.error = self.error
        new.upstreams = self.upstreams  # the copy waits for what its task waited for
        return new

    def run(self, task: Task, tally: Tally, call: Call | None, core: Core) -> bool | None:
        """Run the claimed task in a worker (see ``_run.run``); a lane's as its lane does;
        one with a time limit through its ``RunLimit``. True: the worker left the pool."""
        limit = self.run_limit
        if limit is not None:
            self.run_limit = None
            if call is not None:
                limit.inner = call
                backend = cast(Pooled, core).workers.backend  # one that can stop a call
                limit.kill = None if backend is None else backend.kill
            call = limit
        else:
            # Each run (a retry's attempt, a series' run) has a token of its own, made
            # when asked for (see _token).
            task.future._token = None
        if self.observer is not None:
            tally = self.observer.running(tally)  # it counts the run's end, then the worker
        if self.lane is None:
            run(task, tally, call)
        else:
            self.lane.run(task, tally, call, core)
        return limit is not None and limit.replaced


class Observed(Extension):
    """The extension of an observed (or timed) task that needs no promoter: one with no
    deadline, retry policy, recurrence or wall-clock time. It is queued through the intake,
    without the lock, as a lane's task with no other feature is (see ``Hooks.lock_free``):
    so it answers for its lane as that task's extension, its lane itself, would."""

    __slots__ = ()
    lock_free = True

    # The hooks of Extension, less the features it cannot have: what an observed no-op
    # task pays for its events is mostly these calls (see _events).
    def start(self, task: Task, entry: tuple[Any, ...], core: Core, effects: Effects) -> int:
        lane = self.lane
        if lane is not None and lane.start(task, entry, core, effects) == THROTTLED:
            return THROTTLED
        return STARTED

    def moved(self, task: Task, was: int, state: int, core: Core, effects: Effects) -> None:
        if self.lane is not None:
            self.lane.moved(task, was, state, core, effects)
        self.observer.moved(task, was, state, 1, None)  # type: ignore[union-attr]  # observed

    def run(self, task: Task, tally: Tally, call: Call | None, core: Core) -> bool | None:
        task.future._token = None  # a token of its own, made when asked for (see _token)
        tally = self.observer.running(tally)  # type: ignore[union-attr]  # observed
        if self.lane is None:
            run(task, tally, call)
        else:
            self.lane.run(task, tally, call, core)
        return False

    @property
    def closed(self) -> bool:
        return self.lane is not None and self.lane.closed

    @property
    def timed(self) -> bool:
        return self.lane is not None and self.lane.timed

    @property
    def gate(self) -> Gate | None:
        return None if self.lane is None else self.lane.gate
