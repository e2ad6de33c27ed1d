"""The worker threads: who runs a ready task, and how an idle one waits.

Workers start lazily, one per submission that finds no idle worker, up to ``max_workers``,
as in ``ThreadPoolExecutor``. An idle worker parks on a lock of its own that the next
submission releases: a waiting worker costs no CPU, and a submission wakes exactly one
worker that is really asleep. ``idle`` is used without the scheduler's lock by submitters
(``list.pop`` is atomic, on free-threaded builds too: see docs/design.md), under it by
workers. With a backend, each worker is an in-flight slot that hands its task over and
waits for it (see ``_backend``).

A worker that finds another worker holding the scheduler's lock parks too, instead of
blocking on it (see ``lock_for_worker``).
"""

from __future__ import annotations

import functools
import threading
from concurrent.futures.thread import BrokenThreadPool
from typing import TYPE_CHECKING, Any, Callable, Protocol

from . import _threads
from ._effects import Effects
from ._run import run
from ._task import STARTED, STATES, Call, Core, Task

if TYPE_CHECKING:
    from ._backend import Backend
    from ._fair import Fair


class Source(Core, Protocol):
    """The scheduler, as its workers reach it."""

    fair: Fair | None  # the ready tasks in shares, once a lane has a weight (see _fair)

    def take(self, park: threading.Lock, effects: Effects) -> Task | None: ...
    def break_pool(self, exc: BaseException) -> None: ...


class WorkerPool:
    """The threads of one executor, and the parking spots of those that are idle."""

    def __init__(
        self,
        max_workers: int,
        name_prefix: str,
        initializer: Callable[..., object] | None,
        initargs: tuple[Any, ...],
        backend: Backend | None,
    ) -> None:
        self.max_workers = max_workers
        self.name_prefix = name_prefix
        self._initializer = initializer
        self._initargs = initargs
        self.threads: list[threading.Thread] = []
        self.idle: list[threading.Lock] = []  # held locks: releasing one wakes its worker
        # One entry per worker in take() that holds the scheduler's lock or blocks on it,
        # and so will wake a worker parked behind it (see lock_for_worker).
        self.handing: list[None] = []
        self.tallies: list[list[int]] = []  # per worker: how many of its tasks ended in each state
        self.backend = backend
        self._spawning = threading.Lock()
        self._retired = False  # nothing is left to start: no thread starts any more
        self._alive = 0  # threads started and not yet exited
        self._named = 0  # threads named so far: {name_prefix}_{i}, one i each
        # Threads whose call ran past its time limit and goes on (see _runtime), and those
        # of them that left the pool for a replacement (at most max_workers): under the
        # scheduler's lock.
        self.overrunning = 0
        self.replaced = 0

    def start_worker(self, scheduler: Source) -> None:
        """Start a worker, unless ``max_workers`` are running already. Raises only if it
        cannot start and no worker runs: then no task could ever run."""
        if len(self.threads) >= self.max_workers:
            return
        with self._spawning:
            if self._retired or len(self.threads) >= self.max_workers:
                return
            park = threading.Lock()
            park.acquire()
            tally = [0] * STATES
            # Listed before it runs: it may count a task's end, then look whether anything
            # still runs (see Scheduler._running), before start() returns.
            self.tallies.append(tally)
            self._alive += 1  # likewise: it may exit before start() returns
            try:
                thread = _threads.start(
                    f"{self.name_prefix}_{self._named}",
                    scheduler,
                    self._work,
                    scheduler,
                    park,
                    tally,
                )
            except RuntimeError:  # a resource limit, or interpreter exit on 3.12+
                self._alive -= 1
                self.tallies.pop()  # the last one: starts are serialised by _spawning
                if not self.threads:
                    raise
                return  # the workers there are will do
            self._named += 1
            self.threads.append(thread)

    def leave(self, thread: threading.Thread) -> bool:
        """``thread`` overruns a time limit: it is no longer one of the pool's workers, and
        its place is free for a replacement (it exits once its call returns). False if it
        is not one (it left already)."""
        with self._spawning:
            try:
                self.threads.remove(thread)
            except ValueError:
                return False
            return True

    def wake_one(self) -> bool:
        """Wake an idle worker, if there is one; return whether there was."""
        try:
            self.idle.pop().release()
        except IndexError:
            return False  # none, or another thread woke the last one first
        return True

    def retire(self) -> None:
        """Nothing is left to start: every worker exits, and none starts any more."""
        with self._spawning:
            self._retired = True
        while self.wake_one():
            pass

    def join(self) -> None:
        with self._spawning:  # retired: every thread that started is listed by now
            threads = list(self.threads)
        for thread in threads:
            thread.join()

    def forget_threads(self) -> None:
        """In a forked child, where the parent's threads do not exist."""
        self.threads = []
        self.idle = []
        self.handing = []
        self._spawning = threading.Lock()
        self._retired = True
        self.overrunning = self.replaced = 0  # the parent's

    # -- parking -----------------------------------------------------------------------------

    def lock_for_worker(self, lock: threading.Lock, park: threading.Lock) -> None:
        """Take the scheduler's lock for a worker; while another worker has it, park instead.

        A thread blocked on a lock is handed it while it does not hold the GIL, and then
        holds the lock while it waits for the GIL: behind it every worker queues, and each
        one that gets the lock costs a switch between threads (measured: 1.8 switches per
        task with 4 workers, against 0.03 with parking). A parked worker holds nothing; each
        worker counted in ``handing`` wakes one parked worker after its release, if work is
        left (see Scheduler.take()).
        """
        idle, handing = self.idle, self.handing
        while not lock.acquire(False):
            idle.append(park)
            # After the append: a worker in ``handing`` looks at ``idle`` only after its
            # release, so either that look finds us or this attempt finds the lock free.
            if lock.acquire(False):
                self.withdraw(park)
                break
            if not handing:
                # The holder is not a worker in take() (a submitter, cancel(), the promoter):
                # it wakes no one when done, so wait for the lock itself, as the worker that
                # the next ones park behind.
                self.withdraw(park)
                handing.append(None)
                lock.acquire()
                return
            park.acquire()
        handing.append(None)

    def withdraw(self, park: threading.Lock) -> None:
        """Take a worker's parking spot back out of ``idle``, where it did not sleep after all."""
        try:
            self.idle.remove(park)
        except ValueError:
            park.acquire()  # someone popped it to wake us, and releases it: take that back

    # -- the worker --------------------------------------------------------------------------

    def _work(self, scheduler: Source, park: threading.Lock, tally: list[int]) -> None:
        try:
            if self._initializer is not None:
                try:
                    self._initializer(*self._initargs)
                except BaseException:
                    _threads.LOGGER.critical("Exception in initializer:", exc_info=True)
                    scheduler.break_pool(
                        BrokenThreadPool(
                            "A thread initializer failed, the thread pool is not usable anymore"
                        )
                    )
                    return
            _threads.serve(self._take_and_run, scheduler, park, tally)
        finally:
            with self._spawning:
                self._alive -= 1
                last = not self._alive
            if last and self.backend is not None:
                # Workers exit once nothing waits to start: no task can reach the backend now.
                self.backend.close()

    def _take_and_run(self, scheduler: Source, park: threading.Lock, tally: list[int]) -> None:
        call = None if self.backend is None else self.backend.call
        effects = Effects()  # reused: a lane's task must not cost one each (see take())
        # Made at the executor's start if shares are charged by busy time.
        fair = scheduler.fair if scheduler.fair is not None and scheduler.fair.by_time else None
        while True:
            task = scheduler.take(park, effects)
            if task is None:
                return
            ext = task.ext
            if task.state != STARTED:  # its deadline passed while it waited
                task.abandon()
            elif ext is None and fair is None:
                run(task, tally, call)
            elif (
                _run_for_share(task, tally, call, scheduler, fair)
                if fair is not None
                else ext.run(task, tally, call, scheduler)  # type: ignore[union-attr]
            ):
                # It overran its time limit, and a replacement took its place: it exits,
                # with no look in take() after its end, which may have been the last
                # thing a shutdown waited for. An idle worker looks in its place.
                self.wake_one()
                return
            # A finished task, and its result, must not live on while this worker sleeps.
            del task, ext


def _run_for_share(
    task: Task, tally: list[int], call: Call | None, core: Source, fair: Fair
) -> bool | None:
    """Run a task, then charge its share for the run's time (``fair_share="time"``): posted,
    so that the worker never waits for the lock to say it. Returns as ``Hooks.run``."""
    share, began = fair.share_of(task), core.now()
    try:
        if task.ext is None:
            run(task, tally, call)
            return None
        return task.ext.run(task, tally, call, core)
    finally:
        core.post(functools.partial(fair.charge, share, core.now() - began))
