"""``max_waiting``: admission, and the gate where a submit waits while that many tasks wait
to start.

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

An executor has a gate if it has ``max_waiting``, and so has a lane: a lane's task needs room
in both, its lane's first (see ``admit()``, the scheduler's one call into this module).
"""

from __future__ import annotations

import functools
import queue
import sys
import threading
import time
from datetime import timedelta
from typing import Any, Callable, Protocol

from . import _threads
from ._arguments import check_int, seconds


class QueueFull(queue.Full):
    """A submit found no room under ``max_waiting`` (the executor's, or its lane's) and did
    not wait for it: ``waiting_timeout=0``, or none came within ``waiting_timeout``, or the
    submit came from a thread that runs an asyncio event loop, which it must not stall.
    Nothing was queued, and the executor goes on.

    A ``queue.Full``: what code that feeds a bounded ``queue.Queue`` with ``put(timeout=)``
    catches already; "try again later, or shed the load". Not a ``RuntimeError``, which a
    submit raises after shutdown: that means "never again", and an ``except RuntimeError``
    written for it must not swallow this.
    """


def make_gate(max_waiting: int | None, waiting_timeout: float | timedelta | None) -> Gate | None:
    """The gate of ``max_waiting`` and ``waiting_timeout``, checked; None without a bound."""
    if max_waiting is not None and check_int("max_waiting", max_waiting) < 1:
        raise ValueError(f"max_waiting must be at least 1, not {max_waiting}")
    timeout = None if waiting_timeout is None else seconds("waiting_timeout", waiting_timeout)
    if max_waiting is None:
        if waiting_timeout is not None:
            # Alone, it bounds no wait: the caller surely meant a bound too.
            raise ValueError(
                f"waiting_timeout={waiting_timeout!r} is how long a submit waits for room under"
                " max_waiting: give max_waiting too"
            )
        return None
    return Gate(max_waiting, timeout)


class Bounded(Protocol):
    """A task's lane, as admission sees it (see ``_lanes.LaneState``)."""

    @property
    def name(self) -> str | None: ...
    @property
    def gate(self) -> Gate | None:
        """Its own ``max_waiting``'s, if it has one."""


class Admitting(Protocol):
    """The scheduler, as a submit that needs room sees it."""

    @property
    def gate(self) -> Gate | None: ...
    def add(self, task: Any, due_now: bool, admitted: bool = ...) -> None: ...
    def check_accepts(self, task: Any) -> None:
        """Raise if the executor, or the task's lane, takes no more tasks."""


def admit(core: Admitting, task: Any, lane: Bounded | None, due_now: bool) -> None:
    """``core.add(task, due_now)`` once fewer than ``max_waiting`` tasks wait to start, of
    the task's lane if the lane has a bound, then of the executor if it has one. The lane's
    room first, held while the submit waits for the executor's: else a submit to a lane at
    its bound, holding the executor's room, would hold back the submits to other lanes."""
    # in_lane, then gate: the gate whose room the submit holds until its task is queued,
    # or None where it holds none (no bound, or let through without room: see _wait).
    in_lane = None if lane is None else lane.gate
    if in_lane is not None and not (in_lane.take_room() or _wait(core, in_lane, task, lane)):
        in_lane = None
    try:
        gate = core.gate
        if gate is not None and not (gate.take_room() or _wait(core, gate, task, None)):
            gate = None
        try:
            core.add(task, due_now, admitted=True)
        finally:
            # Counted as waiting by now (or refused, or failed, or started): the room it
            # held is its task's, or another submit's.
            if gate is not None:
                gate.entered()
    finally:
        if in_lane is not None:
            in_lane.entered()


def _wait(core: Admitting, gate: Gate, task: Any, lane: Bounded | None) -> bool:
    """A submit found no room in ``gate``, its ``lane``'s (None: the executor's): wait for
    room as the gate's ``timeout`` says, and return True once it has taken some; or raise
    ``QueueFull``. Return False, with no room taken, in one of the executor's own threads:
    a task or a callback that waited there would hold up a worker, the very thing that
    makes room (once every worker waited so, nothing would), so it is let through. Raise
    ``RuntimeError`` if the executor, or the lane, is shut down."""
    if _threads.owned_by(core):
        return False
    # First: a submit that no room would let in says so, not that there is none.
    core.check_accepts(task)
    timeout = gate.timeout
    if timeout == 0:
        why = "waiting_timeout=0 does not wait for room"
    elif _in_event_loop():
        why = (
            "a submit from a thread that runs an asyncio event loop does not wait for"
            " room, as that would stall the loop (wait for it in another thread, or try"
            " again after an await)"
        )
    else:
        until = None if timeout is None else time.monotonic() + timeout
        if gate.enter(functools.partial(core.check_accepts, task), until):
            return True
        why = f"no room came within waiting_timeout={timeout!r} s"
    if lane is None:
        bound = "the executor"
    elif lane.name is None:
        bound = "a lane without a name"
    else:
        bound = f"lane {lane.name!r}"
    raise QueueFull(f"max_waiting={gate.limit} of {bound} is reached: {why}; nothing was queued")


def _in_event_loop() -> bool:
    """Whether the calling thread runs an asyncio event loop (which no submit may stall)."""
    # None runs unless asyncio was imported: a program that does not use it never imports it.
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return False
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class Gate:
    __slots__ = (
        "__weakref__",
        "_blocked",
        "_parked",
        "_wakeups",
        "entering",
        "limit",
        "timeout",
        "waiting",
    )

    def __init__(self, limit: int, timeout: float | None) -> None:
        self.limit = limit
        # How long a submit waits for room, in seconds: None, until there is some; 0, not at all.
        self.timeout = timeout
        self._empty()

    def after_fork_in_child(self) -> None:
        """In a forked child: the tasks it counts and the submits it holds are the parent's,
        and its lock may be held by one of the parent's threads."""
        self._empty()

    def _empty(self) -> None:
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

    def enter(self, check_open: Callable[[], object], until: float | None) -> bool:
        """Return True once ``take_room()`` has taken room, parked until then; or False if
        it has not by ``until`` (on ``time.monotonic()``; None: no limit). Raise what
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
                    return True
                wait = threading.TIMEOUT_MAX
                if until is not None:
                    # Checked after a look: a submit that timed out looked once more.
                    wait = min(until - time.monotonic(), wait)
                    if wait <= 0:
                        return False
                with parked:
                    # A wake-up since the last look is not lost: look again at once.
                    if self._wakeups == seen:
                        parked.wait(wait)
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

    def count(self, waiting: bool) -> None:
        """A task it bounds was queued (``waiting``) or left the waiting states: counted
        under the scheduler's lock, by its one transition (see ``Scheduler.move``)."""
        if waiting:
            self.waiting.append(None)
        else:
            self.waiting.pop()

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
