"""The token inside a task: how running work is asked to stop, and how it finds out.

A Python thread cannot be killed, so stopping a call that runs in one is cooperative: the
task's ``CancelToken`` is set (by its time limit, see ``_runtime``, or by ``stop()``), and
a call that looks at it (``cancelled``, ``raise_if_cancelled()``), sleeps on it
(``sleep()``), or registered an ``on_cancel`` callback (to close the socket it is blocked
on) stops. ``current()`` finds the running task's token from inside its call.

Every task can reach a token, a plain one too, at no cost to a task that never asks: the
token of a task without a time limit is made by the first ``current()`` or ``stop()``
that asks for it, and kept on its future (``OwnFuture._token``). ``current()`` finds the
future of the call it is made from in the frame of ``_run.run`` (or ``_run._run_held``),
which makes every call: so the plain path stores nothing per task for it. That reads a
frame's locals (``sys._getframe``, which PyPy has too): a heuristic on the interpreter's
frames, named as such, in place of a thread-local written twice a task.
"""

from __future__ import annotations

import sys
import threading
from concurrent.futures import CancelledError, Future
from types import FrameType
from typing import Any, Callable

from ._run import _run_held, run
from ._task import OwnFuture
from ._threads import LOGGER


class TaskTimeoutError(TimeoutError):
    """A task ran past its time limit: what its future fails with, at the limit, and what
    ``raise_if_cancelled()`` raises in the task from then on. ``task``: the name of the
    task's callable; ``limit``: the limit, in seconds."""

    def __init__(self, task: str, limit: float) -> None:
        super().__init__(f"{task} ran past its time limit of {limit:g} s")
        self.task = task
        self.limit = limit

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.task, self.limit))


class TaskStopped(CancelledError):
    """A running task was asked to stop by ``stop()``: what ``raise_if_cancelled()``
    raises in it. A ``CancelledError``, so that handlers of a cancellation catch it."""


class CancelToken:
    """The cancellation token of one run of a task (a call, a retry's attempt, a series'
    run): set once, by the run's time limit or by ``stop()``, never cleared.

    ``deadline``: when the run's time limit ends, on the executor's clock (as its
    ``now()``), or None without a limit; ``time_left()`` reads it against that clock."""

    __slots__ = ("_callbacks", "_event", "_now", "_reason", "deadline")

    def __init__(self, deadline: float | None = None, now: Callable[[], float] | None = None):
        self.deadline = deadline
        self._now = now
        # Made by the first sleep(): most runs never sleep on their token, and an Event is
        # a Condition and two locks.
        self._event: threading.Event | None = None
        self._reason: BaseException | None = None
        self._callbacks: list[Callable[[], object]] | None = []  # None once set

    @property
    def cancelled(self) -> bool:
        """Whether the run was asked to stop."""
        return self._reason is not None

    @property
    def reason(self) -> BaseException | None:
        """Why: a ``TaskTimeoutError`` at the limit, a ``TaskStopped`` after ``stop()``."""
        return self._reason

    def raise_if_cancelled(self) -> None:
        """Raise why the run was asked to stop (a fresh instance each time: one raised in
        many places would collect all their tracebacks), if it was."""
        reason = self._reason
        if reason is not None:
            raise type(reason)(*reason.__reduce__()[1]) from None

    def sleep(self, seconds: float) -> bool:
        """Sleep for ``seconds`` (real time), or until the run is asked to stop, whichever
        comes first; return whether it was asked to stop."""
        event = self._event
        if event is None:
            with _lock:
                if self._reason is not None:
                    return True
                event = self._event
                if event is None:
                    event = self._event = threading.Event()
        return event.wait(seconds)

    def time_left(self) -> float | None:
        """Seconds until the run's time limit (negative once past it), or None without one."""
        if self.deadline is None or self._now is None:
            return None
        return self.deadline - self._now()

    def on_cancel(self, callback: Callable[[], object]) -> None:
        """Call ``callback()`` when the run is asked to stop: in the thread that asks (at a
        time limit, the executor's timer thread: keep it short, such as closing a socket),
        or at once, here, if it was asked already. What it raises is logged."""
        with _lock:
            callbacks = self._callbacks
            if callbacks is not None:
                callbacks.append(callback)
                return
        _call(callback)

    def cancel(self, reason: BaseException) -> bool:
        """Ask the run to stop because of ``reason``; False if it was asked already."""
        with _lock:  # one lock for all tokens: setting one is rare, and quick
            callbacks = self._callbacks
            if callbacks is None:
                return False
            self._callbacks = None
            self._reason = reason
            event = self._event  # a sleep() that made one after this sees the reason
        if event is not None:
            event.set()
        for callback in callbacks:
            _call(callback)
        return True

    def __repr__(self) -> str:
        state = "cancelled" if self.cancelled else "live"
        return f"<CancelToken {state} deadline={self.deadline!r}>"


_lock = threading.Lock()


def _call(callback: Callable[[], object]) -> None:
    try:
        callback()
    except Exception:  # as Future reports a done-callback that raised, and goes on
        LOGGER.exception("exception calling on_cancel callback %r", callback)


def token_of(future: OwnFuture[Any]) -> CancelToken:
    """The token of the task of ``future``, made if no one asked for it before."""
    token: CancelToken | None = future._token
    if token is None:
        with _lock:
            token = future._token
            if token is None:
                token = future._token = CancelToken()
    return token


# The functions that make a task's call, with its future in their local ``future``.
_RUNS = (run.__code__, _run_held.__code__)


def current() -> CancelToken:
    """The cancellation token of the task whose call is running in this thread.

    Raises ``RuntimeError`` outside such a call (in the submitting code, in a
    done-callback, in a call run by a backend elsewhere): there is no task to stop."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code in _RUNS:
            # Their local: the future of the task whose call it makes.
            future = frame.f_locals.get("future")
            if isinstance(future, OwnFuture):
                return token_of(future)
        frame = frame.f_back
    raise RuntimeError("current() was called outside a task of a PriorityExecutor")


def stop(future: Future[Any]) -> bool:
    """Ask the task of ``future`` to stop: a running one has its token set (its
    ``on_cancel`` callbacks run, here) and nothing more of it starts (no further retry, no
    next run of a series); one not started is cancelled. Returns False, changing nothing,
    if the task had ended. ``future.cancel()`` keeps ``ThreadPoolExecutor``'s meaning: it
    does nothing to a running task."""
    if not isinstance(future, OwnFuture):
        raise TypeError(
            f"future must be one that a PriorityExecutor or one of its lanes returned,"
            f" got {future!r}"
        )
    if future.done():
        return False
    token_of(future).cancel(TaskStopped("the task was asked to stop"))
    # A one-shot task's running future refuses; a retry's or a series' stays pending
    # through its runs, so nothing more of it starts.
    future.cancel()
    return True
