"""Dependencies: a task that waits for other futures, its *upstreams*, before it is queued::

    parsed = executor.options(after=fetched).submit(parse)

A dependent is BLOCKED: in no heap, holding no worker, listed by its executor's
``Blocked`` (a ``Holder``, so that ``waiting()``, shutdown's claims and ``_work_queue`` find
it with the other waiting tasks), counted in ``stats().blocked``. Each upstream has one
done-callback for it (``Upstreams.done``), which may run in any thread: the worker of
another executor, a user's ``cancel()``, a thread that holds this scheduler's lock (a
signal handler, a ``__del__``). So it never blocks on the lock: it posts a step
(``Scheduler.post``), which counts the upstream down under the lock, O(1), a counter per
dependent. Once none is left, the task is queued as a new one would be: pending until its
due time, or ready, with its priority, lane, deadline and retries. Its start deadline runs
while it is blocked (its alarm is set as it is queued BLOCKED, a waiting state).

An upstream given as ``after=`` that failed, was cancelled or expired ends the dependent:
claimed CANCELLED, its future cancelled with ``DependencyFailed``, which names the upstream
whose outcome it was (however far upstream) and why. Its future's done-callbacks end its own
dependents in turn, so a failure travels down a graph at once. One given as ``after_any=``
counts as done whatever its outcome.

Races. Every one between an upstream's outcome and the dependent's claim by someone else
(its ``cancel()``, its deadline, a shutdown, ``_work_queue``) is decided by one atomic step:
the move out of BLOCKED, under the scheduler's lock. The posted step looks at
``Upstreams.task``, which that move clears: a dependent claimed first is left alone; one
released first is an ordinary waiting task, which the claim then finds where it waits.

No recursion. Ending a dependent cancels its future, whose callbacks end the next one,
whose future's callbacks end the next: down a chain of 10,000, that would be 10,000 nested
calls. ``_deliver`` flattens them: a callback that comes while its thread is delivering
already queues its step for the outer loop, in any executor, and returns.

No chain of futures is held: a task keeps its upstreams only while it waits for them (in
``Upstreams``, not in its options: see ``Options.for_task``), and an upstream's callback
list keeps an ``Upstreams`` that let go of its task once it was queued or ended.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections import deque
from collections.abc import Iterable
from concurrent.futures import CancelledError, Future
from typing import TYPE_CHECKING, Any, Callable, Literal, Protocol

from ._arguments import callable_name
from ._expiry import Expired, mark_cancelled
from ._task import BLOCKED, CANCELLED, VOID, Task

if TYPE_CHECKING:
    from ._effects import Effects
    from ._task import Core as Hooked  # the scheduler, as a task's hooks see it
    from ._task import Holder

Reason = Literal["failed", "cancelled", "expired"]
_SAID = {"failed": "failed", "cancelled": "was cancelled", "expired": "expired"}


class DependencyFailed(CancelledError):
    """A task did not run because an upstream it waited for (``after=``) failed, was
    cancelled or expired: what its future's ``result()`` and ``exception()`` raise. A
    ``CancelledError``, as the task never ran: its future is ``cancelled()``, which
    ``wait()`` and ``as_completed()`` report at once, and handlers of a cancellation catch
    it.

    ``upstream``: the future whose outcome it was, however far upstream (in a chain
    a -> b -> c, c's names a when a failed); ``reason``: ``"failed"``, ``"cancelled"`` or
    ``"expired"``; ``task``: the name of the dependent's callable. For a failure, the
    upstream's exception is its ``__cause__``."""

    def __init__(self, task: str, upstream: Future[Any], reason: Reason) -> None:
        super().__init__(f"{task} did not run: its upstream {upstream!r} {_SAID[reason]}")
        self.task = task
        self.upstream = upstream
        self.reason: Reason = reason


# What ended a dependent: the upstream whose outcome it was, why, and its exception.
Failure = tuple[Future[Any], Reason, "BaseException | None"]


def _made(task: str, failure: Failure) -> DependencyFailed:
    upstream, reason, cause = failure
    exc = DependencyFailed(task, upstream, reason)
    exc.__cause__ = cause
    return exc


def failure_of(upstream: Future[Any]) -> Failure | None:
    """How a done upstream failed its dependents, or None if it succeeded. Outside the
    lock: a future of someone else's may run anything here."""
    if not upstream.cancelled():
        exc = upstream.exception(0)  # done: never waits
        return None if exc is None else (upstream, "failed", exc)
    try:
        upstream.exception(0)
    except DependencyFailed as exc:
        # It did not run because of an upstream of its own: that one is the cause.
        return (exc.upstream, exc.reason, exc.__cause__)
    except Expired:
        return (upstream, "expired", None)
    except CancelledError:
        pass
    return (upstream, "cancelled", None)


def check_upstreams(name: str, value: object) -> tuple[Future[Any], ...]:
    """``after=`` or ``after_any=`` as given to ``options()``: a future, or an iterable of
    futures, read once, here."""
    if value is None:
        return ()
    items = (value,) if isinstance(value, Future) or _in_asyncio(value) else value
    if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        raise TypeError(
            f"{name} must be a concurrent.futures.Future or an iterable of them,"
            f" not {type(value).__name__}"
        )
    futures = tuple(items)
    for future in futures:
        if not isinstance(future, Future):
            # An asyncio future's callbacks run in its loop, and it may be told of one
            # only from there: a dependent would be told of its end from no thread.
            hint = (
                " (for a coroutine, pass asyncio.run_coroutine_threadsafe()'s future)"
                if _in_asyncio(future)
                else ""
            )
            raise TypeError(
                f"{name} must hold concurrent.futures.Future objects, not"
                f" {type(future).__name__}{hint}"
            )
    return futures


def _in_asyncio(value: object) -> bool:
    # What asyncio.isfuture() looks at, without importing asyncio: an asyncio future, or
    # a task, is iterable (for yield from), and no iterable of upstreams.
    return hasattr(type(value), "_asyncio_future_blocking")


class Core(Protocol):
    """The scheduler, as a dependent's steps reach it (under its lock, but ``post``)."""

    forked: bool

    def post(self, step: Callable[[Effects], object], flush: bool = True) -> None: ...
    def move(self, task: Task, state: int, effects: Effects, was: int | None = None) -> None: ...
    def queue(self, task: Task, key: Any, effects: Effects) -> None: ...
    def discarded(self, effects: Effects) -> None: ...
    def holding(self, holder: Holder, holds: bool) -> None: ...


class Blocked:
    """An executor's tasks that wait for upstreams, as a ``Holder``: the scheduler lists
    them among its waiting tasks while there are any. They are due at no time yet, so none
    is held back from a worker (``held_back``) and no limit holds it (``holding``)."""

    __slots__ = ("tasks",)

    def __init__(self) -> None:
        self.tasks: set[Task] = set()

    @property
    def throttled(self) -> list[tuple[Task]]:
        return [(task,) for task in self.tasks]

    def held_back(self, now: float) -> int:
        return 0

    def holding(self, now: float) -> None:
        return None


class Upstreams:
    """What one dependent waits for: how many upstreams are not done yet, and which (for
    ``waiting()``). Shared with a copy that ``reschedule()`` queues in its task's place."""

    __slots__ = ("_blocked", "_core", "_left", "_waiting", "task")

    def __init__(
        self, core: weakref.ref[Any], blocked: Blocked, upstreams: tuple[Future[Any], ...]
    ) -> None:
        self._core = core
        self._blocked = blocked
        self._left = len(upstreams)
        # Each upstream not done yet, with how many times it was given.
        self._waiting: dict[Future[Any], int] = {}
        for upstream in upstreams:
            self._waiting[upstream] = self._waiting.get(upstream, 0) + 1
        # The task that stands for the dependent while it is blocked; None once it was
        # queued or claimed, after which an upstream's step changes nothing.
        self.task: Task | None = None

    # -- under the scheduler's lock (see _task.Blocker) -----------------------------------

    def hold(self, task: Task, core: Hooked, effects: Effects, was: int | None) -> bool:
        if not self._left:
            return False  # all done: queued as any task
        core.move(task, BLOCKED, effects, was)
        return True

    def waiting_for(self) -> tuple[Future[Any], ...]:
        return tuple(self._waiting)

    def moved(self, task: Task, state: int, core: Hooked) -> None:
        """``task`` moved into BLOCKED, or out of it (see ``Extension.moved``)."""
        tasks = self._blocked.tasks
        if state == BLOCKED:
            self.task = task
            tasks.add(task)
            if len(tasks) == 1:
                core.holding(self._blocked, True)
            return
        tasks.discard(task)
        if not tasks:
            core.holding(self._blocked, False)
            # A set never shrinks: one that held a chain's 100,000 tasks would keep their
            # room (4 MB) for good.
            self._blocked.tasks = set()
        if self.task is task:  # else a copy took its place (see reschedule)
            # Queued, or claimed: whatever upstream is done later changes nothing, and
            # the ones not done are no longer held for it.
            self.task = None
            self._waiting.clear()

    def _arrived(
        self, core: Core, upstream: Future[Any], failure: Failure | None, effects: Effects
    ) -> None:
        """An upstream is done (``failure``: it failed the dependent). The posted step."""
        given = self._waiting.pop(upstream, 0)
        if given > 1:
            self._waiting[upstream] = given - 1
        self._left -= 1
        task = self.task
        if task is None:
            return  # claimed first (cancelled, expired, shut down), or queued already
        if failure is None:
            if not self._left:
                core.queue(task, None, effects)  # due now or at its time, as any task
            return
        # The claim: a series' is counted once, cancelled, by its future (see _end).
        series = task.ext is not None and task.ext.recurrence is not None
        core.move(task, VOID if series else CANCELLED, effects)
        effects.later.append(
            functools.partial(_end_dependent, task, callable_name(task.fn), failure)
        )
        core.discarded(effects)

    # -- the upstreams' done-callbacks, in any thread, with no lock ------------------------

    def done(self, upstream: Future[Any]) -> None:
        """Of an ``after=`` upstream: one that did not succeed ends the dependent."""
        self._arrive(upstream, failure_of(upstream))

    def done_any(self, upstream: Future[Any]) -> None:
        """Of an ``after_any=`` upstream: done, whatever its outcome."""
        self._arrive(upstream, None)

    def _arrive(self, upstream: Future[Any], failure: Failure | None) -> None:
        core: Core | None = self._core()
        if core is not None and not core.forked:  # else gone, or the parent's task
            _deliver(core, functools.partial(self._arrived, core, upstream, failure))

    def listen(self, after: tuple[Future[Any], ...], after_any: tuple[Future[Any], ...]) -> None:
        """Be told of each upstream's end, once the task is queued BLOCKED: one done
        already calls back here, now."""
        try:
            for upstream in after:
                upstream.add_done_callback(self.done)
            for upstream in after_any:
                upstream.add_done_callback(self.done_any)
        except BaseException:
            # Interrupted (a KeyboardInterrupt in a callback): some upstream will never
            # tell it, so it would wait for ever. It is cancelled instead.
            task = self.task
            if task is not None:
                task.future.cancel()
            raise


def _end_dependent(task: Task, name: str, failure: Failure) -> None:
    """Cancel the future of a dependent claimed because an upstream failed, saying so."""
    mark_cancelled(task.future, functools.partial(_made, name, failure))
    task.abandon()


class _Delivering(threading.local):
    # The steps of upstreams that ended while this thread delivers: see _deliver.
    steps: deque[tuple[Core, Callable[[Effects], object]]] | None = None


_here = _Delivering()


def _deliver(core: Core, step: Callable[[Effects], object]) -> None:
    """Post ``step`` to ``core``. A post may end a dependent, whose future's callbacks
    post the next step, in this thread: those are queued for this loop, not nested, so a
    chain of any length ends in constant stack depth."""
    steps = _here.steps
    if steps is not None:
        steps.append((core, step))
        return
    _here.steps = steps = deque([(core, step)])
    error: BaseException | None = None
    try:
        while steps:
            core, step = steps.popleft()
            try:
                core.post(step)
            except BaseException as exc:  # a user's callback: the other steps still go
                if error is None:
                    error = exc
    finally:
        _here.steps = None
    if error is not None:
        raise error
