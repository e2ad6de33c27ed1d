"""Backends: ready tasks run on another executor, such as a process pool or a Dask cluster.

Everything that decides which task runs, and when, stays in this process: both heaps, the
promoter, the policy, deadlines and recurring series. Only the call moves. Each worker thread
becomes an in-flight slot: it claims the best due task as always, hands the call to the
backend, and waits for the backend's future before it claims another. So at most
``max_workers`` tasks are in the backend at once, and priority is decided at the last
moment: a backend with a queue of its own would run what it holds in submission order.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import threading
import weakref
from concurrent.futures import (
    BrokenExecutor,
    CancelledError,
    Executor,
    Future,
    ProcessPoolExecutor,
)
from concurrent.futures._base import CANCELLED_AND_NOTIFIED
from typing import Any, Callable, Literal, TypeVar, Union

from . import _lifecycle
from ._task import OwnFuture
from ._token import TaskStopped

T = TypeVar("T")

BackendArgument = Union[Executor, Literal["process"], None]


class RemoteFuture(OwnFuture[T]):
    """The future of a one-shot task for a backend. It stays pending while the backend runs
    the call, and ``cancel()``, once the task has been handed off, is forwarded to the
    backend's future, whose answer it returns (a process pool's: True only while the call
    has not started)."""

    def __init__(self, owner: weakref.ref[Any]) -> None:
        super().__init__(owner)
        # Held across the hand-off, so that a cancel() comes either before it (and the task
        # is never handed off) or after it (and is forwarded). Reentrant: cancel() runs the
        # future's done-callbacks, which may cancel it again.
        self._handoff = threading.RLock()
        self._remote: Future[T] | None = None

    def cancel(self) -> bool:
        with self._handoff:
            remote = self._remote
            if remote is None:
                return super().cancel()
            if not remote.cancel():
                return False
            self._cancelled_there()
            return True

    def _hand_off(self, submit: Callable[[], Future[T]]) -> Future[T] | None:
        with self._handoff:
            if self.cancelled():  # cancelled between the claim and the hand-off
                return None
            self._remote = remote = submit()
        return remote

    def _cancelled_there(self) -> None:
        # The call will never run: this future is cancelled, whoever cancelled the call,
        # and reported to wait() and as_completed() now (a process pool reports a
        # cancelled call only when its queue reaches it).
        with self._handoff:
            if not self.cancelled():
                super().cancel()
            self.set_running_or_notify_cancel()

    def set_running_or_notify_cancel(self) -> bool:
        # Its worker reports the outcome as for any task (see _run.run), and a
        # cancellation may have been reported already, by the above: then Future's own
        # would log CRITICAL and raise. Read in Future's private state, as OwnFuture's
        # __init__ writes it (see _task): a last resort, the same since Python 3.2.
        with self._condition:
            if self._state == CANCELLED_AND_NOTIFIED:
                return False
        return super().set_running_or_notify_cancel()

    def running(self) -> bool:
        # This future stays pending while the backend runs the call, so that cancel() can
        # still be forwarded: whether it runs is for the backend's future to say.
        remote = self._remote
        return remote is not None and remote.running() and not self.done()


class Backend:
    """The executor that runs the calls of one ``PriorityExecutor``'s tasks."""

    def __init__(self, executor: Executor, owned: bool) -> None:
        self.executor = executor
        self._owned = owned  # created for a string shorthand: ours to shut down
        # The process backend's calls in flight, by our future: what kill() stops. (A
        # dict's item assignment, lookup and pop are atomic, on free-threaded builds too.)
        self._slots = executor if isinstance(executor, ProcessSlots) else None
        self._in_flight: dict[OwnFuture[Any], Future[Any]] = {}

    @property
    def killable(self) -> bool:
        """Whether a call in it can be stopped (see ``kill``): on ``backend="process"``."""
        return self._slots is not None

    def kill(self, future: OwnFuture[Any]) -> bool:
        """Kill the process that runs the call of ``future`` (its time limit passed, or it
        was asked to stop): its call fails with ``TaskStopped``, and the next call gets a
        new process. False if the call is not in a process now."""
        remote = self._in_flight.get(future)
        return remote is not None and self._slots is not None and self._slots.kill(remote)

    def call(
        self, future: OwnFuture[Any], fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Any
    ) -> Any:
        """Make a claimed task's call in the backend, from a worker thread that waits for it
        (see ``_run.run``): return or raise its outcome. Waiting here, rather than in a
        callback, keeps the worker's slot taken until the call ends, and runs the future's
        callbacks in this thread, never in the backend's own."""
        remote = future._hand_off(functools.partial(self._submit, fn, args, kwargs))
        del fn, args, kwargs  # the backend has them; they must not live as long as the call
        if remote is None:
            raise CancelledError  # the future is cancelled: the outcome is dropped
        slots = self._slots
        if slots is not None:
            self._in_flight[future] = remote
        try:
            return remote.result()
        except CancelledError:
            # By cancel(), or by the backend itself (its owner, a lost cluster): the call
            # will never run.
            future._cancelled_there()
            raise
        except BaseException as exc:
            if slots is not None and slots.was_killed(remote):
                # Its own process only, by kill(): the other calls go on.
                raise TaskStopped("the process that ran the call was killed") from exc
            if isinstance(exc, BrokenExecutor) or (
                isinstance(remote, _Refused) and _refuses_all(exc)
            ):
                # First: whoever sees this call fail finds later submits refused.
                owner = future._owner()
                if owner is not None:
                    owner.break_pool(exc)
            raise
        finally:
            if slots is not None:
                self._in_flight.pop(future, None)

    def _submit(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Any) -> Future[Any]:
        """Hand a call over. A refusal becomes the call's outcome; one that every later call
        would meet as well (the backend is broken or shut down) breaks the executor when the
        outcome is read (see call), outside the hand-off: breaking completes other
        futures, whose callbacks may cancel this one."""
        try:
            return self.executor.submit(fn, *args, **kwargs)
        except BaseException as exc:
            refused: Future[Any] = _Refused()
            refused.set_exception(exc)
            return refused

    def signal_workers(self, signum: int) -> None:
        """Send ``signum`` to every process of the process backend (see ``killable``)."""
        if self._slots is not None:
            self._slots.signal_all(signum)

    def close(self) -> None:
        """Shut down the backend if this executor created it. Called once no task can reach
        it any more; safe to call again."""
        if self._owned:
            self.executor.shutdown(wait=True)


def open_backend(
    backend: BackendArgument,
    max_workers: int,
    initializer: Callable[..., object] | None,
    initargs: tuple[Any, ...],
) -> Backend | None:
    """The ``backend`` argument of ``PriorityExecutor``, checked and made ready."""
    if backend is None:
        return None
    if backend == "process":
        import multiprocessing

        # This process has threads (ours, at least): a child forked now could inherit a lock
        # that one of them holds, and deadlock on it (Python 3.12+ warns of it).
        safe = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
        context = multiprocessing.get_context(safe)
        executor: Executor = ProcessSlots(context, initializer, initargs)
        owned = True
    elif isinstance(backend, Executor):
        if initializer is not None:
            raise TypeError(
                "initializer cannot be combined with a backend executor: the backend's "
                "workers run the tasks, so give the initializer to the backend"
            )
        executor, owned = backend, False
    elif isinstance(backend, str):
        raise ValueError(f'backend must be "process" when it is a string, not {backend!r}')
    else:
        raise TypeError(
            f'backend must be a concurrent.futures.Executor, "process" or None, not {backend!r}'
        )
    _lifecycle.exit_before_process_pools()
    return Backend(executor, owned)


class ProcessSlots(Executor):
    """What ``backend="process"`` runs calls on: a process pool of one process for each
    call in flight (at most ``max_workers``, one per slot of the executor), so that one
    call's process can be killed (see ``Backend.kill``). A ``ProcessPoolExecutor`` whose
    process dies is broken for every call in it: here that is only the killed call's own
    pool, which is shut down, and the next call starts a new one."""

    def __init__(
        self,
        context: Any,
        initializer: Callable[..., object] | None,
        initargs: tuple[Any, ...],
    ) -> None:
        self._make = functools.partial(ProcessPoolExecutor, 1, context, initializer, initargs)
        self._lock = threading.Lock()
        self._free: list[tuple[ProcessPoolExecutor, int]] = []  # idle pools, with their pid
        self._busy: dict[Future[Any], tuple[ProcessPoolExecutor, int]] = {}
        self._killed: set[Future[Any]] = set()
        self._broken: list[ProcessPoolExecutor] = []  # killed calls' pools, until dropped
        self._closed = False

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            slot = self._free.pop() if self._free else None
            broken, self._broken = self._broken, []
        # Dropped in this thread, not their manager's, and holding no lock (see _done).
        del broken
        if slot is None:
            pool = self._make()
            # Its one process's pid, asked once: what kill() signals. (Raises as a
            # broken pool, its initializer failed, would for the call.)
            slot = (pool, pool.submit(os.getpid).result())
        remote = slot[0].submit(fn, *args, **kwargs)
        with self._lock:
            self._busy[remote] = slot
        remote.add_done_callback(self._done)  # listed first: a call already done is handed back
        return remote

    def _done(self, remote: Future[Any]) -> None:
        with self._lock:
            slot = self._busy.pop(remote, None)
            # A killed process breaks its pool: the call fails with BrokenProcessPool,
            # which was_killed() tells apart (the caller may read it before or after this).
            broken = not remote.cancelled() and isinstance(remote.exception(), BrokenExecutor)
            if not broken:
                self._killed.discard(remote)  # killed too late: it had ended by itself
            if slot is not None and broken:
                # The broken pool's manager thread ends it by itself. It calls us from its
                # terminate_broken(), holding the pool's shutdown lock on Python 3.12+:
                # a shutdown(), or dropping the last reference to the pool (its weakref
                # callback takes that lock), would wait for it here for ever, and so would
                # interpreter exit, which joins that thread. The next submit() drops it.
                self._broken.append(slot[0])
                return
            if slot is None:
                return
            if not self._closed:
                self._free.append(slot)
                return
        slot[0].shutdown(wait=False)

    def kill(self, remote: Future[Any]) -> bool:
        with self._lock:
            slot = self._busy.get(remote)
            if slot is None or remote.done():
                return False
            self._killed.add(remote)
        os.kill(slot[1], _KILL)
        return True

    def signal_all(self, signum: int) -> None:
        """Send ``signum`` to every process, busy or idle (see
        ``PriorityExecutor.terminate_workers``): the calls they run fail with
        ``TaskStopped``."""
        with self._lock:
            self._killed.update(remote for remote in self._busy if not remote.done())
            pids = [pid for _, pid in (*self._free, *self._busy.values())]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):  # it exited already
                os.kill(pid, signum)

    def was_killed(self, remote: Future[Any]) -> bool:
        with self._lock:
            if remote in self._killed:
                self._killed.discard(remote)
                return True
            return False

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._closed = True
            pools = [pool for pool, _ in (*self._free, *self._busy.values())]
            self._free = []
            broken, self._broken = self._broken, []
        del broken  # holding no lock (see _done)
        for pool in pools:
            pool.shutdown(wait, cancel_futures=cancel_futures)


_KILL = getattr(signal, "SIGKILL", signal.SIGTERM)  # Windows: SIGTERM is TerminateProcess


class _Refused(Future[T]):
    """The outcome of a call that the backend refused to take."""


def _refuses_all(exc: BaseException) -> bool:
    """Whether a backend that refused a call with ``exc`` refuses every call from now on:
    it is broken, shut down by its owner, or a Dask client that lost its cluster."""
    if isinstance(exc, (BrokenExecutor, RuntimeError)):
        return True
    dask_client = sys.modules.get("distributed.client")  # no import: Dask is optional
    return dask_client is not None and isinstance(exc, dask_client.ClosedClientError)
