"""``PriorityExecutor._work_queue``: ``ThreadPoolExecutor``'s queue, as the clients that
drain it see it.

``ThreadPoolExecutor`` keeps its work items in a ``queue.SimpleQueue``, and some clients
reach into it: google-cloud-pubsub's ``ThreadScheduler.shutdown()`` takes out the items not
started, to hand their messages back; dask.distributed's worker clears it before its
shutdown. This executor has no such queue: this is a view of its waiting tasks that
answers what those clients ask of one.

- ``get(block=False)`` (``get_nowait()``) claims the task that would start next, as
  ``waiting()`` lists them, and returns it as the running Python's ``_WorkItem``. Claimed
  under the scheduler's lock, as a ``cancel()`` claims: a worker either started it first or
  never will. Its future stays pending, as one taken out of ``ThreadPoolExecutor``'s queue
  does: it is the client's now, to cancel or to run (a cancel() is reported to ``wait()``
  at once: see _report_cancel). In ``stats()`` it counts as cancelled: the executor will
  not run it. ``queue.Empty`` when none is left.
- ``queue.clear()`` drops every task not started: cancelled, and reported to ``wait()`` and
  ``as_completed()`` at once, as ``shutdown(cancel_futures=True)`` drops them.
- A recurring series is not a work item: its waiting run is neither handed out, nor
  dropped, nor counted here. Its future's ``cancel()`` ends it, and so does a shutdown. A
  lane's tasks are the executor's tasks like any other.
"""

from __future__ import annotations

import functools
import queue
import sys
import time
from collections import deque
from concurrent.futures.thread import _WorkItem
from typing import TYPE_CHECKING, Any, Callable, Literal, overload

from . import _control
from ._task import BLOCKED, CANCELLED, PENDING, READY, THROTTLED

if TYPE_CHECKING:
    from concurrent.futures import Future

    from ._effects import Effects
    from ._scheduler import Scheduler
    from ._task import Task

# A blocking get() has nothing to wake it when a task is queued: it looks this often.
_POLL = 0.005

# What a claim hands over: future, fn, args, kwargs (see Task.hand_over).
_Call = tuple["Future[Any]", Callable[..., Any], tuple[Any, ...], Any]


class _Moved:
    """A task may have joined or come due since the order kept was taken: ``seen``, the
    look that found it, for the snapshot to come to compare with (see _order_stands)."""

    __slots__ = ("seen",)

    def __init__(self, seen: tuple[int, ...]) -> None:
        self.seen = seen


class WorkQueue:
    """The waiting tasks of one executor, as ``ThreadPoolExecutor._work_queue`` would hold
    them (see the module docstring)."""

    def __init__(self, core: Scheduler) -> None:
        self._core = core
        # The rest of the last snapshot of the waiting tasks, in the order they would start,
        # and the look once the last task was taken out of it (see _order_stands). Draining
        # n tasks with a snapshot each (waiting()'s, O(n log n)) would take seconds for a
        # thousand; while no task joins or comes due, the rest of the snapshot is still the
        # order. Read and written under the scheduler's lock only. Its tasks that left hold
        # nothing of their call any more (see Task.hand_over).
        self._order: deque[Task] = deque()
        self._seen: tuple[int, ...] | None = None
        self.queue = Unstarted(core)

    @overload
    def get(self, block: Literal[False], timeout: float | None = None) -> _WorkItem[Any]: ...
    @overload
    def get(self, block: bool = True, timeout: float | None = None) -> _WorkItem[Any] | None: ...
    def get(self, block: bool = True, timeout: float | None = None) -> _WorkItem[Any] | None:
        """Take out the task that would start next, as SimpleQueue.get() takes an item.
        Blocking, this waits for one to be queued; once the executor is shut down with
        nothing left to start, it returns None, the shutdown sentinel that
        ``ThreadPoolExecutor``'s queue holds then, rather than wait for ever."""
        if not block:
            taken = self._take()
            if taken is None:
                raise queue.Empty
            return _work_item(taken)
        if timeout is not None and timeout < 0:
            raise ValueError("'timeout' must be a non-negative number")  # as SimpleQueue's
        end = None if timeout is None else time.monotonic() + timeout
        drained = self._core.drained
        while True:
            taken = self._take()
            if taken is not None:
                return _work_item(taken)
            if drained.is_set():
                return None
            left = _POLL if end is None else min(_POLL, end - time.monotonic())
            if left <= 0:
                raise queue.Empty
            drained.wait(left)

    def get_nowait(self) -> _WorkItem[Any]:
        return self.get(False)

    def put(self, item: None, block: bool = True, timeout: float | None = None) -> None:
        """Only ``None``, the shutdown sentinel, which does nothing here:
        ``ThreadPoolExecutor``'s workers take it as a wake-up to look whether the executor
        shut down, and this executor's workers, woken by ``shutdown()`` itself, never read
        this queue."""
        if item is not None:
            raise TypeError(
                "only None, the shutdown sentinel, can be put in a PriorityExecutor's"
                f" _work_queue, not {type(item).__name__}: submit() queues work"
            )

    def put_nowait(self, item: None) -> None:
        self.put(item, False)

    def qsize(self) -> int:
        """How many tasks ``get()`` could take out now."""
        return self._core.locked(functools.partial(_count, self._core))

    def empty(self) -> bool:
        return self.qsize() == 0

    def _take(self) -> _Call | None:
        core = self._core
        taken = core.locked(self._from_order)
        if isinstance(taken, _Moved):
            # The order kept may be stale: a snapshot, outside the lock (waiting() takes
            # it). Whatever moves meanwhile, the claim takes only a task still waiting.
            order = [waiting.future for waiting in _control.waiting(core)]
            taken = core.locked(functools.partial(self._from_snapshot, taken.seen, order))
        if taken is not None:
            # After the lock: a future already cancelled runs the callback here.
            taken[0].add_done_callback(_report_cancel)
        return taken

    def _from_order(self, effects: Effects) -> _Call | _Moved | None:
        """The next task of the order kept; or, if it may not stand any more, the look that
        found it so."""
        seen = self._state(effects)
        if not _order_stands(self._seen, seen):
            return _Moved(seen)
        return self._claim_next(effects, keep=True)

    def _from_snapshot(
        self, before: tuple[int, ...], futures: list[Future[Any]], effects: Effects
    ) -> _Call | None:
        core = self._core
        seen = self._state(effects)
        tasks = {
            task.future: task
            for task in core.waiting_tasks(effects)
            if task.state <= READY and not _series(task)
        }
        self._order = deque(tasks[future] for future in futures if future in tasks)
        # No task joined or came due between the look before the snapshot and this one
        # (this caller's look: another get() may have looked since): the rest of the
        # snapshot stays the order for the next get().
        return self._claim_next(effects, keep=_order_stands(before, seen))

    def _claim_next(self, effects: Effects, keep: bool) -> _Call | None:
        core, order = self._core, self._order
        taken = None
        while order:
            task = order.popleft()
            if task.state <= READY:  # else started, cancelled or expired since the snapshot
                core.claim(task, CANCELLED, effects)
                core.discarded(effects)  # its room is free: max_waiting's gate, its lane's
                future, fn, args, kwargs, context = task.hand_over()
                taken = (future, fn, args, kwargs)
                # The client runs the call as it likes, in its own context, as with
                # ThreadPoolExecutor's work items. The task's is let go of after the
                # lock: its values' __del__ may run.
                effects.drop.append(context)
                break
        self._seen = self._state(effects) if keep else None
        return taken

    def _state(self, effects: Effects) -> tuple[int, ...]:
        """What tells whether a task joined the waiting ones, or came due, between two
        looks (see ``_order_stands``): a sequence number, which every task queued takes (a
        reschedule's copy, a series' next run too), and each look takes one, so that the
        next finds one more if no one else took any; the retries, a task queued again
        after its attempt; the sum of the counts, which a move leaves as it is and a task
        that comes in through the intake raises by one; the tasks waiting for their due
        time."""
        core = self._core
        core.count_posted(effects)  # as waiting() and a worker see them
        core.drain_intake(effects)
        counts = core.counts
        return (core.next_seq(), core.retries, sum(counts), counts[PENDING])


class Unstarted:
    """``_work_queue.queue``: what ``queue.Queue.queue`` is to the clients that clear it."""

    def __init__(self, core: Scheduler) -> None:
        self._core = core

    def clear(self) -> None:
        """Drop every task not started, as ``shutdown(cancel_futures=True)`` does. (What
        the WorkQueue kept of its last snapshot needs no word of it: none of those tasks is
        waiting now, and any task queued later takes a sequence number.)"""
        self._core.locked(self._drop)

    def _drop(self, effects: Effects) -> None:
        core = self._core
        for task in core.claim_waiting(CANCELLED, effects):
            effects.later.append(task.abandon)  # reported to wait() and as_completed() at once
        core.discarded(effects)

    def __len__(self) -> int:
        return self._core.locked(functools.partial(_count, self._core))


def _count(core: Scheduler, effects: Effects) -> int:
    """How many waiting tasks ``get()`` could take out, under the lock."""
    # As stats() counts: cancellations posted meanwhile first, the intake's tasks due.
    core.count_posted(effects)
    core.drain_intake(effects)
    counts = core.counts
    series = sum(1 for task in core.series if task.state <= READY)
    return counts[BLOCKED] + counts[PENDING] + counts[THROTTLED] + core.ready_count() - series


def _order_stands(last: tuple[int, ...] | None, seen: tuple[int, ...]) -> bool:
    """Whether the order kept at look ``last`` still holds every waiting task in the order
    they would start, at look ``seen``: no task joined and none came due since. Workers
    starting tasks do not spoil it (a snapshot per start would be taken over and over while
    a drain races them): a task that left is skipped. A task that its lane held back or
    let go since keeps its place, as does fair share's order between lanes, which moves
    with each start: there the order is the snapshot's, whose tasks are all still waiting
    or skipped, never handed out once started."""
    return last is not None and seen[0] == last[0] + 1 and seen[1:] == last[1:]


def _series(task: Task) -> bool:
    return task.ext is not None and task.ext.recurrence is not None


def _work_item(taken: _Call) -> _WorkItem[Any]:
    """The running Python's own work item: from 3.14, one ``task``, (fn, args, kwargs),
    as its ``WorkerContext.resolve_task()`` makes it."""
    future, fn, args, kwargs = taken
    if sys.version_info >= (3, 14):
        return _WorkItem(future, (fn, args, dict(kwargs)))
    return _WorkItem(future, fn, args, dict(kwargs))


def _report_cancel(future: Future[Any]) -> None:
    """A task taken out is the client's: if it cancels the future, that is reported to
    ``wait()`` and ``as_completed()`` at once, as any cancellation of a task that will never
    run (``ThreadPoolExecutor`` never reports it: no worker dequeues the item any more)."""
    if future.cancelled():
        future.set_running_or_notify_cancel()
