"""The scheduler: two heaps, one lock, and the state machine of every task.

::

    add() ──► pending heap (by due time) ──promote──► ready heap (by policy key) ──► take()
        └──────────── already due ──────────────────────┘

One lock guards both heaps, the counts and every state change, so each claim (start,
cancel, expiry, drop) is one atomic step. User code never runs under it, except a policy's
``sort_key`` while a task is promoted; futures are completed after the lock is released,
because completing a future runs its callbacks.
"""

from __future__ import annotations

import itertools
import math
import threading
from concurrent.futures.thread import BrokenThreadPool
from heapq import heapify, heappop, heappush
from typing import TYPE_CHECKING, Any, Optional

from ._clock import Clock
from ._policies import Policy, key_function
from ._stats import ExecutorStats
from ._task import (
    CANCELLED,
    COMPLETED,
    EXPIRED,
    FAILED,
    PENDING,
    READY,
    STARTED,
    STATES,
    Expiry,
    Task,
    TimerEntry,
)

if TYPE_CHECKING:
    from ._recurring import Series
    from ._workers import WorkerPool

# Tasks claimed under the lock whose futures are completed after it: (task, exception to
# fail it with, or None to report it cancelled).
Claimed = list[tuple[Task, Optional[BaseException]]]

_settling = threading.local()


class Scheduler:
    def __init__(self, clock: Clock, policy: Policy, workers: WorkerPool) -> None:
        self._key = key_function(policy)
        self.clock = clock
        self.workers = workers
        self.lock = threading.Lock()
        self.next_seq = itertools.count().__next__
        self._ready: list[tuple[Any, ...]] = []  # (*policy key, seq, task)
        self._timers: list[TimerEntry] = []  # tasks by due time, deadlines by deadline
        self._counts = [0] * STATES
        self._series: set[Series] = set()  # live recurring series
        self._closed: str | None = None  # why submit() now raises RuntimeError
        self._broken: str | None = None
        self._promoter: threading.Thread | None = None
        self._promoter_wakeup = threading.Condition(self.lock)
        self._promoter_sleeps_until = -math.inf  # -inf while it is awake: nobody need wake it
        self._clock_promotes = clock.attach(self)

    # -- intake ------------------------------------------------------------------------------

    def add(self, task: Task, due_now: bool) -> None:
        """Queue a new task, already due or not. Raises if the executor takes no more work."""
        key = self._key_or_error(task) if due_now else None
        with self.lock:
            if self._broken is not None:
                raise BrokenThreadPool(self._broken)
            if self._closed is not None:
                raise RuntimeError(self._closed)
            claimed = self._queue(task, key)
        _settle(claimed)

    def continue_series(self, series: Series) -> None:
        """Queue the next run of a series whose run just ended, unless the series has ended."""
        with self.lock:
            if series not in self._series or self._closed is not None:
                return  # cancelled or shut down: whoever ended it completes its future
            now = self.clock.now()
            run = series.next_run(now)
            claimed = self._queue(run, self._key_or_error(run) if run.due <= now else None)
        _settle(claimed)

    def _key_or_error(self, task: Task) -> Any:
        try:
            return self._key(task)
        except Exception as exc:  # a broken policy fails this task, not the executor
            return exc

    def _queue(self, task: Task, key: Any) -> Claimed:
        """Count a new task and put it into its heap: the ready one if it has a key."""
        self._counts[PENDING] += 1
        if task.series is not None:
            self._series.add(task.series)
        if isinstance(key, Exception):
            self._move(task, FAILED)
            return [(task, key)]
        if key is None:
            self._push_timer(task)
        else:
            self._make_ready(task, key)
        if task._deadline is not None:
            self._push_timer(Expiry(task, task._deadline))
        return []

    def _make_ready(self, task: Task, key: Any) -> None:
        self._move(task, READY)
        heappush(self._ready, (*key, task._seq, task))
        self.workers.wake_or_spawn(self)

    def _push_timer(self, entry: TimerEntry) -> None:
        heappush(self._timers, entry)
        if self._clock_promotes:
            return
        if self._promoter is None:
            self._promoter = threading.Thread(
                name=f"{self.workers.name_prefix}_promoter", target=self.run_promoter
            )
            self._promoter.start()
        elif entry._when < self._promoter_sleeps_until:
            self._promoter_wakeup.notify()

    # -- promotion ---------------------------------------------------------------------------

    def promote_due(self) -> None:
        """Move every task due by now into the ready heap and apply every passed deadline."""
        with self.lock:
            claimed = self._promote(self.clock.now())
        _settle(claimed)

    def _promote(self, now: float) -> Claimed:
        timers = self._timers
        claimed: Claimed = []
        while timers and timers[0]._when <= now:
            entry = heappop(timers)
            if isinstance(entry, Expiry):
                if entry.live():
                    self._move(entry.task, EXPIRED)
                    claimed.append((entry.task, None))
            elif isinstance(entry, Task) and entry.state == PENDING:
                key = self._key_or_error(entry)
                if isinstance(key, Exception):
                    self._move(entry, FAILED)
                    claimed.append((entry, key))
                else:
                    self._make_ready(entry, key)
        if claimed:
            self._discarded()
        return claimed

    def run_promoter(self) -> None:
        """The promoter thread: sleep until the next due time or deadline, then promote."""
        lock = self.lock
        with lock:
            while not self._finished():
                now = self.clock.now()
                claimed = self._promote(now)
                if claimed:
                    lock.release()
                    try:
                        _settle(claimed)
                    finally:
                        lock.acquire()
                    continue
                timers = self._timers
                if timers:
                    self._promoter_sleeps_until = timers[0]._when
                    self._promoter_wakeup.wait(timers[0]._when - now)
                else:
                    self._promoter_sleeps_until = math.inf
                    self._promoter_wakeup.wait()
                self._promoter_sleeps_until = -math.inf

    # -- workers -----------------------------------------------------------------------------

    def take(self, park: threading.Lock) -> Task | None:
        """Claim the best due task for a worker, blocking on ``park`` while there is none.

        Returns a task claimed STARTED, to run, or EXPIRED, to abandon; None when the worker
        should exit.
        """
        lock = self.lock
        with lock:
            ready = self._ready
            while True:
                while ready:
                    task: Task = heappop(ready)[-1]
                    if task.state != READY:
                        continue  # claimed where it stood, by cancel() or a deadline
                    deadline = task._deadline
                    if deadline is not None and deadline <= self.clock.now():
                        # Its expiry may still be on its way: never start a task that is late.
                        self._move(task, EXPIRED)
                    else:
                        self._move(task, STARTED)
                    return task
                if self._finished():
                    self._wind_down()
                    return None
                self.workers.idle.append(park)
                lock.release()
                try:
                    park.acquire()
                finally:
                    lock.acquire()

    def _move(self, task: Task, state: int) -> None:
        counts = self._counts
        counts[task.state] -= 1
        counts[state] += 1
        task.state = state

    # -- cancellation ------------------------------------------------------------------------

    def cancel(self, task: Task) -> None:
        """The user cancelled a waiting task's future: complete the cancellation now."""
        with self.lock:
            if task.state > READY:
                return  # a worker or the deadline claimed it first and completes the future
            self._move(task, CANCELLED)
            self._discarded()
        _settle([(task, None)])

    def end_series(self, series: Series, cancelled: bool) -> None:
        """A series' future was cancelled or failed: its waiting run, if any, never starts."""
        with self.lock:
            self._series.discard(series)
            run = series.run
            if run.state <= READY:
                # A failed series with a waiting run failed without running (a broken pool).
                self._move(run, CANCELLED if cancelled else FAILED)
                self._discarded()
            elif cancelled:
                self._counts[CANCELLED] += 1  # its last run counts on its own when it ends

    def _discarded(self) -> None:
        """Waiting tasks were claimed where they stood: reclaim their memory, maybe finish."""
        counts = self._counts
        ready, timers = self._ready, self._timers
        if len(ready) > 2 * counts[READY] + 64:
            ready[:] = [entry for entry in ready if entry[-1].state == READY]
            heapify(ready)
        # A waiting task has at most two entries in the pending heap: itself and its deadline.
        if len(timers) > 2 * (2 * counts[PENDING] + counts[READY]) + 64:
            timers[:] = [entry for entry in timers if entry.live()]
            heapify(timers)
        if self._finished():
            self._wind_down()

    # -- shutdown ----------------------------------------------------------------------------

    def shutdown(self, cancel_futures: bool, reason: str) -> None:
        with self.lock:
            if self._closed is None:
                self._closed = reason
            series = list(self._series)
        for each in series:
            each.future.cancel()
        with self.lock:
            claimed = self._claim_waiting(CANCELLED) if cancel_futures else []
            self._discarded()
        _settle(claimed)

    def break_pool(self, reason: str) -> None:
        """An initializer failed: fail every waiting task, and every later submit."""
        with self.lock:
            self._broken = reason
            claimed = self._claim_waiting(FAILED, BrokenThreadPool(reason))
            series = list(self._series)
            self._discarded()
        _settle(claimed)
        for each in series:
            each.fail(BrokenThreadPool(reason))

    def _claim_waiting(self, state: int, exc: BaseException | None = None) -> Claimed:
        """Claim every waiting one-shot task (series end with their futures)."""
        claimed: Claimed = []
        for entry in itertools.chain((entry[-1] for entry in self._ready), self._timers):
            if isinstance(entry, Task) and entry.state <= READY and entry.series is None:
                self._move(entry, state)
                claimed.append((entry, exc))
        return claimed

    def _finished(self) -> bool:
        """Closed, and nothing waits to start: workers and promoter may exit."""
        counts = self._counts
        closed = self._closed is not None or self._broken is not None
        return closed and not counts[PENDING] and not counts[READY]

    def _wind_down(self) -> None:
        self.workers.wake_all()
        self._promoter_wakeup.notify()

    def join(self) -> None:
        """Wait for the promoter and every worker to exit, unless called from within."""
        me = threading.current_thread()
        if getattr(_settling, "active", False) or me is self._promoter:
            return
        threads = self.workers.threads
        if me in threads:
            return
        if self._promoter is not None:
            self._promoter.join()
        joined = 0
        while joined < len(threads):  # a promotion may start a worker while we wait
            threads[joined].join()
            joined += 1

    def after_fork_in_child(self) -> None:
        """In a forked child: the parent's threads are gone; this executor takes no work."""
        self.lock = threading.Lock()
        self._promoter_wakeup = threading.Condition(self.lock)
        self._promoter = None
        self._clock_promotes = True  # never start a promoter here
        self.workers.forget_threads()
        self._closed = "cannot schedule new futures in a process forked from the executor's"

    # -- introspection -----------------------------------------------------------------------

    def stats(self) -> ExecutorStats:
        with self.lock:
            counts = list(self._counts)
            # A worker tallies how its tasks ended without the lock; counts[STARTED] is
            # every start, so a task ending between the two reads is simply still running.
            for tally in self.workers.tallies:
                for state, n in enumerate(tally):
                    counts[state] += n
                    counts[STARTED] -= n
        return ExecutorStats(
            scheduled=counts[PENDING],
            ready=counts[READY],
            running=counts[STARTED],
            completed=counts[COMPLETED],
            failed=counts[FAILED],
            cancelled=counts[CANCELLED],
            expired=counts[EXPIRED],
        )


def _settle(claimed: Claimed) -> None:
    """Complete the futures of claimed tasks. Runs their callbacks: never under the lock."""
    if not claimed:
        return
    # A callback that calls shutdown() must not wait here for the work it interrupts.
    outer = getattr(_settling, "active", False)
    _settling.active = True
    try:
        for task, exc in claimed:
            if exc is None:
                task.abandon()
            else:
                task.fail(exc)
    finally:
        _settling.active = outer
