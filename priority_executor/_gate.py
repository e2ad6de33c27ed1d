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
held, and a parked submit costs no CPU. A submit from an event loop's thread cannot park
(the loop would stop): an awaitable one (see ``_asyncio``) leaves its admission undone
(``deferring()``) and waits in its coroutine, as a listener that ``wake()`` calls back.

An executor has a gate if it has ``max_waiting``, and so has a lane: a lane's task needs room
in both, its lane's first (see ``admit()``, the scheduler's one call into this module).
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections import deque
from datetime import timedelta
from typing import Any, Callable, Protocol, TypeVar

from . import _threads
from ._arguments import check_int, seconds

T = TypeVar("T")


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
    its bound, holding the executor's room, would hold back the submits to other lanes.

    Inside ``deferring()`` (an awaitable submit), a submit that must wait for room does not:
    it leaves its ``Admission`` there, for the coroutine to wait and go on with."""
    # Taken at once: a submit that core.add() makes (a policy's, say) is not this one.
    deferred = _deferred.__dict__.pop("deferring", False)
    in_lane = None if lane is None else lane.gate
    gate = core.gate
    # The gates it has yet to pass, last first, and those it holds room in.
    if in_lane is not None and not in_lane.take_room():
        left, held = [gate, in_lane] if gate is not None else [in_lane], []
    elif gate is not None and not gate.take_room():
        left, held = [gate], [] if in_lane is None else [in_lane]
    else:
        # Room in each, the common case: nothing more to make or to look up.
        try:
            core.add(task, due_now, admitted=True)
        finally:
            # Counted as waiting by now (or refused, or failed, or started): the room it
            # held is its task's, or another submit's.
            if gate is not None:
                gate.entered()
            if in_lane is not None:
                in_lane.entered()
        return
    admission = Admission(core, task, lane, due_now, deferred, left, held)
    gate = admission.advance(None)
    while gate is not None:
        if admission.deferred:
            _deferred.admission = admission
            return
        try:
            if not gate.enter(admission.check_accepts, admission.until(gate)):
                why = f"no room came within waiting_timeout={gate.timeout!r} s"
                raise admission.full(gate, why)
        except BaseException:
            admission.release()
            raise
        gate = admission.advance(gate)


_deferred = threading.local()


def deferring(schedule: Callable[[], T]) -> tuple[T, Admission | None]:
    """``schedule()``, a submit whose admission, if it must wait for room, is left undone
    and returned with its result (its task is not queued until ``Admission.advance()``
    has passed every gate)."""
    local = _deferred.__dict__
    local["deferring"] = True
    try:
        return schedule(), local.pop("admission", None)
    finally:
        # Taken back, whether admit() ran or not (no bound, or bad input before it).
        local.pop("deferring", None)


class Admission:
    """One submit's way through the gates it needs room in, its lane's then the
    executor's: the room it holds, and what is left."""

    __slots__ = ("_gates", "_held", "core", "deferred", "due_now", "lane", "task")

    def __init__(
        self,
        core: Admitting,
        task: Any,
        lane: Bounded | None,
        due_now: bool,
        deferred: bool,
        gates: list[Gate],
        held: list[Gate],
    ) -> None:
        self.core = core
        self.task = task
        self.lane = lane
        self.due_now = due_now
        # Whether it is an awaitable submit's, which waits for room in its coroutine.
        self.deferred = deferred
        self._gates = gates  # those it has yet to pass, the next last (pop() gives it)
        self._held = held  # those whose room it holds until its task is queued

    def advance(self, took: Gate | None) -> Gate | None:
        """Take room in each gate left, and queue the task once through all of them; or
        return the gate in which it must wait for room (then call this again with
        ``took=`` that gate once it has taken room there). Raise ``QueueFull`` where it
        may not wait, ``RuntimeError`` if the executor, or the lane, is shut down; the
        room it held is given back then, and once its task is queued (or refused)."""
        gates = self._gates
        try:
            if took is not None:
                self._held.append(gates.pop())
            while gates:
                gate = gates[-1]
                if gate.take_room():
                    self._held.append(gate)
                elif self._must_wait(gate):
                    return gate
                gates.pop()
            self.core.add(self.task, self.due_now, admitted=True)
        except BaseException:
            self.release()  # never to be queued: its room is another submit's
            raise
        # Counted as waiting by now (or refused, or failed, or started): the room it held
        # is its task's, or another submit's.
        self.release()
        return None

    def blocked_at(self) -> Gate | None:
        """The gate in which it waits for room (see ``advance()``), if any."""
        return self._gates[-1] if self._gates else None

    def _must_wait(self, gate: Gate) -> bool:
        """No room in ``gate``: whether the submit waits for some; or False, let through
        without room, in one of the executor's own threads: a task or a callback that
        waited there would hold up a worker, the very thing that makes room (once every
        worker waited so, nothing would). Raise ``QueueFull`` if it may not wait, and
        ``RuntimeError`` if the executor, or the lane, is shut down."""
        if _threads.owned_by(self.core):
            return False
        # First: a submit that no room would let in says so, not that there is none.
        self.check_accepts()
        if gate.timeout == 0:
            raise self.full(gate, "waiting_timeout=0 does not wait for room")
        if not self.deferred and _in_event_loop():
            raise self.full(
                gate,
                "a submit from a thread that runs an asyncio event loop does not wait for"
                " room, as that would stall the loop (await asubmit() instead)",
            )
        return True

    def check_accepts(self) -> None:
        """Raise if the executor, or the task's lane, takes no more tasks."""
        self.core.check_accepts(self.task)

    def until(self, gate: Gate) -> float | None:
        """Until when, on ``time.monotonic()``, a wait for room in ``gate`` begun now lasts."""
        return None if gate.timeout is None else time.monotonic() + gate.timeout

    def full(self, gate: Gate, why: str) -> QueueFull:
        if gate is self.core.gate:
            bound = "the executor"
        elif self.lane is None or self.lane.name is None:
            bound = "a lane without a name"
        else:
            bound = f"lane {self.lane.name!r}"
        return QueueFull(
            f"max_waiting={gate.limit} of {bound} is reached: {why}; nothing was queued"
        )

    def release(self) -> None:
        """Give back the room it holds (the executor's first, then its lane's)."""
        held = self._held
        while held:
            held.pop().entered()


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
        "_listeners",
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
        # Under _parked: the listening submitters that wait in coroutines, woken in order
        # (see listen(); some may have stopped listening, and are skipped).
        self._listeners: deque[Listener] = deque()
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

    def listen(self, listener: Listener) -> None:
        """Have ``wake()`` or ``wake_all()`` call ``listener.woken()`` once, in the thread
        that applies it: how a submit that waits in a coroutine, which cannot park here,
        waits for room. Its submit then looks for room (``take_room()``), and waits for the
        call only if it found none; then it calls ``unlisten()``.

        Registered before the look, under the gate's lock, which wake() takes to find a
        listener: so room freed before the registration is seen by the look, and room
        freed after it (after the look, too) wakes a listener. That one step closes the
        race of room that frees between a look that found none and the registration."""
        with self._parked:
            listener.listening = True
            self._listeners.append(listener)
            self._blocked += 1

    def unlisten(self, listener: Listener) -> bool:
        """Stop ``listener`` listening; return False if it was woken already (a submit that
        leaves without the room its wake-up may have been for passes it on: ``wake()``)."""
        with self._parked:
            if not listener.listening:
                return False
            listener.listening = False
            self._blocked -= 1
            if self._blocked == 0:
                self._listeners.clear()  # of the listeners that stopped: none is woken
            return True

    def _next_listener(self) -> Listener | None:
        """Under ``_parked``: the first listener still listening, no longer so."""
        listeners = self._listeners
        while listeners:
            listener = listeners.popleft()
            if listener.listening:
                listener.listening = False
                self._blocked -= 1
                return listener
        return None

    def wake(self) -> None:
        """Room for one more may have come (a task started, or a submit let through gave
        back its count): one parked submitter looks again, and one listener. Cheap with
        none blocked: this is applied after every start."""
        if self._blocked:
            with self._parked:
                self._wakeups += 1
                self._parked.notify()
                listener = self._next_listener()
            # Outside the gate's lock, and on to the next if its loop is closed.
            while listener is not None and not listener.woken():
                with self._parked:
                    listener = self._next_listener()

    def wake_all(self) -> None:
        """Room for many may have come, or shutdown began: every blocked submitter looks
        again (one that finds no room parks again, or listens again)."""
        if self._blocked:
            with self._parked:
                self._wakeups += 1
                self._parked.notify_all()
                listeners = []
                while (listener := self._next_listener()) is not None:
                    listeners.append(listener)
            for listener in listeners:
                listener.woken()


class Listener:
    """A submit that waits for room in a coroutine, as a gate sees it (see ``listen()``)."""

    __slots__ = ("listening",)

    def __init__(self) -> None:
        self.listening = False  # under its gate's lock

    def woken(self) -> bool:
        """Room may have come: hand that to the waiting submit, in any thread, without
        blocking or raising; return False if the submit can no longer be told."""
        raise NotImplementedError
