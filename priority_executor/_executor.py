"""``PriorityExecutor``: the public façade over one scheduler and its worker pool.

The façade owns nothing the threads need: workers, promoter and tasks reference the
scheduler only, so an executor dropped without ``shutdown()`` is garbage collected and then
shut down without waiting, as ``ThreadPoolExecutor`` is.
"""

from __future__ import annotations

import itertools
import os
import time
import weakref
from collections.abc import Iterable, Iterator
from concurrent.futures import Executor, Future
from datetime import datetime, timedelta
from typing import Any, Callable, Literal, TypeVar, overload

from typing_extensions import ParamSpec, TypeVarTuple, Unpack, deprecated

from . import _lifecycle
from ._arguments import (
    check_callable,
    check_int,
    check_policy,
    check_priority,
    deadline_time,
    due_time,
    seconds,
)
from ._backend import RemoteFuture, open_backend
from ._clock import Clock, ManualClock, MonotonicClock
from ._policies import Policy, PriorityFirst
from ._recurring import Recurrence, RecurringTask
from ._scheduler import Scheduler
from ._stats import ExecutorStats
from ._task import ExpiringTask, OwnFuture, Task
from ._waiting import WaitingTask
from ._workers import WorkerPool

T = TypeVar("T")
A = TypeVar("A")
B = TypeVar("B")
C = TypeVar("C")
P = ParamSpec("P")
Ts = TypeVarTuple("Ts")

_DEFAULT_POLICY = PriorityFirst()
_cpu_count = getattr(os, "process_cpu_count", os.cpu_count)


class PriorityExecutor(Executor):
    """A ``ThreadPoolExecutor`` that runs the most important due task first.

    ``submit()`` also takes ``priority``, ``delay``, ``run_at`` and ``expires``; due tasks
    are taken in the order of ``policy``; ``clock`` replaces real time (see
    ``priority_executor.testing.ManualClock``).
    """

    _counter = itertools.count().__next__
    _future_type: type[OwnFuture[Any]] = OwnFuture

    def __init__(
        self,
        max_workers: int | None = None,
        thread_name_prefix: str = "",
        initializer: Callable[..., object] | None = None,
        initargs: tuple[Any, ...] = (),
        *,
        policy: Policy = _DEFAULT_POLICY,
        clock: ManualClock | None = None,
        backend: Executor | Literal["process"] | None = None,
    ) -> None:
        if max_workers is None:
            # Threads as ThreadPoolExecutor's, for I/O-bound work: at least 5, at most 32;
            # with a backend, as ProcessPoolExecutor's: one task in flight per CPU.
            cpus = _cpu_count() or 1
            max_workers = min(32, cpus + 4) if backend is None else cpus
        if check_int("max_workers", max_workers) <= 0:
            raise ValueError("max_workers must be greater than 0")
        if initializer is not None and not callable(initializer):
            raise TypeError("initializer must be a callable")
        check_policy(policy)
        if clock is not None and not isinstance(clock, ManualClock):
            raise TypeError(f"clock must be a ManualClock or None, not {type(clock).__name__}")
        self._clock: Clock = MonotonicClock() if clock is None else clock
        self._backend = open_backend(backend, max_workers, initializer, initargs)
        if self._backend is not None:
            initializer = None  # it runs in the backend's workers, not in ours
            self._future_type = RemoteFuture
        # Read by clients that size their work to the pool, as ThreadPoolExecutor's is:
        # dask's threaded scheduler keeps this many tasks in flight.
        self._max_workers = max_workers
        self._policy = policy
        name_prefix = thread_name_prefix or f"PriorityExecutor-{self._counter()}"
        workers = WorkerPool(max_workers, name_prefix, initializer, initargs, self._backend)
        self._scheduler = scheduler = Scheduler(self._clock, policy, workers)
        _lifecycle.register(scheduler)
        # Garbage collection may run it in any thread, even one that holds the scheduler's
        # lock: it only asks the executor's own threads to shut it down.
        finalizer = weakref.finalize(self, scheduler.request_shutdown, _lifecycle.shutdown_reason())
        finalizer.atexit = False  # at exit, _lifecycle shuts down every executor and waits

    # The callee's arguments are checked as for ThreadPoolExecutor.submit, through a ParamSpec
    # when no scheduling keyword is given. PEP 612 allows no keyword between *args: P.args
    # and **kwargs: P.kwargs, so with scheduling keywords the callee's positional arguments
    # are checked through a TypeVarTuple, and its keywords go through functools.partial.
    # Type checkers take a bool for an int, which the runtime refuses as a priority: the
    # first overload, marked deprecated, is how a checker flags such a call (pyright strict
    # does; mypy with its "deprecated" error code enabled). The literal message is repeated
    # because mypy reads only a literal there.
    @overload
    @deprecated("priority must be an int, not a bool: this call raises TypeError")
    def submit(
        self, fn: Callable[..., T], /, *args: Any, priority: bool, **kwargs: Any
    ) -> Future[T]: ...

    @overload
    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]: ...

    @overload
    def submit(
        self,
        fn: Callable[[Unpack[Ts]], T],
        /,
        *args: Unpack[Ts],
        priority: int = 0,
        delay: float | timedelta | None = None,
        run_at: datetime | None = None,
        expires: float | timedelta | datetime | None = None,
    ) -> Future[T]: ...

    # mypy is right that the ParamSpec form lets a callee's own parameter named priority,
    # delay, run_at or expires through, which this method takes for itself: those names are
    # reserved, and reach a callee only through functools.partial. (The callee's arguments
    # are typed object, not Any, which mypy finds incompatible with the TypeVarTuple form.)
    def submit(  # type: ignore[misc]
        self,
        fn: Callable[..., T],
        /,
        *args: object,
        priority: int = 0,
        delay: float | timedelta | None = None,
        run_at: datetime | None = None,
        expires: float | timedelta | datetime | None = None,
        **kwargs: object,
    ) -> Future[T]:
        """Schedule ``fn(*args, **kwargs)``; return its future.

        ``priority``: an int, higher first among due tasks. ``delay`` (seconds or timedelta)
        or ``run_at`` (datetime): when it becomes due, default now. ``expires`` (seconds or
        timedelta from now, or a datetime): cancel it if it has not started by then.
        """
        clock = self._clock
        now = clock.now()
        if delay is None and run_at is None and expires is None:
            due, deadline = now, None
        else:
            due = due_time(clock, now, delay, run_at)
            deadline = deadline_time(clock, now, due, expires)
        if not callable(fn) or type(priority) is not int:  # one test on the common path
            check_callable(fn)
            check_priority(priority)
        future: OwnFuture[T] = self._future_type()
        scheduler = self._scheduler
        if deadline is None:
            task = Task(scheduler, fn, args, kwargs, future, priority, due)
        else:
            task = ExpiringTask(
                scheduler, fn, args, kwargs, future, priority, due, deadline=deadline
            )
        scheduler.add(task, due <= now)
        return future

    # Always with the scheduling keyword interval: see submit().
    @overload
    @deprecated("priority must be an int, not a bool: this call raises TypeError")
    def submit_recurring(
        self,
        fn: Callable[..., object],
        /,
        *args: Any,
        interval: float | timedelta,
        priority: bool,
        **kwargs: Any,
    ) -> Future[None]: ...

    @overload
    def submit_recurring(
        self,
        fn: Callable[[Unpack[Ts]], object],
        /,
        *args: Unpack[Ts],
        interval: float | timedelta,
        fixed_rate: bool = False,
        priority: int = 0,
        delay: float | timedelta | None = None,
        run_at: datetime | None = None,
    ) -> Future[None]: ...

    def submit_recurring(
        self,
        fn: Callable[..., object],
        /,
        *args: object,
        interval: float | timedelta,
        fixed_rate: bool = False,
        priority: int = 0,
        delay: float | timedelta | None = None,
        run_at: datetime | None = None,
        **kwargs: object,
    ) -> Future[None]:
        """Run ``fn(*args, **kwargs)`` every ``interval`` seconds until cancelled.

        First at ``delay``/``run_at`` (default now). Fixed delay by default: the next run is
        due ``interval`` after the previous one ended. ``fixed_rate=True``: runs are due on
        the grid ``first_due + k * interval``; slots that a long run overran are skipped.
        The future stays pending while the series lives; ``cancel()`` stops it (a run in
        progress finishes); a run that raises ends it with that exception.
        """
        if "expires" in kwargs:
            # Reserved as in submit(), so that code moved from there fails rather than
            # handing fn a keyword it never expected.
            raise TypeError(
                "submit_recurring() got an unexpected keyword argument 'expires': a series has"
                " no start deadline (pass a callee's own 'expires' through functools.partial)"
            )
        clock = self._clock
        now = clock.now()
        due = due_time(clock, now, delay, run_at)
        period = seconds("interval", interval, positive=True)
        if not isinstance(fixed_rate, bool):
            raise TypeError(f"fixed_rate must be a bool, not {type(fixed_rate).__name__}")
        check_callable(fn)
        check_priority(priority)
        future: OwnFuture[None] = OwnFuture()
        task = RecurringTask(self._scheduler, fn, args, kwargs, future, priority, due)
        task.recurrence = Recurrence(due, period, fixed_rate)
        self._scheduler.add(task, due <= now)
        return future

    # As typeshed types the builtin map(): fn is checked against up to three iterables. So a
    # map() without iterables, which Executor.map() takes (and returns nothing for), is an
    # error: the override is narrower.
    @overload  # type: ignore[override]
    @deprecated("priority must be an int, not a bool: this call raises TypeError")
    def map(
        self,
        fn: Callable[..., T],
        *iterables: Iterable[Any],
        timeout: float | None = None,
        chunksize: int = 1,
        priority: bool,
    ) -> Iterator[T]: ...

    @overload
    def map(
        self,
        fn: Callable[[A], T],
        iterable: Iterable[A],
        /,
        *,
        timeout: float | None = None,
        chunksize: int = 1,
        priority: int = 0,
    ) -> Iterator[T]: ...

    @overload
    def map(
        self,
        fn: Callable[[A, B], T],
        iterable1: Iterable[A],
        iterable2: Iterable[B],
        /,
        *,
        timeout: float | None = None,
        chunksize: int = 1,
        priority: int = 0,
    ) -> Iterator[T]: ...

    @overload
    def map(
        self,
        fn: Callable[[A, B, C], T],
        iterable1: Iterable[A],
        iterable2: Iterable[B],
        iterable3: Iterable[C],
        /,
        *,
        timeout: float | None = None,
        chunksize: int = 1,
        priority: int = 0,
    ) -> Iterator[T]: ...

    @overload
    def map(
        self,
        fn: Callable[..., T],
        iterable1: Iterable[Any],
        iterable2: Iterable[Any],
        iterable3: Iterable[Any],
        iterable4: Iterable[Any],
        /,
        *iterables: Iterable[Any],
        timeout: float | None = None,
        chunksize: int = 1,
        priority: int = 0,
    ) -> Iterator[T]: ...

    def map(
        self,
        fn: Callable[..., T],
        *iterables: Iterable[Any],
        timeout: float | None = None,
        chunksize: int = 1,
        priority: int = 0,
    ) -> Iterator[T]:
        """As ``Executor.map``: results in input order; every call at ``priority``.

        On a timeout or an early exit, the calls not yet returned are cancelled.
        """
        check_callable(fn)
        check_priority(priority)
        end_time = None if timeout is None else timeout + time.monotonic()
        futures = [self.submit(fn, *args, priority=priority) for args in zip(*iterables)]

        def results() -> Iterator[T]:
            try:
                futures.reverse()  # pop() from the end: yielded futures are released
                while futures:
                    remaining = None if end_time is None else end_time - time.monotonic()
                    yield _result_or_cancel(futures.pop(), remaining)
            finally:
                for future in futures:
                    future.cancel()

        return results()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Take no more work; cancel recurring series; with ``cancel_futures``, also every
        task not yet started. Other tasks still run, delayed ones at their time. With
        ``wait``, return when they have: unless called from a task or a callback of this
        executor, which cannot wait for itself."""
        self._scheduler.shutdown(cancel_futures, _lifecycle.shutdown_reason())
        # A task or callback of this executor does not wait: then it is not for it to close
        # the backend either, which the remaining tasks need. Else its last worker closed
        # it, if it had any.
        if wait and self._scheduler.join() and self._backend is not None:
            self._backend.close()

    def stats(self) -> ExecutorStats:
        """A consistent snapshot of how many tasks are in each state."""
        return self._scheduler.stats()

    def waiting(self) -> list[WaitingTask]:
        """A consistent snapshot of every task not started yet: the due ones first, in the
        order workers would start them, then the others by due time. For debugging and
        dashboards: O(n log n) under the scheduler's lock, not for hot paths."""
        return self._scheduler.waiting()

    def __repr__(self) -> str:
        stats = self.stats()
        return (
            f"<{type(self).__name__} max_workers={self._max_workers} policy={self._policy!r}"
            f" running={stats.running} ready={stats.ready} scheduled={stats.scheduled}>"
        )


def _result_or_cancel(future: Future[T], timeout: float | None) -> T:
    try:
        try:
            return future.result(timeout)
        finally:
            future.cancel()
    finally:
        # The future holds the exception, whose traceback holds this frame: break the cycle.
        del future


__all__: list[str] = ["PriorityExecutor"]
