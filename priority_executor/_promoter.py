"""The promoter: the thread that sleeps until the next due time or deadline, then promotes.

It sleeps on a lock of its own, held while no wake-up is pending, as an idle worker parks on
one, rather than on a condition of the scheduler's lock: releasing it is a wake-up that
anyone may send without that lock, from anywhere (``release()`` never blocks, so it is safe
in a ``__del__`` or a finalizer), and one sent before the promoter blocks is not lost.
A ``ManualClock`` promotes in ``advance()`` instead, and no promoter thread starts.

Not on a ``queue.SimpleQueue``: before Python 3.13, its ``get(timeout=t)`` can block for
ever. Once a put's item has been taken while no one waited, its inner lock stays free; the
next ``get()`` on the empty queue takes that lock, then recomputes the time left, and if the
thread lost the CPU for more than ``t`` in between, waits with a negative time, which means
no limit. The promoter's timeouts are often microseconds: under load, it slept through every
due time from then on. ``Lock.acquire(timeout=t)`` takes a time left below zero as timed out.
"""

from __future__ import annotations

import contextlib
import math
import threading
import weakref
from typing import Protocol

from . import _threads


class Scheduler(Protocol):
    """A scheduler, as its promoter reaches it."""

    def now(self) -> float: ...
    def promote_and_plan(self) -> float | None: ...


class Promoter:
    def __init__(self, scheduler: Scheduler, name: str) -> None:
        # Weak: the scheduler holds its promoter. The thread holds the scheduler while it
        # runs, as every thread of the executor does.
        self._scheduler = weakref.ref(scheduler)
        self.name = name
        # Released: a wake-up is pending (one stands for any number: a promotion sees all).
        self._bell = threading.Lock()
        self._bell.acquire()
        self._starting = threading.Lock()
        self._thread: threading.Thread | None = None
        self._retired = False
        # When it will wake by itself; read and written under the scheduler's lock, so
        # that a new timer earlier than that wakes it (-inf: never started, or awake).
        self.sleeps_until = -math.inf

    def start(self) -> None:
        """Start the thread, unless it runs. Called before a timer is queued, so that a
        thread that cannot start leaves nothing behind: this raises, and no timer waits."""
        if self._thread is not None:
            return
        with self._starting:
            if self._thread is None and not self._retired:
                scheduler = self._scheduler()  # alive: it is the caller
                self._thread = _threads.start(self.name, scheduler, self._run, scheduler)

    def wake(self) -> None:
        with contextlib.suppress(RuntimeError):  # released already: a wake-up is pending
            self._bell.release()

    def retire(self) -> None:
        """Nothing is left to promote: the thread exits, and none starts any more."""
        with self._starting:
            self._retired = True
        self.wake()

    def join(self) -> None:
        with self._starting:  # retired: a thread that started is listed by now
            thread = self._thread
        if thread is not None:
            thread.join()

    def _run(self, scheduler: Scheduler) -> None:
        _threads.serve(self._loop, scheduler)

    def _loop(self, scheduler: Scheduler) -> None:
        bell = self._bell
        while True:
            wake_at = scheduler.promote_and_plan()
            if wake_at is None:
                return
            # Read after promoting: a large batch must not make the next timer late.
            timeout = wake_at - scheduler.now()
            if timeout > 0:
                if timeout == math.inf:
                    bell.acquire()
                else:
                    # A far-future due time waits in steps the platform accepts.
                    bell.acquire(timeout=min(timeout, threading.TIMEOUT_MAX))
            bell.acquire(False)  # the next promotion sees whatever a wake-up since was for
