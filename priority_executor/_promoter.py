"""The promoter: the thread that sleeps until the next due time or deadline, then promotes.

It sleeps on a ``SimpleQueue`` rather than on a condition of the scheduler's lock: a put is
a wake-up that anyone may send without that lock, from anywhere (``SimpleQueue.put`` is
safe in a ``__del__`` or a finalizer), and one sent before the promoter blocks is not lost.
A ``ManualClock`` promotes in ``advance()`` instead, and no promoter thread starts.
"""

from __future__ import annotations

import math
import queue
import threading
from typing import TYPE_CHECKING

from . import _threads

if TYPE_CHECKING:
    from ._scheduler import Scheduler


class Promoter:
    def __init__(self, scheduler: Scheduler, name: str) -> None:
        self._scheduler = scheduler
        self.name = name
        self._wakeups: queue.SimpleQueue[None] = queue.SimpleQueue()
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
                self._thread = _threads.start(self.name, self._scheduler, self._run)

    def wake(self) -> None:
        self._wakeups.put(None)

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

    def _run(self) -> None:
        _threads.serve(self._loop)

    def _loop(self) -> None:
        scheduler, wakeups, clock = self._scheduler, self._wakeups, self._scheduler.clock
        while True:
            wake_at = scheduler.promote_and_plan()
            if wake_at is None:
                return
            # Read after promoting: a large batch must not make the next timer late.
            timeout = wake_at - clock.now()
            if timeout > 0:
                try:
                    if timeout == math.inf:
                        wakeups.get()
                    else:
                        # A far-future due time waits in steps the platform accepts.
                        wakeups.get(timeout=min(timeout, threading.TIMEOUT_MAX))
                except queue.Empty:
                    pass
            while not wakeups.empty():  # the next promotion sees whatever these were for
                wakeups.get_nowait()
