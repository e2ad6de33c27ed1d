"""Expiry: how a task that did not start by its deadline is told apart from a cancelled one.

Its future is cancelled, as ``concurrent.futures`` knows no other way to say "will never
run": ``cancelled()`` is True, and ``wait()``, ``as_completed()`` and existing handlers of
``CancelledError`` work unchanged. What differs is what ``result()`` and ``exception()``
raise: ``Expired``, which names the deadline. The future carries that (its ``_reason``)
from before it is cancelled, so whoever sees it cancelled finds it. A dependent whose
upstream failed is told apart the same way (see ``_dependencies.DependencyFailed``).
"""

from __future__ import annotations

import datetime
import functools
import logging
from concurrent.futures import CancelledError, Future
from typing import Any, Callable

from ._arguments import callable_name
from ._clock import wall_datetime
from ._logs import LOGGER, Named, fields


class Expired(CancelledError):
    """A task did not start by its deadline (``expires``), so the executor cancelled it:
    what ``result()`` and ``exception()`` of its future raise. A ``CancelledError``, so
    handlers of a cancellation still catch it; a user's ``cancel()`` gives the plain one.

    ``deadline``: when it expired, as an aware datetime (the wall time of the executor's
    clock); ``task``: the name of the task's callable."""

    def __init__(self, deadline: datetime.datetime, task: str = "the task") -> None:
        super().__init__(
            f"{task} expired: not started by its deadline,"
            f" {deadline.isoformat(sep=' ', timespec='milliseconds')}"
        )
        self.deadline = deadline
        self.task = task

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.deadline, self.task))


def mark_expired(
    future: Future[Any], fn: Callable[..., Any], lane: Named | None, wall: float
) -> None:
    """The task of ``future``, whose call is ``fn``, in ``lane``, expired at ``wall`` (a
    time.time()): say so on the future, before it is cancelled, and in the log.

    Raises nothing that a user's objects do not: its caller cancels the future next, and
    a future left pending would hang whoever waits for it."""
    when = wall_datetime(wall).astimezone()
    name = callable_name(fn)
    mark_cancelled(future, functools.partial(Expired, when, name))
    if LOGGER.isEnabledFor(logging.DEBUG):
        extra = fields(fn, lane, deadline=when.isoformat())
        # Once the future is cancelled: a filter or handler of the user's that raises
        # leaves no future pending, and the future logs what it raised, as for any
        # done-callback.
        future.add_done_callback(
            lambda _: LOGGER.debug(
                "Task %s expired: not started by its deadline, %s", name, when, extra=extra
            )
        )


def mark_cancelled(future: Future[Any], reason: Callable[[], CancelledError]) -> None:
    """Say why ``future`` is about to be cancelled by the executor: ``reason()`` makes the
    exception that its ``result()`` and ``exception()`` raise."""
    future._reason = reason  # type: ignore[attr-defined]  # an OwnFuture


def raise_reason(future: Future[Any]) -> None:
    """Raise why the cancelled ``future`` was cancelled, if the executor said (a fresh
    exception each time: one instance raised in many places would collect all their
    tracebacks); its cause, if it has one, is kept."""
    reason = future._reason  # type: ignore[attr-defined]  # an OwnFuture
    if reason is not None:
        exc = reason()
        exc.__suppress_context__ = True  # not "during handling of CancelledError"
        raise exc
