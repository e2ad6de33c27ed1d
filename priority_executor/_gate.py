"""``max_waiting``: the gate where a submit waits while that many tasks wait to start.

Whether there is room is the scheduler's to say, under its lock, where the waiting tasks
are counted (see ``Scheduler._take_room``). The gate only parks the submitters that found
none, on a condition of its own, and wakes them when room may have come: a task started or
left the waiting states, or shutdown began (``wake()``, applied after the scheduler's lock
is released, as every effect is). So the gate's lock is never taken with the scheduler's
held, and a parked submit costs no CPU.
"""

from __future__ import annotations

import threading
from typing import Callable


class Gate:
    __slots__ = ("_blocked", "_parked", "_wakeups", "entering", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        # One entry per submit let through whose task may not be counted as waiting yet:
        # room it holds. Appended to under the scheduler's lock, popped without it (see
        # entered()), as list.pop is atomic: a submit takes the lock once, as it looks
        # for room; then it queues its task as any submit does, without the lock.
        self.entering: list[None] = []
        # Reentrant: a garbage-collected object's __del__ that cancels a future may run
        # wake() in a thread that holds this lock in enter().
        self._parked = threading.Condition(threading.RLock())
        self._blocked = 0  # submitters that found no room and look again when woken
        self._wakeups = 0  # under _parked: how many wake() calls there were

    def enter(self, take_room: Callable[[], bool]) -> None:
        """Return once ``take_room()`` has taken room for one task; raise what it raises
        (``RuntimeError`` once the executor or the lane is shut down)."""
        if take_room():
            return
        parked = self._parked
        with parked:
            # Counted before the next look: a wake() that comes after it sees us blocked.
            self._blocked += 1
            seen = self._wakeups
        try:
            while not take_room():
                with parked:
                    # A wake-up since the last look is not lost: look again at once.
                    if self._wakeups == seen:
                        parked.wait(threading.TIMEOUT_MAX)
                    seen = self._wakeups
        finally:
            with parked:
                self._blocked -= 1

    def entered(self) -> None:
        """A submit let through has queued its task, or failed to: it holds no room now.
        Until this, its task was counted twice, queued and entering: a submit that found
        no room in between is woken to look again."""
        self.entering.pop()
        self.wake()

    def wake(self) -> None:
        """Room may have come: every blocked submitter looks again (one that finds none
        parks again). Cheap with none blocked: this is applied after every claim."""
        if self._blocked:
            with self._parked:
                self._wakeups += 1
                self._parked.notify_all()
