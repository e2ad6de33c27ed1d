"""The worker threads: who runs a ready task.

Workers start lazily, one per submission that finds no idle worker, up to ``max_workers``,
as in ``ThreadPoolExecutor``. An idle worker parks on a lock of its own that the next
submission releases: a waiting worker costs no CPU, and a submission wakes exactly one
worker that is really asleep. ``idle`` is used without the scheduler's lock by submitters
(``list.pop`` is atomic), under it by workers. With a backend, each worker is an in-flight
slot that hands its task over and waits for it (see ``_backend``).
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures.thread import BrokenThreadPool
from typing import TYPE_CHECKING, Any, Callable

from ._task import STARTED, STATES

if TYPE_CHECKING:
    from ._backend import Backend
    from ._scheduler import Scheduler

_LOGGER = logging.getLogger("concurrent.futures")


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
        self.tallies: list[list[int]] = []  # per worker: how many of its tasks ended in each state
        self.backend = backend
        self._spawning = threading.Lock()
        self._alive = 0  # threads started and not yet exited

    def spawn_if_room(self, scheduler: Scheduler) -> None:
        """Start a worker, unless ``max_workers`` are running already."""
        if len(self.threads) >= self.max_workers:
            return
        with self._spawning:
            if len(self.threads) >= self.max_workers:
                return
            park = threading.Lock()
            park.acquire()
            tally = [0] * STATES
            self.tallies.append(tally)
            thread = threading.Thread(
                name=f"{self.name_prefix}_{len(self.threads)}",
                target=self._work,
                args=(scheduler, park, tally),
            )
            try:
                thread.start()
            except RuntimeError:  # at interpreter exit (3.12+): the workers there are will do
                if not self.threads:
                    raise
                return
            self.threads.append(thread)
            self._alive += 1

    def wake_all(self) -> None:
        idle = self.idle
        while idle:
            idle.pop().release()

    def forget_threads(self) -> None:
        self.threads = []
        self.idle = []

    def _work(self, scheduler: Scheduler, park: threading.Lock, tally: list[int]) -> None:
        try:
            if self._initializer is not None:
                try:
                    self._initializer(*self._initargs)
                except BaseException:
                    _LOGGER.critical("Exception in initializer:", exc_info=True)
                    scheduler.break_pool(
                        BrokenThreadPool(
                            "A thread initializer failed, the thread pool is not usable anymore"
                        )
                    )
                    return
            self._take_and_run(scheduler, park, tally)
        finally:
            with self._spawning:
                self._alive -= 1
                last = not self._alive
            if last and self.backend is not None:
                # Workers exit once nothing waits to start: no task can reach the backend now.
                self.backend.close()

    def _take_and_run(self, scheduler: Scheduler, park: threading.Lock, tally: list[int]) -> None:
        backend = self.backend
        while True:
            task = scheduler.take(park)
            if task is None:
                return
            if task.state != STARTED:  # its deadline passed while it waited
                task.abandon()
            elif backend is None:
                task.run(tally)
            else:
                backend.run(task, tally)
            del task  # a finished task, and its result, must not live on while this worker sleeps
