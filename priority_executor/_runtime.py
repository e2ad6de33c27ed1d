"""Run-time limits: how long one run of a task (a call, a retry's attempt, a series' run)
may take, from its start.

A run with a limit is made through a ``RunLimit``, the run's ``_task.Call``, which is also
an alarm in the scheduler's timer heap at the run's start plus its limit (as a deadline's
``Expiry`` is): the promoter fires it on time, a ``ManualClock`` exactly at the limit.

The alarm is set in the locked step that claims the task STARTED (``Extension.moved``),
so a run's limit counts from its claim. Whichever comes first, the limit or the end of the
call, is decided by one atomic step under the scheduler's lock: ``RunLimit.state`` leaves
RUNNING once, in ``fire()`` (the limit) or in ``_finish()`` (the call). The limit that
wins fails the task's future at once with ``TaskTimeoutError`` (unless a retry or the
series follows: then the run's outcome is that error, when its call returns), sets the
run's token (``_token``), and on the process backend kills the process that runs the call.
What the call then returns or raises is dropped: its run ends with ``TaskTimeoutError``,
counted where the future ended.

A thread cannot be killed: a call that ignores its token keeps running, *overrunning*,
and still counts as running, holding its lane's slot, until it returns (its lane's limit
bounds the calls really in progress). Its worker leaves the pool at the limit, and a
replacement starts, for at most ``max_workers`` overrunning threads at once; past that, an
overrunning thread keeps its worker's place until it returns. A replaced thread exits once
its call returns.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from concurrent.futures import CancelledError, InvalidStateError
from concurrent.futures._base import CANCELLED_AND_NOTIFIED, PENDING, RUNNING
from typing import TYPE_CHECKING, Any, Callable, Protocol, TypeVar, cast

from ._arguments import callable_name, seconds
from ._backend import RemoteFuture
from ._logs import LOGGER, fields, in_lane
from ._task import Alarm, Call, Core, OwnFuture, Task
from ._token import CancelToken, TaskTimeoutError

if TYPE_CHECKING:
    from ._effects import Effects
    from ._extension import Extension
    from ._workers import WorkerPool

T = TypeVar("T")

# A run's state: the one atomic step leaves RUNNING for one of the two others.
_RUNNING, _ENDED, _OVER = 0, 1, 2


def check_time_limit(value: object) -> float | None:
    """A ``time_limit`` argument: None, or seconds (int, float or timedelta), finite, > 0."""
    return None if value is None else seconds("time_limit", value, positive=True)


class Pooled(Core, Protocol):
    """The scheduler, as a run's limit reaches it."""

    workers: WorkerPool


class LimitedFuture(OwnFuture[T]):
    """The future of a task with a time limit: failed at the limit while its call still
    runs, it drops what the run ends with later (see ``RunLimit``). Its one-shot call is
    set running by its ``RunLimit``, so that ``cancel()`` says False then, as
    ``ThreadPoolExecutor``'s does."""

    _over = False  # failed at its limit: what follows is dropped

    def fail_at_limit(self, exc: BaseException) -> None:
        with self._condition:
            if self._state not in (PENDING, RUNNING):  # the user cancelled it first
                return
            self._over = True
        with contextlib.suppress(InvalidStateError):  # cancelled in between: that stands
            super().set_exception(exc)

    def set_running_or_notify_cancel(self) -> bool:
        # Read in Future's private state, as RemoteFuture does (a last resort), without
        # its lock: each state tested here is final for this call (no one but the run
        # sets it running, cancel() cannot undo RUNNING, _over is never cleared).
        if self._over or self._state == RUNNING:
            return True  # failed at its limit, or set running by its RunLimit
        if self._state == CANCELLED_AND_NOTIFIED:
            return False  # reported by its RunLimit, which found it cancelled
        return super().set_running_or_notify_cancel()

    def set_result(self, result: T) -> None:
        if not self._over:
            super().set_result(result)

    def set_exception(self, exception: BaseException | None) -> None:
        if not self._over:
            super().set_exception(exception)


class LimitedRemoteFuture(LimitedFuture[T], RemoteFuture[T]):
    """The same, for a one-shot task on the process backend."""


def limited_future(owner: Any, remote: bool) -> OwnFuture[Any]:
    return LimitedRemoteFuture(owner) if remote else LimitedFuture(owner)


class RunLimit(Alarm):
    """The time limit of one run, and the run's call (see the module docstring)."""

    __slots__ = (
        "_seq",
        "_when",
        "core",
        "ext",
        "fn",
        "future",
        "inner",
        "kill",
        "limit",
        "overran",
        "replaced",
        "state",
        "thread",
        "token",
    )

    def __init__(self, task: Task, ext: Extension, limit: float, core: Pooled, effects: Effects):
        """The run of ``task`` starts: claimed STARTED, under the scheduler's lock, by the
        worker that will make its call (see ``Extension.moved``). So its alarm is set in
        the same locked step as the claim."""
        self.fn = task.fn  # its name is what the error and the log say
        self.ext = ext
        self.limit = limit
        self.inner: Call | None = None  # the backend's call, or None: here, in this thread
        self.kill: Callable[[OwnFuture[Any]], object] | None = None  # the backend's
        self.core = core
        self.state = _RUNNING
        self.overran = False  # its thread overruns, counted in the pool's overrunning
        self.replaced = False  # its thread left the pool at the limit
        self.thread = threading.current_thread()  # the worker's: take() runs in it
        self._when = core.now() + limit
        self._seq = core.next_seq()
        # A fresh token for each run, made before the run can be seen running: a stop()
        # either cancels the future first or finds this token.
        future = cast(LimitedFuture[Any], task.future)  # a limited task's
        self.future: LimitedFuture[Any] | None = future
        self.token = future._token = CancelToken(self._when, core.now)
        core.set_alarm(self, effects)

    def live(self) -> bool:
        return self.state == _RUNNING

    def drop(self) -> None:
        self.future = None

    def __call__(
        self, future: OwnFuture[Any], fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Any
    ) -> Any:
        core, ext, inner = self.core, self.ext, self.inner
        if inner is None and ext.retry is None and ext.recurrence is None:
            if not future.set_running_or_notify_cancel():
                # A one-shot call runs as ThreadPoolExecutor's does, so cancel() says False
                # from here on; it was cancelled since the claim: run() reports it.
                raise CancelledError
        elif inner is not None and self.kill is not None:
            kill = self.kill
            self.token.on_cancel(lambda: kill(future))  # the limit, or stop(): it dies
        try:
            result = fn(*args, **kwargs) if inner is None else inner(future, fn, args, kwargs)
        except BaseException:
            if core.locked(self._finish):
                raise
            raise self._error() from None
        if not core.locked(self._finish):
            raise self._error()
        return result

    def _error(self) -> TaskTimeoutError:
        return TaskTimeoutError(callable_name(self.fn), self.limit)

    # -- the one atomic step: the call's side, then the limit's ------------------------------

    def _finish(self, effects: Effects) -> bool:
        """The call returned or raised: True if before its limit (which is then dead),
        False if the limit came first."""
        won = self.state == _RUNNING
        if won:
            self.state = _ENDED
            self.core.alarm_died()
        elif self.overran:
            workers = self.core.workers
            workers.overrunning -= 1
            if self.replaced:
                workers.replaced -= 1
        self.future = None  # the alarm, dead in the heap until compacted, holds no task
        return won

    def fire(self, core: Core, now: float, effects: Effects) -> None:
        if self.state != _RUNNING:
            return
        self.state = _OVER  # the limit came first: see _finish
        ext, error = self.ext, self._error()
        if ext.observer is not None:
            ext.observer.timed_out(ext.attempt, self.limit, now)
        if self.inner is None:
            # Its thread cannot be stopped: it overruns, and may leave the pool.
            workers = self.core.workers
            workers.overrunning += 1
            self.overran = True
            if workers.replaced < workers.max_workers and workers.leave(self.thread):
                workers.replaced += 1
                self.replaced = True
                effects.later.append(functools.partial(_replace, self.core))
        future = self.future
        if future is not None and self._ends_task(ext, error, now):
            # Every future whose limit passed fails first; then the log lines and the
            # tokens, whose callbacks (and the threads they wake) could make them late.
            effects.later.append(functools.partial(future.fail_at_limit, error))
        effects.finally_.append(functools.partial(self._at_limit, error))

    def _ends_task(self, ext: Extension, error: TaskTimeoutError, now: float) -> bool:
        """Whether the run's time-out ends its task (its future fails now), or a retry or
        the series' next run follows, once the call returns."""
        if ext.recurrence is not None:
            lane = ext.lane
            return lane is None or not lane.survive_failures
        retry = ext.retry
        if retry is None:
            return True
        wait = retry.again(error, ext.attempt)
        return wait is None or (ext.deadline is not None and now + wait >= ext.deadline)

    def _at_limit(self, error: TaskTimeoutError) -> None:
        LOGGER.warning(
            "%s%s ran past its time limit of %g s; its call is asked to stop",
            error.task,
            in_lane(self.ext.lane),
            self.limit,
            extra=fields(self.fn, self.ext.lane, limit=self.limit),
        )
        self.token.cancel(error)


def _replace(core: Pooled) -> None:
    # A worker runs already, or more will start as work comes: one that cannot start now
    # is no loss.
    with contextlib.suppress(RuntimeError):
        core.workers.start_worker(core)  # type: ignore[arg-type]  # the scheduler
