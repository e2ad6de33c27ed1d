"""``submit()``, ``submit_recurring()`` and ``map()``, with their types: the surface that
an executor and its lanes share. Each one says, in ``_schedule`` and
``_schedule_recurring``, where its tasks go."""

from __future__ import annotations

import abc
import functools
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator, Iterable, Iterator
from concurrent import futures
from concurrent.futures import Future
from datetime import datetime, timedelta
from itertools import islice
from typing import TYPE_CHECKING, Any, Callable, TypeVar, overload

from typing_extensions import Never, ParamSpec, TypeVarTuple, Unpack

from ._arguments import check_callable, check_priority
from ._calendar import Schedule
from ._dependencies import check_upstreams
from ._options import Options
from ._runtime import check_time_limit

if TYPE_CHECKING:
    import asyncio

T = TypeVar("T")
A = TypeVar("A")
B = TypeVar("B")
C = TypeVar("C")
P = ParamSpec("P")
Ts = TypeVarTuple("Ts")


class Executor(futures.Executor):
    """An executor whose ``submit()`` takes scheduling keywords.

    Named as the class that defines ``ThreadPoolExecutor.submit()``, because a type checker
    names the class that defines a method in its messages about a call ("Argument 1 to
    "submit" of "Executor""): so they read for ``PriorityExecutor`` and ``Lane`` as they do
    for ``ThreadPoolExecutor``, and name no class a user never sees.
    """

    @abc.abstractmethod
    def _schedule(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        priority: int | None,
        delay: float | timedelta | None,
        run_at: datetime | None,
        expires: float | timedelta | datetime | None,
        options: Options | None = None,
    ) -> Future[Any]: ...

    @abc.abstractmethod
    def _schedule_recurring(
        self,
        fn: Callable[..., object],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        interval: float | timedelta | Schedule,
        fixed_rate: bool,
        priority: int | None,
        delay: float | timedelta | None,
        run_at: datetime | None,
        options: Options | None = None,
    ) -> Future[None]: ...

    def options(
        self,
        *,
        after: Future[Any] | Iterable[Future[Any]] | None = None,
        after_any: Future[Any] | Iterable[Future[Any]] | None = None,
        time_limit: float | timedelta | None = None,
        timings: bool = False,
    ) -> WithOptions:
        """A view of this executor (or lane) whose ``submit()``, ``submit_recurring()`` and
        ``map()`` give each task these options, which ``submit()`` has no keyword for.

        ``after``: a future or an iterable of futures (any ``concurrent.futures.Future``);
        each task waits until all are done, then is due as usual; one that failed, was
        cancelled or expired ends it with ``DependencyFailed``. ``after_any``: likewise,
        but whatever their outcome (the task reads them itself). ``time_limit``: how long
        each run (a call, a retry's attempt, a series' run) may take, in place of its
        lane's or executor's; at the limit its future fails with ``TaskTimeoutError`` and
        its token is set (see ``priority_executor.current()``). ``timings``: record each
        task's timings, which ``timings(future)`` gives once it is done (a task submitted
        while the executor has a subscriber has them anyway)."""
        if not isinstance(timings, bool):
            raise TypeError(f"timings must be a bool, not {type(timings).__name__}")
        return WithOptions(
            self,
            Options(
                check_upstreams("after", after),
                check_upstreams("after_any", after_any),
                check_time_limit(time_limit),
                timings,
            ),
        )

    # The callee's arguments are checked as for ThreadPoolExecutor.submit, through a ParamSpec
    # when no scheduling keyword is given. PEP 612 allows no keyword between *args: P.args
    # and **kwargs: P.kwargs, so with scheduling keywords the callee's positional arguments
    # are checked through a TypeVarTuple, and its keywords go through functools.partial.
    # The ParamSpec form comes first, as ThreadPoolExecutor.submit: a wrapper that passes on
    # its own *args: Any, **kwargs: Any matches it and gets Future[T], and no other form may
    # match such a call first. (So a bool priority, an int to type checkers, is not flagged:
    # any overload that caught it would catch those wrappers too. It raises at the call.)
    # Both checkers report a call that matches neither against the ParamSpec form: a wrong
    # scheduling keyword is "unexpected" there, not "of the wrong type".
    @overload
    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]: ...

    @overload
    def submit(
        self,
        fn: Callable[[Unpack[Ts]], T],
        /,
        *args: Unpack[Ts],
        priority: int | None = None,
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
        priority: int | None = None,
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
        return self._schedule(fn, args, kwargs, priority, delay, run_at, expires)

    # Always with the scheduling keyword interval: the callee's positional arguments are
    # checked as in submit(), and its keywords go through functools.partial. No keyword may
    # be given for the callee (Never takes no value but Any, so that a wrapper passing on
    # its own **kwargs: Any type-checks, as with submit()); one is a type error, reserved
    # expires included.
    def submit_recurring(
        self,
        fn: Callable[[Unpack[Ts]], object],
        /,
        *args: Unpack[Ts],
        interval: float | timedelta | Schedule,
        fixed_rate: bool = False,
        priority: int | None = None,
        delay: float | timedelta | None = None,
        run_at: datetime | None = None,
        **kwargs: Never,
    ) -> Future[None]:
        """Run ``fn(*args, **kwargs)`` every ``interval`` seconds until cancelled, or at the
        slots of a calendar schedule (``interval=Cron("0 2 * * *", tz="Europe/Paris")``).

        First at ``delay``/``run_at`` (default now); a schedule's first run at its first
        slot after that. Fixed delay by default: the next run is due ``interval`` after the
        previous one ended. ``fixed_rate=True``: runs are due on the grid
        ``first_due + k * interval``; slots that a long run overran are skipped. A
        schedule's runs fall at its slots, on the wall clock (see ``Cron``).
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
        return self._schedule_recurring(
            fn, args, kwargs, interval, fixed_rate, priority, delay, run_at
        )

    # As typeshed types the builtin map(): fn is checked against up to three iterables. So a
    # map() without iterables, which Executor.map() takes (and returns nothing for), is an
    # error: the override is narrower.
    @overload  # type: ignore[override]
    def map(
        self,
        fn: Callable[[A], T],
        iterable: Iterable[A],
        /,
        *,
        timeout: float | None = None,
        chunksize: int = 1,
        buffersize: int | None = None,
        priority: int | None = None,
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
        buffersize: int | None = None,
        priority: int | None = None,
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
        buffersize: int | None = None,
        priority: int | None = None,
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
        buffersize: int | None = None,
        priority: int | None = None,
    ) -> Iterator[T]: ...

    def map(
        self,
        fn: Callable[..., T],
        *iterables: Iterable[Any],
        timeout: float | None = None,
        chunksize: int = 1,
        buffersize: int | None = None,
        priority: int | None = None,
    ) -> Iterator[T]:
        """As ``Executor.map`` of Python 3.14, on every Python: results in input order; every
        call at ``priority``. With ``buffersize``, at most that many calls are submitted and
        not yet yielded: the iterables are read as results are taken, so they may be endless.

        On a timeout, or when the iterator is closed or collected once iterated, the calls not
        yet returned are cancelled. Calls of an iterator never iterated run, as in Python's.
        """
        _check_map(fn, buffersize, priority)
        end_time = None if timeout is None else timeout + time.monotonic()
        calls = zip(*iterables)

        def submit(executor: Executor, args: tuple[Any, ...]) -> Future[T]:
            # Through the instance's submit(), which a caller may have replaced (tqdm's
            # thread_map does), and without a priority unless one was given: such a
            # replacement may take the callee's arguments only, as Executor.submit() does.
            if priority is None:
                return executor.submit(fn, *args)
            return executor.submit(fn, *args, priority=priority)

        # islice(calls, None) is every call: without a buffersize, all are submitted now.
        pending = deque(submit(self, args) for args in islice(calls, buffersize))
        # Only a weak reference: an iterator left unfinished must not keep the executor (and
        # so its threads) alive; once it is gone, no more calls are submitted.
        executor_ref = weakref.ref(self)

        def results() -> Iterator[T]:
            try:
                pending.reverse()  # pop() from the end: yielded futures are released
                while pending:
                    executor = None if buffersize is None else executor_ref()
                    if executor is not None:
                        args = next(calls, None)
                        if args is not None:
                            pending.appendleft(submit(executor, args))
                        del executor  # while suspended, the frame must not hold it
                    remaining = None if end_time is None else end_time - time.monotonic()
                    yield _result_or_cancel(pending.pop(), remaining)
            finally:
                for future in pending:
                    future.cancel()

        return results()

    # -- awaitable submits (see _asyncio) ---------------------------------------------------
    # Typed as submit() and map() are, for the same reasons (see above).
    @overload
    def asubmit(
        self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> asyncio.Future[T]: ...

    @overload
    def asubmit(
        self,
        fn: Callable[[Unpack[Ts]], T],
        /,
        *args: Unpack[Ts],
        priority: int | None = None,
        delay: float | timedelta | None = None,
        run_at: datetime | None = None,
        expires: float | timedelta | datetime | None = None,
    ) -> asyncio.Future[T]: ...

    def asubmit(  # type: ignore[misc]
        self,
        fn: Callable[..., T],
        /,
        *args: object,
        priority: int | None = None,
        delay: float | timedelta | None = None,
        run_at: datetime | None = None,
        expires: float | timedelta | datetime | None = None,
        **kwargs: object,
    ) -> asyncio.Future[T]:
        """``submit()`` for a coroutine, called in its event loop: an asyncio future of the
        task's result (or exception: ``Expired`` if it did not start by its deadline). A
        submit that finds no room under ``max_waiting`` waits for it in a task of its own,
        never blocking the loop. Cancelling the future (or the coroutine that awaits it)
        cancels the task if it has not started (or drops the submit, while it waits for
        room); a task that runs goes on, as with ``run_in_executor()``."""
        from . import _asyncio

        return _asyncio.submit(
            functools.partial(self._schedule, fn, args, kwargs, priority, delay, run_at, expires)
        )

    @overload
    def amap(
        self,
        fn: Callable[[A], T],
        iterable: Iterable[A],
        /,
        *,
        buffersize: int | None = None,
        priority: int | None = None,
    ) -> AsyncIterator[T]: ...

    @overload
    def amap(
        self,
        fn: Callable[[A, B], T],
        iterable1: Iterable[A],
        iterable2: Iterable[B],
        /,
        *,
        buffersize: int | None = None,
        priority: int | None = None,
    ) -> AsyncIterator[T]: ...

    @overload
    def amap(
        self,
        fn: Callable[[A, B, C], T],
        iterable1: Iterable[A],
        iterable2: Iterable[B],
        iterable3: Iterable[C],
        /,
        *,
        buffersize: int | None = None,
        priority: int | None = None,
    ) -> AsyncIterator[T]: ...

    @overload
    def amap(
        self,
        fn: Callable[..., T],
        iterable1: Iterable[Any],
        iterable2: Iterable[Any],
        iterable3: Iterable[Any],
        iterable4: Iterable[Any],
        /,
        *iterables: Iterable[Any],
        buffersize: int | None = None,
        priority: int | None = None,
    ) -> AsyncIterator[T]: ...

    def amap(
        self,
        fn: Callable[..., T],
        *iterables: Iterable[Any],
        buffersize: int | None = None,
        priority: int | None = None,
    ) -> AsyncIterator[T]:
        """``map()`` for ``async for``: the results in input order, each as soon as it and
        those before it are done. The calls are submitted as the iteration begins, one after
        the other, each waiting for room under ``max_waiting`` without blocking the loop;
        with ``buffersize``, at most that many submitted and not yet yielded. A failed call,
        or a submit that raises, ends the iteration with its exception; once it ends early
        (an exception, ``break``, a cancelled coroutine), the calls not yet yielded are
        cancelled."""
        from . import _asyncio

        _check_map(fn, buffersize, priority)

        def schedule(args: tuple[Any, ...]) -> Future[T]:
            return self._schedule(fn, args, {}, priority, None, None, None)

        return _asyncio.results(schedule, zip(*iterables), buffersize)


def _check_map(fn: object, buffersize: object, priority: object) -> None:
    check_callable(fn)
    if priority is not None:
        check_priority(priority)
    # Python 3.14's checks and messages, to the letter (a bool is an int to them).
    if buffersize is not None and not isinstance(buffersize, int):
        raise TypeError("buffersize must be an integer or None")
    if buffersize is not None and buffersize < 1:
        raise ValueError("buffersize must be None or > 0")


def _result_or_cancel(future: Future[T], timeout: float | None) -> T:
    try:
        try:
            return future.result(timeout)
        finally:
            future.cancel()
    finally:
        # The future holds the exception, whose traceback holds this frame: break the cycle.
        del future


class WithOptions(Executor):
    """What ``options()`` returns: ``target``'s submits, each task with ``options``. A view
    holds nothing else: keep it, or make one for a call."""

    def __init__(self, target: Executor, options: Options) -> None:
        self._target = target
        self._options = options

    def options(
        self,
        *,
        after: Future[Any] | Iterable[Future[Any]] | None = None,
        after_any: Future[Any] | Iterable[Future[Any]] | None = None,
        time_limit: float | timedelta | None = None,
        timings: bool = False,
    ) -> WithOptions:
        """Refused: a view's submits carry its own options, so those of a view of it would
        be dropped (a task given ``after=`` there would not wait)."""
        raise TypeError(
            "options() of an options() view: give every option in one call of the"
            " executor's or the lane's options()"
        )

    def _schedule(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        priority: int | None,
        delay: float | timedelta | None,
        run_at: datetime | None,
        expires: float | timedelta | datetime | None,
        options: Options | None = None,
    ) -> Future[Any]:
        return self._target._schedule(
            fn, args, kwargs, priority, delay, run_at, expires, self._options
        )

    def _schedule_recurring(
        self,
        fn: Callable[..., object],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        interval: float | timedelta | Schedule,
        fixed_rate: bool,
        priority: int | None,
        delay: float | timedelta | None,
        run_at: datetime | None,
        options: Options | None = None,
    ) -> Future[None]:
        return self._target._schedule_recurring(
            fn, args, kwargs, interval, fixed_rate, priority, delay, run_at, self._options
        )

    def __repr__(self) -> str:
        return f"<options of {self._target!r}>"
