"""Steps done under the scheduler's lock by whoever holds it next.

Some callers cannot know who holds the lock: a future telling its task of a cancel() (a signal
handler or a ``__del__`` as well), a worker counting its lane's run end, the executor's GC
finalizer. They never block on it: they ``post()`` a step, which whoever holds the lock next
does before it releases it (``_release()``); the finalizer only raises a flag and wakes a
thread.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING, Callable, TypeVar

from . import _effects, _threads
from ._effects import Effects

R = TypeVar("R")


class Posting:
    """The scheduler's locked sections and posted steps (see the module docstring)."""

    if TYPE_CHECKING:  # the scheduler's, which this is mixed into
        lock: threading.Lock
        _posted: deque[Callable[[Effects], object]]
        later: deque[Callable[[Effects], object]]

        def discarded(self, effects: Effects) -> None: ...

    def locked(self, step: Callable[[Effects], R]) -> R:
        """Do ``step(effects)`` under the lock, then what it left to do."""
        effects = Effects()
        self.lock.acquire()
        try:
            result = step(effects)
        finally:
            self._release()
        self._apply(effects)
        return result

    def post(self, step: Callable[[Effects], object], flush: bool = True) -> None:
        """Have ``step(effects)`` done under the lock, without waiting for it: at once if
        the lock is free, else by its holder before it lets go (see ``_release``). Not
        ``flush``: a step that may wait for the next thread that takes the lock, a worker
        in ``take()`` or a reader of the counts (a lane's run end, which most often finds
        a worker on its way). Never blocks: for callers that cannot know who holds the
        lock."""
        if flush:
            self._posted.append(step)
            self._flush_posted()
        else:
            self.later.append(step)

    def count_posted(self, effects: Effects) -> None:
        """Do the posted steps, under the lock: whatever reads counts does this first."""
        for posted in (self.later, self._posted):
            while posted:
                posted.popleft()(effects)

    def _flush_posted(self) -> None:
        while self._posted and self.lock.acquire(False):
            effects = Effects()
            try:
                self.count_posted(effects)
                self.discarded(effects)
            finally:
                self.lock.release()
            self._apply(effects)

    def _release(self) -> None:
        """Release the lock, then do what was posted while it was held."""
        self.lock.release()
        if self._posted:
            self._flush_posted()

    def _apply(self, effects: Effects) -> None:
        if effects.later or effects.finally_ or effects.drop:  # most locked sections leave none
            # Callbacks of this executor's futures run here: they must not wait for it.
            with _threads.acting_for(self):
                _effects.apply(effects)
