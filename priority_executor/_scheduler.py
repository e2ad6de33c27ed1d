"""The scheduler: two heaps, one lock, and the state machine of every task.

::

    add() ──► pending heap (by due time) ──promote──► ready heap (by policy key) ──► take()
        └──────────── already due ──────────────────────┘

One lock guards both heaps, the counts and every state change, so each claim (start,
cancel, expiry, drop) is one atomic step. User code never runs under it, except a policy's
``sort_key`` while a task is promoted; futures are completed after the lock is released,
because completing a future runs its callbacks.

Due tasks reach the ready heap through the *intake*, a deque that submitters append to
without the lock, and that a worker drains under it. A submitter that took the lock would
convoy with the workers: under the GIL, a thread preempted while it holds the lock makes
every other thread that wants it sleep, and each of those then waits again for the GIL.
Workers keep out of that convoy too: a worker that finds another worker holding the lock
parks instead of blocking on it (see _lock_for_worker()).
"""

from __future__ import annotations

import copy
import itertools
import math
import sys
import threading
from collections import deque
from concurrent.futures import Future
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
    INTAKE,
    PENDING,
    READY,
    STARTED,
    STATES,
    VOID,
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


class Scheduler:
    def __init__(self, clock: Clock, policy: Policy, workers: WorkerPool) -> None:
        self._key = key_function(policy)
        self.clock = clock
        self.workers = workers
        self.lock = threading.Lock()
        self.next_seq = itertools.count().__next__
        self._intake: deque[tuple[Any, ...]] = deque()  # (*policy key, seq, task)
        self._ready: list[tuple[Any, ...]] = []  # a heap of the same
        self._timers: list[TimerEntry] = []  # tasks by due time, deadlines by deadline
        self._counts = [0] * STATES
        self._series: set[Series] = set()  # live recurring series
        self._closed: str | None = None  # why submit() now raises
        self._broken: BaseException | None = None  # why nothing can run any more
        self._promoter: threading.Thread | None = None
        self._promoter_wakeup = threading.Condition(self.lock)
        self._promoter_sleeps_until = -math.inf  # -inf while it is awake: nobody need wake it
        self._drained = threading.Event()  # set once closed with nothing left to start
        # One entry per worker in take() that holds the lock or blocks on it, and so will
        # wake a worker parked behind it (see _lock_for_worker).
        self._handing: list[None] = []
        # With a ManualClock, nothing is due until a test advances it.
        self.manual_time = clock.attach(self)

    # -- intake ------------------------------------------------------------------------------

    def add(self, task: Task, due_now: bool) -> None:
        """Queue a new task, already due or not. Raises if the executor takes no more work."""
        key = self._key_or_error(task) if due_now else None
        if type(key) is tuple and task._deadline is None and task.series is None:
            # The common case: no lock (see the module docstring).
            self._check_open()
            self._make_ready(task, key)
            if self._closed is not None and self._take_back(task):
                self._check_open()  # shutdown won the race: raise as if it had come first
            return
        with self.lock:
            self._check_open()
            claimed = self._queue(task, key)
        _settle(claimed)

    def _check_open(self) -> None:
        if self._closed is not None:
            if self._broken is not None:
                raise _fresh(self._broken)
            raise RuntimeError(self._closed)

    def _take_back(self, task: Task) -> bool:
        """Shutdown closed intake while ``task`` was being added without the lock. If no one
        has drained it yet, the workers may already have exited: withdraw it."""
        with self.lock:
            if task.state != INTAKE:
                return False  # a worker has it: it was accepted before shutdown finished
            self._claim(task, VOID)
            self._discarded()
            return True

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
        except BaseException as exc:  # a broken policy fails this task, not the executor
            return exc

    def _queue(self, task: Task, key: Any) -> Claimed:
        """Queue a new task under the lock: to the workers if it has a key, else to wait."""
        if task.series is not None:
            self._series.add(task.series)
        if isinstance(key, BaseException):
            task.state = FAILED
            self._counts[FAILED] += 1
            return [(task, key)]
        if key is None:
            self._counts[PENDING] += 1
            self._push_timer(task)
            if not self.workers.threads:
                # Python 3.12+ starts no thread at interpreter exit, when a delayed task may
                # still become due: have a worker (parked until then) from now on.
                self.workers.spawn_if_room(self)
        else:
            self._make_ready(task, key)
        if task._expiry is not None:
            self._push_timer(task._expiry)
        return []

    def _make_ready(self, task: Task, key: Any) -> None:
        """Hand an uncounted due task to the workers; with or without the lock.

        A task in the intake is counted by the intake's length until a worker drains it.
        """
        task.state = INTAKE
        self._intake.append((*key, task._seq, task))
        # After the append: a worker that finds the intake empty registers as idle first
        # and looks again (see take()), so one of the two always sees the other.
        idle = self.workers.idle
        if idle:
            try:  # noqa: SIM105 (contextlib.suppress costs two Python calls on the hot path)
                idle.pop().release()
            except IndexError:
                pass  # another submission woke the last idle worker first
        else:
            self.workers.spawn_if_room(self)

    def _drain_intake(self) -> None:
        intake, ready, counts = self._intake, self._ready, self._counts
        while intake:
            entry = intake.popleft()
            task: Task = entry[-1]
            if task.state == INTAKE:
                task.state = READY
                counts[READY] += 1
                heappush(ready, entry)
            else:
                counts[INTAKE] += 1  # claimed in the intake: its claim counted it out

    def _ready_count(self) -> int:
        """Due tasks waiting for a worker, in the ready heap or on their way to it."""
        counts = self._counts
        return counts[READY] + counts[INTAKE] + len(self._intake)

    def _push_timer(self, entry: TimerEntry) -> None:
        heappush(self._timers, entry)
        if self.manual_time:  # advance() promotes: no thread
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
                task = entry.task
                if task is not None:
                    self._claim(task, EXPIRED)
                    claimed.append((task, None))
            elif isinstance(entry, Task) and entry.state == PENDING:
                key = self._key_or_error(entry)
                if isinstance(key, BaseException):
                    self._claim(entry, FAILED)
                    claimed.append((entry, key))
                else:
                    self._counts[PENDING] -= 1
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
        lock, intake, ready = self.lock, self._intake, self._ready
        idle, handing = self.workers.idle, self._handing
        if lock.acquire(False):
            handing.append(None)
        else:
            self._lock_for_worker(park)
        try:
            while True:
                if intake:
                    self._drain_intake()
                while ready:
                    task: Task = heappop(ready)[-1]
                    if task.state != READY:
                        continue  # claimed where it stood, by cancel() or a deadline
                    deadline = task._deadline
                    if deadline is not None and deadline <= self.clock.now():
                        # Its expiry may still be on its way: never start a task that is late.
                        self._claim(task, EXPIRED)
                    else:
                        self._claim(task, STARTED)
                    return task
                if self._finished():
                    self._wind_down()
                    return None
                idle.append(park)
                if intake:  # appended after the drain, perhaps without seeing us idle
                    _withdraw(idle, park)
                    continue
                # Workers parked behind this one are idle like it: there is nothing to take.
                handing.pop()
                lock.release()
                try:
                    park.acquire()
                finally:
                    self._lock_for_worker(park)
        finally:
            handing.pop()
            lock.release()
            # Workers parked behind this one (see _lock_for_worker) rely on this look, made
            # after the release: one of them takes over if there is something left to take.
            if idle and (self._ready_count() or self._finished()):
                try:  # noqa: SIM105 (as in _make_ready)
                    idle.pop().release()
                except IndexError:
                    pass  # a submission woke the last parked worker first

    def _lock_for_worker(self, park: threading.Lock) -> None:
        """Take the lock for a worker in take(); while another worker has it, park instead.

        A thread blocked on a lock is handed it while it does not hold the GIL, and then
        holds the lock while it waits for the GIL: behind it every worker queues, and each
        one that gets the lock costs a switch between threads (measured: 1.8 switches per
        task with 4 workers, against 0.03 with parking). A parked worker holds nothing; each
        worker counted in ``_handing`` wakes one parked worker after its release, if work is
        left (see take()).
        """
        lock, idle, handing = self.lock, self.workers.idle, self._handing
        while not lock.acquire(False):
            idle.append(park)
            # After the append: a worker in ``handing`` looks at ``idle`` only after its
            # release, so either that look finds us or this attempt finds the lock free.
            if lock.acquire(False):
                _withdraw(idle, park)
                break
            if not handing:
                # The holder is not a worker in take() (a submitter, cancel(), the promoter):
                # it wakes no one when done, so wait for the lock itself, as the worker that
                # the next ones park behind.
                _withdraw(idle, park)
                handing.append(None)
                lock.acquire()
                return
            park.acquire()
        handing.append(None)

    def _claim(self, task: Task, state: int) -> None:
        """Take a waiting task out of the queue for good, into ``state``. Every race between
        start, cancel, expiry and shutdown is decided by which claim comes first."""
        counts = self._counts
        counts[task.state] -= 1
        counts[state] += 1
        task.state = state
        if task._expiry is not None:
            task._expiry.task = None

    # -- cancellation ------------------------------------------------------------------------

    def cancel(self, task: Task) -> None:
        """The user cancelled a waiting task's future: complete the cancellation now."""
        with self.lock:
            if task.state > READY:
                return  # a worker or the deadline claimed it first and completes the future
            self._claim(task, CANCELLED)
            self._discarded()
        _settle([(task, None)])

    def end_series(self, series: Series, cancelled: bool) -> None:
        """A series' future was cancelled or failed: its waiting run, if any, never starts."""
        with self.lock:
            self._series.discard(series)
            run = series.run
            if run.state <= READY:
                # A failed series with a waiting run failed without running (a broken pool).
                self._claim(run, CANCELLED if cancelled else FAILED)
                self._discarded()
            elif cancelled:
                self._counts[CANCELLED] += 1  # its last run counts on its own when it ends

    def _discarded(self) -> None:
        """Waiting tasks were claimed where they stood: reclaim their memory, maybe finish."""
        counts = self._counts
        ready, timers = self._ready, self._timers
        self._drain_intake()  # else busy workers leave claimed tasks there, and their memory
        # Compacting when at least half the entries are dead costs O(1) per claim, amortised.
        if len(ready) > 2 * counts[READY]:
            ready[:] = [entry for entry in ready if entry[-1].state == READY]
            heapify(ready)
        # A waiting task has at most two entries in the pending heap: itself and its deadline.
        if len(timers) > 2 * (2 * counts[PENDING] + self._ready_count()):
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
            dropped = self._claim_waiting(CANCELLED) if cancel_futures else []
            self._discarded()
        _settle([(task, None) for task in dropped])

    def break_pool(self, exc: BaseException) -> None:
        """Nothing can run any more (an initializer failed, the backend broke): fail every
        waiting task, and every later submit, with ``exc``."""
        with self.lock:
            if self._broken is None:
                self._broken = exc
            if self._closed is None:
                self._closed = str(exc)
            failed = self._claim_waiting(FAILED)
            series = list(self._series)
            self._discarded()
        _settle([(task, _fresh(exc)) for task in failed])
        for each in series:
            each.fail(_fresh(exc))

    def _claim_waiting(self, state: int) -> list[Task]:
        """Claim every waiting one-shot task (series end with their futures)."""
        self._drain_intake()
        claimed = []
        for entry in itertools.chain((entry[-1] for entry in self._ready), self._timers):
            if isinstance(entry, Task) and entry.state <= READY and entry.series is None:
                self._claim(entry, state)
                claimed.append(entry)
        return claimed

    def _finished(self) -> bool:
        """Closed, and nothing waits to start: workers and promoter may exit."""
        return self._closed is not None and not self._counts[PENDING] and not self._ready_count()

    def _wind_down(self) -> None:
        self._drained.set()
        self.clock.detach(self)
        self.workers.wake_all()
        self._promoter_wakeup.notify()

    def join(self) -> None:
        """Wait until nothing waits to start and every thread has exited; unless called
        from a task or a done-callback, which cannot wait for the work it is part of."""
        threads = self.workers.threads
        if threading.current_thread() in threads or _inside_done_callback():
            return
        self._drained.wait()
        if self._promoter is not None:
            self._promoter.join()
        joined = 0
        while joined < len(threads):
            threads[joined].join()
            joined += 1

    def after_fork_in_child(self) -> None:
        """In a forked child: the parent's threads are gone; this executor takes no work."""
        self.lock = threading.Lock()
        self._promoter_wakeup = threading.Condition(self.lock)
        self._promoter = None
        self.workers.forget_threads()
        self._drained = threading.Event()
        self._drained.set()  # its remaining tasks belong to the parent: nothing to wait for
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
            counts[READY] += counts[INTAKE] + len(self._intake)
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
    for task, exc in claimed:
        if exc is None:
            task.abandon()
        else:
            task.fail(exc)


def _fresh(exc: BaseException) -> BaseException:
    """A new exception like ``exc``, to raise in one more place: one instance raised from
    many would collect all their tracebacks."""
    fresh = copy.copy(exc)
    fresh.__cause__ = exc.__cause__  # where the pool broke, if it said so
    return fresh


def _withdraw(idle: list[threading.Lock], park: threading.Lock) -> None:
    """Take a worker's parking spot back out of ``idle``, where it did not sleep after all."""
    try:
        idle.remove(park)
    except ValueError:
        park.acquire()  # someone popped it to wake us, and releases it: take that back


def _inside_done_callback() -> bool:
    """Whether a future's done-callback is running in this thread, whoever completed it."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code in _CALLBACK_CALLERS:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


# A done-callback runs from _invoke_callbacks, or at once from add_done_callback() when the
# future is already done.
_CALLBACK_CALLERS = (
    Future._invoke_callbacks.__code__,  # type: ignore[attr-defined]
    Future.add_done_callback.__code__,
)
