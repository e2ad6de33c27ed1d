"""The contenders for delayed work: PriorityExecutor, sched + pool, a Timer per task, APScheduler.

Each one is wrapped as a ``DelayedRunner`` so that one function measures lateness (or idle
CPU) for any of them. ``schedule`` returns the due time on the runner's own clock, read just
before handing the task over: lateness is the task's first clock reading minus that.
"""

from __future__ import annotations

import math
import sched
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Protocol

from benchmarks.pools import priority_executor
from benchmarks.results import PE


class DelayedRunner(Protocol):
    """Runs a callable about ``delay`` seconds from now on one of its worker threads."""

    clock: Callable[[], float]

    def schedule(self, delay: float, fn: Callable[..., object], *args: Any) -> float:
        """Arrange ``fn(*args)`` to run ``delay`` seconds from now; return its due time."""
        ...

    def close(self) -> None:
        """Drop whatever is still pending and stop the threads."""
        ...


class PriorityExecutorRunner:
    """PriorityExecutor's own ``delay=`` keyword."""

    clock = staticmethod(time.monotonic)

    def __init__(self, workers: int) -> None:
        self._executor = priority_executor(workers)

    def schedule(self, delay: float, fn: Callable[..., object], *args: Any) -> float:
        due = time.monotonic() + delay
        self._executor.submit(fn, *args, delay=delay)
        return due

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


class SchedThenPool:
    """The stdlib way: a ``sched.scheduler`` run by one thread that feeds a ThreadPoolExecutor.

    The feeder sleeps on an Event until the earliest event is due; ``schedule`` wakes it only
    when the new event is due before the time it sleeps until (``sched.scheduler.run`` alone
    would sleep through an earlier event entered meanwhile).
    """

    clock = staticmethod(time.monotonic)

    def __init__(self, workers: int) -> None:
        self._pool = ThreadPoolExecutor(workers)
        self._scheduler = sched.scheduler(time.monotonic)
        self._wakeup = threading.Event()
        self._wake_if_due_before = math.inf
        self._stopping = False
        self._feeder = threading.Thread(target=self._feed, name="sched-feeder", daemon=True)
        self._feeder.start()

    def schedule(self, delay: float, fn: Callable[..., object], *args: Any) -> float:
        due = time.monotonic() + delay
        self._scheduler.enterabs(due, 0, self._pool.submit, (fn, *args))
        if due < self._wake_if_due_before:
            self._wakeup.set()
        return due

    def close(self) -> None:
        self._stopping = True
        self._wakeup.set()
        self._feeder.join()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _feed(self) -> None:
        while not self._stopping:
            self._wake_if_due_before = math.inf  # awake: any new event must make us look again
            delay = self._scheduler.run(blocking=False)
            if delay is not None:
                self._wake_if_due_before = time.monotonic() + delay
            self._wakeup.wait(delay)
            self._wakeup.clear()


class TimerPerTask:
    """A ``threading.Timer`` (one thread) per task; the task runs on the timer's thread."""

    clock = staticmethod(time.monotonic)

    def __init__(self, workers: int) -> None:  # every task brings its own thread
        self._timers: list[threading.Timer] = []

    def schedule(self, delay: float, fn: Callable[..., object], *args: Any) -> float:
        due = time.monotonic() + delay
        timer = threading.Timer(delay, fn, args)
        timer.daemon = True
        timer.start()
        self._timers.append(timer)
        return due

    def close(self) -> None:
        for timer in self._timers:
            timer.cancel()
        for timer in self._timers:
            timer.join()


class APSchedulerRunner:
    """APScheduler 3.x ``BackgroundScheduler`` with one date-triggered job per task.

    Its jobs are due at wall-clock datetimes, so its clock is ``time.time``. Late jobs are run
    however late (no misfire grace time), so that lateness is measured, not dropped.
    """

    clock = staticmethod(time.time)

    def __init__(self, workers: int) -> None:
        from apscheduler.executors.pool import ThreadPoolExecutor as APSchedulerPool
        from apscheduler.schedulers.background import BackgroundScheduler

        self._scheduler = BackgroundScheduler(
            timezone=timezone.utc,
            executors={"default": APSchedulerPool(workers)},
            job_defaults={"misfire_grace_time": None, "coalesce": False},
        )
        self._scheduler.start()

    def schedule(self, delay: float, fn: Callable[..., object], *args: Any) -> float:
        due = time.time() + delay
        run_date = datetime.fromtimestamp(due, timezone.utc)
        self._scheduler.add_job(fn, "date", run_date=run_date, args=args)
        return due

    def close(self) -> None:
        self._scheduler.shutdown(wait=True)


@dataclass(frozen=True)
class Scheduler:
    """A contender for delayed work: a name, a factory taking the worker count, and a limit.

    ``max_pending`` is how many tasks the contender can sanely hold at once (None: no limit).
    """

    name: str
    make: Callable[[int], DelayedRunner]
    max_pending: int | None = None


PRIORITY_EXECUTOR = Scheduler(PE, PriorityExecutorRunner)
SCHED_POOL = Scheduler("sched+pool", SchedThenPool)
APSCHEDULER = Scheduler("APScheduler", APSchedulerRunner)
TIMER = Scheduler("Timer", TimerPerTask, max_pending=2_000)
