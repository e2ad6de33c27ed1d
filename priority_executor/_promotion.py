"""When tasks become due: the promotion of what is due by now, the promoter's plan, and a
task queued again for later (a series' next run, a retry after its backoff).

A mixin of ``_scheduler.Scheduler``, which it is written for: its methods are the
scheduler's, under the same lock and rules (see that module), kept here as one idea.
"""

from __future__ import annotations

import functools
import math
from heapq import heapify, heappop
from typing import TYPE_CHECKING, Any, Callable, TypeVar, cast

from ._clock import WallTime
from ._task import FAILED, PENDING, READY, VOID, MoreHooks, Task

if TYPE_CHECKING:
    from ._effects import Effects
    from ._promoter import Promoter
    from ._task import Core, TimerEntry

R = TypeVar("R")


class Promotion:
    """The scheduler's promotion and its re-queuing of tasks (see the module docstring)."""

    if TYPE_CHECKING:  # the scheduler's, which this is mixed into
        counts: list[int]
        closed: str | None
        broken: BaseException | None
        shutdown_requested: str | None
        cancelled_all: bool
        series: set[Task]
        timers: list[TimerEntry]
        promoter: Promoter
        wall_time: WallTime
        retries: int
        _alarms: int
        now: Callable[[], float]
        next_seq: Callable[[], int]

        def locked(self, step: Callable[[Effects], R]) -> R: ...
        def move(
            self, task: Task, state: int, effects: Effects, was: int | None = None
        ) -> None: ...
        def claim(self, task: Task, state: int, effects: Effects) -> None: ...
        def queue(self, task: Task, key: Any, effects: Effects, was: int | None = None) -> None: ...
        def discarded(self, effects: Effects) -> None: ...
        def shutdown(
            self, cancel_futures: bool, reason: str, cancel_not_due: bool = False
        ) -> None: ...
        def _make_due(
            self, task: Task, entry: tuple[Any, ...], effects: Effects, was: int | None = None
        ) -> None: ...
        def _key_or_error(self, task: Task) -> Any: ...
        def _finished(self) -> bool: ...

    def run_ended(self, task: Task) -> None:
        """A run of a recurring series ended: queue the next one, unless the series ended."""
        self.locked(functools.partial(self._next_run, task))

    def _next_run(self, task: Task, effects: Effects) -> None:
        due = over = None
        if self.closed is None and not task.future.done():
            # A series' extension; this is the scheduler it is mixed into.
            due = cast(MoreHooks, task.ext).next_due(cast("Core", self))
            over = due is None
        if due is not None:
            task._when = due
            task._seq = self.next_seq()
            # VOID: its worker counts the run that ended (see _run.run).
            self.queue(task, None, effects, VOID)
        elif task in self.series:
            # Cancelled, failed or shut down: its future's callback, still to come, ends
            # the series (see _end) and lets go of the task, which no run uses now. Or
            # its calendar has no run left: the series ends with its future's result.
            self.move(task, VOID, effects, VOID)
            if over:
                effects.later.append(task.end_series)
        else:
            effects.drop.append(task.let_go())

    def try_again(self, task: Task, exc: BaseException) -> bool:
        """An attempt of a task with a retry policy raised ``exc``: queue the task again
        when its policy says, and return True; or return False, and the caller ends the
        task with ``exc``. The attempt's start is taken back: the task waits as if it had
        never started, and is counted once, when its last attempt ends.

        A shutdown that began since does not stop it: the task was accepted, and shutdown
        waits for it (see _finished). ``cancel_futures``, a broken pool, a start deadline
        that the retry would miss, or the task's cancellation do.
        """
        # The promoter, which a retry waits for, started with the task: a task with a retry
        # policy is never queued without the lock (see add()).
        return self.locked(functools.partial(self._try_again, task, exc))

    def _try_again(self, task: Task, exc: BaseException, effects: Effects) -> bool:
        if task.future.done() or self.broken is not None or self.cancelled_all:
            return False  # cancelled (or a series ended), or nothing may start any more
        now = self.now()
        wait = cast(MoreHooks, task.ext).again_in(task, exc, now, effects)  # a retry's
        if wait is None:
            return False
        task._when = now + wait
        task._seq = self.next_seq()
        self.retries += 1
        self.queue(task, None, effects)  # out of STARTED: the start is taken back
        return True

    def promote_due(self) -> None:
        """Move every task due by now into the ready heap; expire every task whose deadline
        passed."""
        self.locked(self._promote)

    def promote_and_plan(self) -> float | None:
        """The promoter's step: promote, then return when to promote next, or None when
        the promoter may exit."""
        if self.shutdown_requested is not None:
            self.shutdown(False, self.shutdown_requested)
        return self.locked(self._plan)

    def _plan(self, effects: Effects) -> float | None:
        self._promote(effects)
        timers = self.timers
        while timers and not timers[0].live():
            heappop(timers)
        wake_at = timers[0]._when if timers else math.inf
        if self.wall_time.waiting:
            # Steps of the wall clock wake no one: looked for this often (see WallTime).
            wake_at = min(wake_at, self.now() + WallTime.PERIOD)
        self.promoter.sleeps_until = wake_at
        return None if self._finished() else wake_at

    def _promote(self, effects: Effects, submitter: bool = False) -> bool:
        """Promote what is due by now; return whether more tasks are ready than before
        (then a submit hands the GIL to the workers woken for them: see add()).
        ``submitter``: only make due tasks ready; an alarm, or a task whose policy key
        fails, is left to the promoter, which the submit wakes."""
        timers, ready = self.timers, self.counts[READY]
        if self.wall_time.waiting and self.wall_time.stepped():
            self._place_anew()
        now = self.now()
        while timers and timers[0]._when <= now:
            entry = timers[0]
            if not entry.live():
                heappop(timers)
            elif isinstance(entry, Task):
                key = self._key_or_error(entry)
                if isinstance(key, BaseException):
                    if submitter:
                        effects.later.append(self.promoter.wake)
                        break
                    heappop(timers)
                    self.claim(entry, FAILED, effects)
                    effects.later.append(functools.partial(entry.fail, key))
                    continue
                heappop(timers)
                self._make_due(entry, (*key, entry._seq, entry), effects)
            elif submitter:
                effects.later.append(self.promoter.wake)
                break
            else:
                heappop(timers)
                self._alarms -= 1
                entry.fire(self, now, effects)  # type: ignore[attr-defined]  # an Alarm
        if effects.later:
            self.discarded(effects)
        return self.counts[READY] > ready

    def _place_anew(self) -> None:
        """The wall clock was stepped: every task waiting for a wall-clock time waits for
        it where it now falls on the executor's clock."""
        place = self.wall_time.place
        for entry in self.timers:
            if isinstance(entry, Task) and entry.state == PENDING:
                wall = None if entry.ext is None else entry.ext.wall_due
                if wall is not None:
                    entry._when = place(wall)
        heapify(self.timers)
