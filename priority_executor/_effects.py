"""Effects: what a locked section of the scheduler leaves to do once the lock is released.

Completing a future runs its callbacks; letting go of a user's object may run its
``__del__``; starting a thread waits for it. None of these may happen under the scheduler's
lock, where user code could call back into the executor or wait for a thread that needs
the lock. So a locked section only changes state and records these steps; ``apply()`` then
does them, in order, with no lock held.
"""

from __future__ import annotations

from typing import Callable


class Effects:
    __slots__ = ("drop", "finally_", "later")

    def __init__(self) -> None:
        self.later: list[Callable[[], object]] = []  # complete futures, wake or start threads
        self.finally_: list[Callable[[], object]] = []  # after those: let finished threads go
        self.drop: list[object] = []  # user objects let go of: their __del__ runs in apply()


def apply(effects: Effects) -> None:
    """Do what locked sections left to do, with no lock held.

    A callback that raises a ``BaseException`` (``Future`` lets only ``Exception`` pass)
    stops none of the rest: the first one is raised once everything is done, for the
    thread's supervisor to log, or to the caller.
    """
    error = None
    steps = (*effects.later, *effects.finally_)
    # Emptied first, even if a step raises: a worker uses its own effects again (see take()).
    effects.later.clear()
    effects.finally_.clear()
    for step in steps:
        try:
            step()
        except BaseException as exc:
            if error is None:
                error = exc
    effects.drop.clear()
    if error is not None:
        raise error
