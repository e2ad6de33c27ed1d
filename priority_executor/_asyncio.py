"""Awaitable submits: ``asubmit()`` and ``amap()`` for code that runs on an asyncio event loop.

A submit from the loop's thread must never block it, so where ``max_waiting`` has no room
the submit leaves its admission undone (``_gate.deferring()``) and its coroutine waits for
room instead: it listens on the gate (``Gate.listen()``), whose ``wake()``, in whichever
thread frees room, hands the wake-up to the loop with ``call_soon_threadsafe()``. Nothing
polls, and the loop runs its other callbacks meanwhile.

Once its task is queued, the coroutine waits for the task's future the same way, without
``asyncio.wrap_future()``: that turns any cancelled future into a bare ``CancelledError``,
which reads as the coroutine's own cancellation. Here the one ``CancelledError`` the
coroutine sees is its own; the task's outcome is ``future.result()``: its value, its
exception, ``Expired`` for a task that expired, or ``concurrent.futures.CancelledError``
(an ``Exception``, not asyncio's) for a task that shutdown or ``_work_queue`` cancelled.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable
from concurrent.futures import Future
from typing import Any, Callable, TypeVar

from ._gate import Admission, Gate, Listener, deferring

T = TypeVar("T")


def _set_done(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():  # cancelled with its coroutine, or woken twice
        waiter.set_result(None)


class _Waker(Listener):
    """A coroutine's wait for room in a gate, or for a future: ``woken()`` in any thread
    completes ``waiter`` in the loop's."""

    __slots__ = ("loop", "waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.loop = loop
        self.waiter: asyncio.Future[None] = loop.create_future()

    def woken(self, _: object = None) -> bool:
        try:
            self.loop.call_soon_threadsafe(_set_done, self.waiter)
        except RuntimeError:  # its loop is closed: its coroutine will never look again
            return False
        return True


async def submitted(schedule: Callable[[], Future[T]]) -> Future[T]:
    """The future of ``schedule()``, a submit made in the loop's thread, once its task is
    queued: after waiting for room under ``max_waiting``, if it must, in this coroutine.
    Cancelled while it waits, nothing is queued, and the room it held is given back."""
    with deferring() as left:
        future = schedule()
    if left:
        admission = left[0]
        gate = admission.blocked_at()
        while gate is not None:
            try:
                await _take_room(admission, gate)
            except BaseException:
                admission.release()
                raise
            gate = admission.advance(gate)
    return future


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


async def outcome(future: Future[T]) -> T:
    """What ``future`` gives, once done, awaited without blocking the loop. Cancelled
    meanwhile, this cancels the future: a task that has not started never does."""
    waker = _Waker(asyncio.get_running_loop())
    future.add_done_callback(waker.woken)
    try:
        await waker.waiter
    except asyncio.CancelledError:
        future.cancel()
        raise
    try:
        return future.result()
    finally:
        del future  # its exception's traceback holds this frame: no cycle


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
            result = await outcome(future)
            pending.popleft()
            if room is not None:
                room.release()
            yield result
    finally:
        feeder.cancel()
        for future in pending:
            future.cancel()
