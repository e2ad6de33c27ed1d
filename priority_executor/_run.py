"""The one run of a claimed task, in a worker: its call, in its submitter's context, and
its future completed; or, for a retry or a series, the task queued again."""

from __future__ import annotations

from typing import cast

from ._arguments import callable_name
from ._logs import LOGGER, error_name, fields, in_lane
from ._task import (
    CANCELLED,
    COMPLETED,
    FAILED,
    SKIPPED,
    VOID,
    Call,
    MoreHooks,
    Owner,
    Tally,
    Task,
)


def run(task: Task, tally: Tally, call: Call | None) -> None:
    """Run a claimed task in a worker, with ``call`` (a backend's) or here, and complete its
    future; or, for a retry or a series, queue the task again. Each end is counted in the
    worker's ``tally`` before the future completes: whoever sees the future done and then
    reads ``stats()`` finds the task counted.

    The plain path first: the future runs, as ``ThreadPoolExecutor``'s does, and cannot be
    cancelled any more. Any other keeps its future pending through the call (see
    ``_run_held``).
    """
    ext = task.ext
    if call is not None or (
        ext is not None and (ext.recurrence is not None or ext.retry is not None)
    ):
        _run_held(task, tally, call)
        return
    future, fn, args, kwargs, context = task.hand_over()
    if not future.set_running_or_notify_cancel():
        tally[CANCELLED] += 1  # cancelled between the claim and this line
        return
    try:
        # In the submitter's context: the task's own copy, which it runs once, so what it
        # sets there is seen by no other task. The future completes outside it, in the
        # worker's, as ThreadPoolExecutor's does.
        result = fn(*args, **kwargs) if context is None else context.run(fn, *args, **kwargs)
    except BaseException as exc:
        tally[FAILED] += 1
        future.set_exception(exc)
        # The traceback holds this frame, and the future holds the traceback.
        del future
        return
    tally[COMPLETED] += 1
    future.set_result(result)


def _run_held(task: Task, tally: Tally, call: Call | None) -> None:
    """``run()`` for a series' run, a retry's attempt or a backend's call, whose future stays
    pending through the call: a series' until the series ends, a retry's until its last
    attempt, a backend's while the call may still be cancelled there (see ``_backend``). A
    ``cancel()`` that comes during the call then wins: what follows never starts, and the
    outcome is dropped."""
    ext = task.ext
    future = task.future
    owner: Owner = future._owner()  # type: ignore[assignment]  # alive: its thread holds it
    series = ext is not None and ext.recurrence is not None
    result = error = None
    if future.cancelled():  # since the claim: nothing starts
        if series:
            tally[VOID] += 1  # the series was cancelled: it counts once, as cancelled
            owner.run_ended(task)
            return
    else:
        if series and not _begin(task, owner, tally):
            return
        # Each run of a series, each attempt of a retry, in a copy of its own of the
        # submitter's context: none sees what an earlier one set there. A backend's
        # hand-off is made in it (see _backend): the call runs in it where the backend
        # carries context. No helper function makes the call: its frame, in the traceback
        # of a failed call, would hold the future, which holds the exception.
        context = task.context
        try:
            if context is None:
                if call is None:
                    result = task.fn(*task.args, **task.kwargs)
                else:
                    result = call(future, task.fn, task.args, task.kwargs)
            elif call is None:
                result = context.copy().run(task.fn, *task.args, **task.kwargs)
            else:
                result = context.copy().run(call, future, task.fn, task.args, task.kwargs)
        except BaseException as exc:
            if ext is not None and ext.retry is not None and owner.try_again(task, exc):
                # Queued again: the task is no longer this worker's. No local holds the
                # exception, whose traceback holds this frame: once the task lets go of
                # it, it is freed, and the call's arguments with it.
                return
            error = exc
        if series:
            _run_over(task, owner, tally, error)
            return
    handed = task.hand_over()[0]
    del future
    # Atomic with cancel(): a cancellation that came during the call wins, drops its
    # outcome, and is reported here (told of it, a started task does nothing).
    if not handed.set_running_or_notify_cancel():
        tally[CANCELLED] += 1
    elif error is None:
        tally[COMPLETED] += 1
        handed.set_result(result)
    else:
        tally[FAILED] += 1
        handed.set_exception(error)
        del handed, error  # the traceback holds this frame, and the future holds it


def _begin(task: Task, owner: Owner, tally: Tally) -> bool:
    """A series' run is about to start: False if it does not (skipped past its misfire
    grace, or its schedule failed), the run counted and the series gone on or ended."""
    hooks = cast(MoreHooks, task.ext)
    wall = owner.wall()
    try:
        go = hooks.begin(wall)
    except BaseException as exc:  # its schedule failed: the series cannot go on
        _run_over(task, owner, tally, exc, fatal=True)
        return False
    if not go:
        hooks.skipped(task, wall)
        _run_over(task, owner, tally, None, SKIPPED)
    return go


def _run_over(
    task: Task,
    owner: Owner,
    tally: Tally,
    error: BaseException | None,
    state: int = COMPLETED,
    fatal: bool = False,
) -> None:
    """A run of a series ended in ``state`` (or failed with ``error``): queue the next one,
    unless a failure ends the series (``fatal``: its schedule's, whatever its lane says)."""
    ext = cast(MoreHooks, task.ext)
    if error is not None:
        lane = ext.lane
        if fatal or lane is None or not (lane.survive_failures and isinstance(error, Exception)):
            _end_series(task, owner, tally, FAILED, error, fatal)
            return
        LOGGER.error(
            "Recurring task %s%s raised; its series goes on",
            callable_name(task.fn),
            in_lane(lane),
            exc_info=error,
            extra=fields(task.fn, lane, error=error_name(error)),
        )
        del error
        state = FAILED
    try:
        ext.look_ahead()
    except BaseException as exc:  # its schedule failed: the series cannot go on
        _end_series(task, owner, tally, state, exc, True)
        return
    # Counted once the next run is queued: whoever sees this run counted and moves the
    # clock finds the series' next run already waiting.
    owner.run_ended(task)
    tally[state] += 1


def _end_series(
    task: Task, owner: Owner, tally: Tally, state: int, error: BaseException, schedule: bool
) -> None:
    what = "The schedule of recurring task %s%s" if schedule else "Recurring task %s%s"
    lane = cast(MoreHooks, task.ext).lane
    LOGGER.error(
        what + " raised; its series ends",
        callable_name(task.fn),
        in_lane(lane),
        exc_info=error,
        extra=fields(task.fn, lane, error=error_name(error)),
    )
    tally[state] += 1
    task.fail(error)
    del error  # its traceback holds this frame
    owner.run_ended(task)  # the series is done: its task is let go
