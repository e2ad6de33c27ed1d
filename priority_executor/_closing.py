"""How a scheduler stops: shutdown, a broken pool, the GC finalizer's request, a fork; and
the look at every waiting task that a shutdown (or a lane's) claims them by.

A mixin of ``_scheduler.Scheduler``, which it is written for: its methods are the
scheduler's, under the same lock and rules (see that module), kept here as one idea.
"""

from __future__ import annotations

import copy
import functools
import threading
import weakref
from collections import deque
from concurrent.futures import BrokenExecutor
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from . import _threads
from ._fair import Fair
from ._promoter import Promoter
from ._task import (
    BLOCKED,
    CANCELLED,
    FAILED,
    PENDING,
    READY,
    STARTED,
    THROTTLED,
    WAITING,
    Alarm,
    Task,
)

if TYPE_CHECKING:
    from ._clock import WallTime
    from ._effects import Effects
    from ._gate import Gate
    from ._task import Holder, TimerEntry
    from ._workers import WorkerPool

R = TypeVar("R")


class Closing:
    """The scheduler's shutdown, break, wind-down, join and fork (see the module docstring)."""

    if TYPE_CHECKING:  # the scheduler's, which this is mixed into
        lock: threading.Lock
        counts: list[int]
        closed: str | None
        broken: BaseException | None
        shutdown_requested: str | None
        cancelled_all: bool
        forked: bool
        drained: threading.Event
        series: set[Task]
        holders: set[Holder]
        intake: deque[tuple[Any, ...]]
        in_order: deque[tuple[Any, ...]]
        ready: list[tuple[Any, ...]]
        fair: Fair | None
        timers: list[TimerEntry]
        workers: WorkerPool
        promoter: Promoter
        wall_time: WallTime
        gate: Gate | None
        gated: bool
        later: deque[Callable[[Effects], object]]
        _posted: deque[Callable[[Effects], object]]
        _lane_gates: weakref.WeakSet[Gate]

        def locked(self, step: Callable[[Effects], R]) -> R: ...
        def claim(self, task: Task, state: int, effects: Effects) -> None: ...
        def discarded(self, effects: Effects) -> None: ...
        def drain_intake(self, effects: Effects, closing: object = None) -> None: ...
        def count_posted(self, effects: Effects) -> None: ...
        def ready_count(self) -> int: ...
        def _start_worker(self) -> None: ...
        def now(self) -> float: ...
        def promote_due(self) -> None: ...
        def promote_and_plan(self) -> float | None: ...

    def shutdown(self, cancel_futures: bool, reason: str, cancel_not_due: bool = False) -> None:
        """Take no more work; cancel the series; with ``cancel_futures``, every task not
        started; with ``cancel_not_due``, those not due yet (a ``with`` block's exception
        must not wait for them)."""
        self.shutdown_requested = None
        self.locked(functools.partial(self._close, cancel_futures, reason, cancel_not_due))

    def _close(
        self, cancel_futures: bool, reason: str, cancel_not_due: bool, effects: Effects
    ) -> None:
        self._take_no_more(reason, effects)
        if cancel_futures or cancel_not_due:
            self.cancelled_all = True  # a retry would be a task not due
            for task in self.claim_waiting(CANCELLED, effects, due_too=cancel_futures):
                effects.later.append(task.abandon)
        # Their futures, as they complete, tell their tasks: that ends the series (see _end).
        effects.later.extend(task.future.cancel for task in self.series)
        self.discarded(effects)
        if self.ready_count() and not self.workers.threads:
            # A submit put its task in the intake and has yet to start the worker it found
            # room for (see Scheduler.add): shutdown(wait=True) must not wait for it.
            effects.later.append(self._start_worker)

    def request_shutdown(self, reason: str) -> None:
        """Shut down without waiting, from the executor's GC finalizer. That may run in any
        thread, at any moment, even in one that holds the lock: so this only raises a flag
        and wakes a thread of the executor, which shuts it down (as ``ThreadPoolExecutor``'s
        finalizer only puts a wake-up on its queue)."""
        self.shutdown_requested = reason
        self.workers.wake_one()  # one that waits for work: an idle worker looks at the flag
        self.promoter.wake()

    def break_pool(self, exc: BaseException) -> None:
        """Nothing can run any more (an initializer failed, the backend broke): fail every
        waiting task, and every later submit, with ``exc``."""
        self.locked(functools.partial(self._break, exc))

    def _break(self, exc: BaseException, effects: Effects) -> None:
        if self.broken is None:
            self.broken = exc
        self._take_no_more(str(exc), effects)
        for task in self.claim_waiting(FAILED, effects):
            effects.later.append(functools.partial(fail_fresh, task, exc))
        # Their futures, as they complete, tell their tasks: that ends the series (see _end).
        effects.later.extend(functools.partial(fail_fresh, task, exc) for task in self.series)
        self.discarded(effects)

    def _take_no_more(self, reason: str, effects: Effects) -> None:
        """Shutdown began, or the pool broke: submits raise, those waiting for a lane's room
        too (those waiting for the executor's are woken by every claim: see discarded())."""
        if self.closed is None:
            self.closed = reason
        effects.later.extend(gate.wake_all for gate in self._lane_gates)

    def bound(self, gate: Gate) -> None:
        """A lane with ``max_waiting`` was made: from now on every submit looks for room
        (see add()), and shutdown wakes the submits waiting in its gate."""
        # Under the lock, as _take_no_more iterates them.
        self.locked(lambda effects: self._lane_gates.add(gate))
        self.gated = True

    def waiting_tasks(self, effects: Effects) -> list[Task]:
        """Every entry of a waiting task, under the lock, once the intake is drained: the
        ready ones, those held back (throttled by a lane, or blocked: see Holder), the
        pending ones (a task may be listed twice: a series' stale entries, a heap's dead
        ones)."""
        self.drain_intake(effects)
        return [
            *(entry[-1] for entry in (*self.in_order, *self.ready)),
            *(entry[-1] for entry in (() if self.fair is None else self.fair.entries())),
            *(entry[-1] for holder in self.holders for entry in holder.throttled),
            *(entry for entry in self.timers if isinstance(entry, Task)),
        ]

    def claim_waiting(
        self, state: int, effects: Effects, lane: object = None, due_too: bool = True
    ) -> list[Task]:
        """Claim every waiting one-shot task, or every one of ``lane`` (series end with
        their futures); without ``due_too``, only those not due yet."""
        claimed = []
        # A copy: each claim may compact a heap, or give throttled tasks back to the workers.
        for task in self.waiting_tasks(effects):
            ext = task.ext
            if (
                task.state <= READY
                and (ext is None or ext.recurrence is None)
                and (lane is None or (ext is not None and ext.lane is lane))
                and (due_too or task.state <= PENDING)  # BLOCKED or PENDING: not due
            ):
                self.claim(task, state, effects)
                claimed.append(task)
        return claimed

    def _finished(self) -> bool:
        """Closed, and nothing waits to start or runs: workers and promoter may exit. A
        running task counts: if it has a retry policy, a failed attempt queues it again."""
        counts = self.counts
        return (
            self.closed is not None
            and not counts[BLOCKED]  # its upstreams may still be done: it runs then
            and not counts[PENDING]
            and not counts[THROTTLED]
            and not self.ready_count()
            and not self.running()
        )

    def running(self) -> int:
        """Tasks started and not ended, under the lock. Starts are counted under it, ends in
        the workers' tallies without it: a tally read before its worker counts an end only
        makes this larger, and that worker looks again (in take()) once it has counted, or
        has the worker it parked behind look again (see the parking in take())."""
        return self.counts[STARTED] - self._ends()

    def _ends(self) -> int:
        """Runs ended, as the workers count them in their tallies, without the lock."""
        return sum(sum(tally) for tally in self.workers.tallies)

    def _wind_down(self) -> None:
        with self.lock:
            # Nothing will fire the alarms left (a lane's timer, dead entries): a lane and
            # its timer hold each other, a reference cycle that only the cyclic GC frees.
            timers, self.timers = self.timers, []
        for entry in timers:
            if isinstance(entry, Alarm):
                entry.drop()
        self.drained.set()
        self.wall_time.clock.detach(self)
        self.promoter.retire()
        self.workers.retire()

    def join(self) -> bool:
        """Wait until nothing waits to start and every thread has exited; unless called
        from one of the executor's own threads (a task or a done-callback running there),
        which cannot wait for the work it is part of. Returns whether it waited."""
        if _threads.owned_by(self):
            return False
        self.drained.wait()
        self.promoter.join()
        self.workers.join()
        return True

    def quiet(self) -> bool:
        """Whether nothing can happen until time moves on: no task is due (held back by a
        lane with room, or ready) or running, and every worker is done with its last task,
        its future's callbacks included (see ManualClock.settle)."""
        return self.locked(self._quiet)

    def _quiet(self, effects: Effects) -> bool:
        self.count_posted(effects)  # a lane's room may give a throttled task back
        self.drain_intake(effects)
        workers = self.workers
        # A worker lists itself idle only in take(), once done with its last task.
        return (
            not self.ready_count()
            and not self.running()
            and len(workers.idle) >= len(workers.threads)
        )

    def after_fork_in_child(self) -> None:
        """In a forked child: the parent's threads are gone, and its tasks are the parent's.
        The executor takes no work and holds none, so that nothing of the parent's runs,
        is cancelled or has its callbacks called here."""
        self.lock = threading.Lock()
        self.forked = True
        self.closed = "cannot schedule new futures in a process forked from the executor's"
        self.intake = deque()
        self.in_order = deque()
        self.ready = []
        if self.fair is not None:
            self.fair = Fair(self.fair.by_time)
        self.timers = []
        self.wall_time.waiting = 0
        self.series = set()
        self.holders = set()
        self._posted = deque()
        self.later = deque()
        for state in WAITING:
            self.counts[state] = 0
        # Its runs too: their threads are gone, and no end will ever be counted here.
        self.counts[STARTED] = self._ends()
        self.promoter = Promoter(self, self.promoter.name)
        self.promoter.retire()
        if self.gate is not None:
            self.gate.after_fork_in_child()
        for gate in self._lane_gates:
            gate.after_fork_in_child()
        self.workers.forget_threads()
        self.drained = threading.Event()
        self.drained.set()


def fail_fresh(task: Task, exc: BaseException) -> None:
    task.fail(fresh(exc))


def fresh(exc: BaseException) -> BaseException:
    """A new exception like ``exc``, to raise in one more place: one instance raised from
    many would collect all their tracebacks."""
    try:
        fresh = copy.copy(exc)
    except Exception:
        # Its __init__ does not take its own args: say what broke, and chain it.
        fresh = BrokenExecutor(f"the executor cannot run tasks: {type(exc).__name__}")
        fresh.__cause__ = exc
        return fresh
    fresh.__cause__ = exc.__cause__  # where the pool broke, if it said so
    return fresh
