"""Awaitable submits: ``asubmit()`` and ``amap()`` for code that runs on an asyncio event loop.

A submit from the loop's thread must never block it, so where ``max_waiting`` has no room
the submit leaves its admission undone (``_gate.deferring()``) and its coroutine waits for
room instead: it listens on the gate (``Gate.listen()``), whose ``wake()``, in whichever
thread frees room, hands the wake-up to the loop with ``call_soon_threadsafe()``. Nothing
polls, and the loop runs its other callbacks meanwhile.

``asubmit()`` submits at the call, as ``run_in_executor()`` does, and returns an asyncio
future of the outcome (a task only when the submit must wait for room): no coroutine is
made for a submit that finds room. That future is not ``asyncio.wrap_future()``'s, which
turns any cancelled future into a bare ``CancelledError``, read as the awaiting
coroutine's own cancellation: it completes with ``future.result()``, the task's value,
its exception, ``Expired`` for a task that expired, or ``concurrent.futures.CancelledError``
(an ``Exception``, not asyncio's) for a task that shutdown or ``_work_queue`` cancelled. So
the one asyncio ``CancelledError`` a coroutine sees is its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable
from concurrent.futures import Future
from typing import Any, Callable, TypeVar

from ._gate import Admission, Gate, Listener, deferring
from ._task import OwnFuture
from ._token import stop

T = TypeVar("T")


def _set_done(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():  # cancelled with its coroutine, or woken twice
        waiter.set_result(None)


class _Waker(Listener):
    """A coroutine's wait for room in a gate: ``woken()`` in any thread completes
    ``waiter`` in the loop's."""

    __slots__ = ("loop", "waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.listening = False
        self.loop = loop
        self.waiter: asyncio.Future[None] = loop.create_future()

    def woken(self) -> bool:
        try:
            self.loop.call_soon_threadsafe(_set_done, self.waiter)
        except RuntimeError:  # its loop is closed: its coroutine will never look again
            return False
        return True


def submit(schedule: Callable[[], Future[T]]) -> asyncio.Future[T]:
    """``schedule()``, a submit made now in the loop's thread, as an asyncio future of its
    outcome (see ``outcome()``). One that must wait for room waits in a task of its own,
    which this returns: cancelled while it waits, it queues nothing and gives back the
    room it held. A submit that raises (bad input, shutdown, ``QueueFull``) raises here."""
    loop = asyncio.get_running_loop()
    future, admission = deferring(schedule)
    if admission is None:
        return outcome(loop, future)

    async def once_admitted() -> T:
        await admitted(admission)
        return await outcome(loop, future)

    return loop.create_task(once_admitted())


async def submitted(schedule: Callable[[], Future[T]]) -> Future[T]:
    """The future of ``schedule()``, once its task is queued: after waiting for room under
    ``max_waiting``, if it must, in this coroutine."""
    future, admission = deferring(schedule)
    if admission is not None:
        await admitted(admission)
    return future


async def admitted(admission: Admission) -> None:
    """Return once ``admission``, left undone for want of room, has queued its task."""
    gate = admission.blocked_at()
    while gate is not None:
        try:
            await _take_room(admission, gate)
        except BaseException:
            admission.release()
            raise
        gate = admission.advance(gate)


async def _take_room(admission: Admission, gate: Gate) -> None:
    """Return once room in ``gate`` is taken for ``admission``, waiting without blocking
    the loop, at most ``gate.timeout`` seconds (then ``QueueFull``); raise ``RuntimeError``
    once the executor, or the lane, shuts down (its ``wake_all()`` wakes every listener)."""
    loop = asyncio.get_running_loop()
    until = admission.until(gate)
    while True:
        waker = _Waker(loop)
        gate.listen(waker)  # before the look: see Gate.listen()
        try:
            admission.check_accepts()
            if gate.take_room():
                if not gate.unlisten(waker):
                    gate.wake()  # woken after the look began: for room it may not have taken
                return
            if until is None:
                await waker.waiter
            else:
                remaining = until - time.monotonic()
                if remaining <= 0:  # checked after a look: a submit that timed out looked once more
                    why = f"no room came within waiting_timeout={gate.timeout!r} s"
                    raise admission.full(gate, why)
                timer = loop.call_later(remaining, _set_done, waker.waiter)
                try:
                    await waker.waiter
                finally:
                    timer.cancel()
        except BaseException:
            if not gate.unlisten(waker):
                gate.wake()  # the wake-up it took may have been for room it leaves
            raise
        # Woken (or its time is up): it looks again, listening anew.
        gate.unlisten(waker)


def outcome(loop: asyncio.AbstractEventLoop, future: Future[T]) -> asyncio.Future[T]:
    """An asyncio future that completes as ``future`` does, in ``loop``'s thread, with what
    ``future.result()`` gives (asyncio's ``wrap_future()`` would turn any cancelled future
    into a bare ``CancelledError``). Cancelled first, it stops ``future``'s task at once, as
    ``stop()`` does: one that has not started never does, a running one has its token set."""
    waiter = _Outcome(loop, future)
    future.add_done_callback(functools.partial(_copy_soon, loop, waiter))
    return waiter


class _Outcome(asyncio.Future[T]):
    """The asyncio future of a task's outcome: its ``cancel()``, which a coroutine's
    cancellation calls on the future it awaits, cancels the task's future too, in the same
    step (a done-callback would, one turn of the loop later: a worker might start the task
    meanwhile)."""

    __slots__ = ("_source",)

    def __init__(self, loop: asyncio.AbstractEventLoop, source: Future[T]) -> None:
        super().__init__(loop=loop)
        self._source: Future[T] | None = source

    def cancel(self, msg: Any | None = None) -> bool:
        source = self._source
        if not super().cancel(msg):
            return False
        self._source = None
        if isinstance(source, OwnFuture):
            # As stop(): a task not started never does; a running one is asked to stop
            # (its token set), which its future's own cancel() would not do.
            stop(source)
        elif source is not None:
            source.cancel()
        return True

    def _copy(self, future: Future[T]) -> None:
        """In the loop's thread: complete with what ``future``, done, gives."""
        if self.done():  # cancelled
            return
        self._source = None  # no cycle through future's callbacks
        try:
            result = future.result()
        except BaseException as exc:  # its own: Expired, concurrent.futures' CancelledError, ...
            self.set_exception(exc)
        else:
            self.set_result(result)
        finally:
            del future  # its exception's traceback holds this frame: no cycle


def _copy_soon(loop: asyncio.AbstractEventLoop, waiter: _Outcome[T], future: Future[T]) -> None:
    """In the thread that completed ``future``: copy its outcome in ``loop``'s."""
    with contextlib.suppress(RuntimeError):  # the loop is closed: no one awaits the waiter
        loop.call_soon_threadsafe(waiter._copy, future)


async def results(
    schedule: Callable[[tuple[Any, ...]], Future[T]],
    calls: Iterable[tuple[Any, ...]],
    buffersize: int | None,
) -> AsyncIterator[T]:
    """``amap()``'s results, in input order, each as soon as it and those before it are
    done. A task of its own submits the calls (``schedule(args)``) one after the other,
    each after waiting for room if it must, at most ``buffersize`` of them submitted and
    not yet yielded; a submit that raises ends the iteration with its exception, after the
    results of the calls submitted before it. Closed early, the calls not yet yielded are
    cancelled."""
    loop = asyncio.get_running_loop()
    # The futures submitted and not yet yielded, in input order; then, once the feeder
    # ends, the exception it ended with, or None once every call is submitted.
    pending: deque[Future[T]] = deque()
    end: list[BaseException | None] = []
    fed = asyncio.Event()  # set while pending or end holds what the consumer waits for
    room = None if buffersize is None else asyncio.Semaphore(buffersize)

    async def feed() -> None:
        try:
            for args in calls:
                if room is not None:
                    await room.acquire()
                pending.append(await submitted(functools.partial(schedule, args)))
                fed.set()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the consumer raises it, in its place in the order
            end.append(exc)
        else:
            end.append(None)
        finally:
            fed.set()

    feeder = loop.create_task(feed())
    try:
        while True:
            if not pending:
                if end:
                    if end[0] is not None:
                        raise end[0]
                    return
                fed.clear()
                await fed.wait()
                continue
            future = pending[0]
            result = await outcome(loop, future)
            pending.popleft()
            if room is not None:
                room.release()
            yield result
    finally:
        feeder.cancel()
        for future in pending:
            future.cancel()
