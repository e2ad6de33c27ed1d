"""``max_waiting``: the gate where a submit waits while that many tasks wait to start.

A submit takes room without the scheduler's lock: on a path that is otherwise lock-free, a
locked section per submit convoys the submitters with the workers (see ``_scheduler``). The
gate keeps two counts that it can read without a lock, as lists whose ``append`` and
``pop`` are atomic (on free-threaded builds too: see docs/design.md): ``waiting``, one
entry per task in a waiting state, which the scheduler appends as it queues a task and pops
as it claims one; and ``entering``, one entry per submit let through whose task may not be
queued yet. A submitter that finds no room parks on a
condition of its own until room may have come (``wake()``, applied after the scheduler's lock
is released, as every effect is): so the gate's lock is never taken with the scheduler's
held, and a parked submit costs no CPU.
"""

from __future__ import annotations

import threading
from typing import Callable


class Gate:
    __slots__ = ("_blocked", "_parked", "_wakeups", "entering", "limit", "waiting")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.waiting: list[None] = []
        self.entering: list[None] = []
        # Reentrant: a garbage-collected object's __del__ that cancels a future may run
        # wake() in a thread that holds this lock in enter().
        self._parked = threading.Condition(threading.RLock())
        self._blocked = 0  # submitters that found no room and look again when woken
        self._wakeups = 0  # under _parked: how many wake() calls there were

    def take_room(self) -> bool:
        """Hold room for one more waiting task, if there is any (then ``entered()`` gives
        it back, once the task is queued or refused)."""
        entering, waiting, limit = self.entering, self.waiting, self.limit
        while True:
            # Counted first, then looked: of two submits that race for the last room, the
            # later to count sees the other's count. Entering is read before waiting: a
            # task that moves from one to the other in between is counted twice, never not
            # at all (the scheduler queues it before its submit calls entered()).
            entering.append(None)
            if len(entering) + len(waiting) <= limit:
                return True
            entering.pop()
            # Full, or it only looked so while other submits counted themselves: the last
            # of them to take its count back sees the room left, and tries again.
            if len(entering) + len(waiting) >= limit:
                return False

    def enter(self, check_open: Callable[[], object]) -> None:
        """Return once ``take_room()`` has taken room, parked until then; raise what
        ``check_open`` raises (``RuntimeError`` once the executor or the lane is shut
        down: ``wake_all()`` makes every parked submit look)."""
        parked = self._parked
        with parked:
            # Counted before the next look: a wake() that comes after it sees us blocked.
            self._blocked += 1
            seen = self._wakeups
        try:
            while True:
                check_open()
                if self.take_room():
                    break
                with parked:
                    # A wake-up since the last look is not lost: look again at once.
                    if self._wakeups == seen:
                        parked.wait(threading.TIMEOUT_MAX)
                    seen = self._wakeups
        except BaseException:
            self.wake()  # the wake-up this one took may have been for room it leaves
            raise
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
        """Room for one more may have come (a task started, or a submit let through gave
        back its count): one parked submitter looks again. Cheap with none blocked: this is
        applied after every start."""
        if self._blocked:
            with self._parked:
                self._wakeups += 1
                self._parked.notify()

    def wake_all(self) -> None:
        """Room for many may have come, or shutdown began: every blocked submitter looks
        again (one that finds no room parks again)."""
        if self._blocked:
            with self._parked:
                self._wakeups += 1
                self._parked.notify_all()
