"""Events and timings: what happens to each task, told to subscribers, and how long it
waited, by cause.

A task submitted while the executor has a subscriber (or through ``options(timings=True)``)
is *observed*: its extension carries an ``Observer``, which the one transition tells of
each move (``Extension.moved``, under the scheduler's lock) and the worker's tally of each
run's end (outside it, before the future completes). A task submitted with no subscriber
has no observer and pays nothing: the executor tests one field at submit.

An observer only appends a tuple to its executor's ``Channel``, a bounded deque; one
dispatcher thread per executor (supervised as its other threads are: see ``_threads``)
makes the events and calls the subscribers, in the order the moves were made. So a callback
runs outside the lock, in no submitter's or worker's thread, and a raising one is logged
and skipped; a slow one delays only the next callbacks: once ``BUFFER`` events wait, new
ones are dropped and counted, and the subscribers get a ``Dropped`` event with the count.

A feature that has an event to tell (a run-time limit, a dependency) adds its class here
and emits it from its own hook through ``Observer.emit``.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import deque
from collections.abc import Mapping
from concurrent.futures import Future
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Literal, Optional, cast

from . import _threads
from ._arguments import callable_name
from ._logs import LOGGER, error_name
from ._task import (
    BLOCKED,
    CANCELLED,
    COMPLETED,
    EXPIRED,
    FAILED,
    INTAKE,
    PENDING,
    READY,
    SKIPPED,
    STARTED,
    THROTTLED,
    VOID,
)
from ._waiting import HeldBy

if TYPE_CHECKING:
    from contextvars import Context

    from ._clock import Clock
    from ._task import Tally, Task

# How many events may wait for the subscribers; past it, new ones are dropped and counted.
BUFFER = 65536
# How long the dispatcher, woken by an event, waits for more before it delivers them.
GATHER = 0.001

Outcome = Literal["completed", "failed", "cancelled"]


@dataclass
class Event:
    """Something that happened in an executor. ``at``: when, on the executor's clock
    (monotonic seconds, as ``delay`` counts them; a ``ManualClock``'s time); ``wall``:
    ``at`` on the wall clock (seconds since the epoch, as ``time.time()``), as the wall
    clock stood when the event was delivered; ``lane``: the name of the lane it happened
    in (None for no lane, or one without a name).

    Every subscriber gets the same object: none may change it."""

    __slots__ = ("at", "lane", "wall")

    at: float
    wall: float
    lane: str | None


@dataclass
class TaskEvent(Event):
    """A step of one task's life. ``task``: its id, the same in every event of the task
    (and in its ``Timings``); ``priority``: its priority then."""

    __slots__ = ("priority", "task")

    task: int
    priority: int


@dataclass
class Submitted(TaskEvent):
    """Queued by ``submit()`` (or ``submit_recurring()``, once for the whole series):
    ``name`` is its callable's, ``due`` when it is due, on the executor's clock;
    ``context``: the ``contextvars`` context it runs in (a copy of its submitter's, so
    its OpenTelemetry span, see ``record_spans()``), None with ``inherit_context=False``;
    ``recurring``: whether it is a series (whose runs are each started and finished)."""

    __slots__ = ("context", "due", "name", "recurring")

    name: str
    due: float
    context: Context | None
    recurring: bool


@dataclass
class Blocked(TaskEvent):
    """Queued with upstreams not done yet (``options(after=, after_any=)``): it waits for
    them, in no queue, from now on (see ``Released``)."""

    __slots__ = ()


@dataclass
class Released(TaskEvent):
    """Its last upstream is done: it is queued as a new task would be, pending until its
    due time (then ``Due``), or due now. A dependent whose upstream failed is not
    released: it ends with ``Finished`` ``"cancelled"`` (its ``DependencyFailed``)."""

    __slots__ = ()


@dataclass
class Due(TaskEvent):
    """Due: it waits for a worker (and its lane's room) from now on."""

    __slots__ = ()


@dataclass
class Throttled(TaskEvent):
    """A worker found its lane at a limit: it waits in its lane. ``limit``: which one
    (``"max_running"``, ``"max_starts"`` or ``"cooldown"``), ``held_in``: the name of the
    lane whose limit it is (its own, or one it sits in); both None if the lane had room
    again by then, to give it at once."""

    __slots__ = ("held_in", "limit")

    limit: HeldBy | None
    held_in: str | None


@dataclass
class Started(TaskEvent):
    """A worker runs it (``attempt``: 1, or which retry)."""

    __slots__ = ("attempt",)

    attempt: int


@dataclass
class TimedOut(TaskEvent):
    """A run (``attempt``) reached its time limit of ``limit`` seconds: its call is asked
    to stop (see ``TaskTimeoutError``). Its ``Finished`` (or ``RetryScheduled``) follows
    once the call returns: a thread cannot be stopped, and what follows depends on it."""

    __slots__ = ("attempt", "limit")

    attempt: int
    limit: float


@dataclass
class Finished(TaskEvent):
    """Its future's outcome (a series': one run's): ``"completed"``, ``"failed"`` (it
    raised; or it could not be queued, its policy's key failing), or ``"cancelled"``."""

    __slots__ = ("outcome",)

    outcome: Outcome


@dataclass
class Expired(TaskEvent):
    """Not started by its deadline: its future is cancelled (see ``Expired``, the error)."""

    __slots__ = ()


@dataclass
class Skipped(TaskEvent):
    """A run of a calendar series later than its misfire grace: not made, and logged."""

    __slots__ = ()


@dataclass
class RetryScheduled(TaskEvent):
    """An attempt failed with ``error`` (its class's name): ``attempt`` is due in ``wait``
    seconds."""

    __slots__ = ("attempt", "error", "wait")

    attempt: int
    wait: float
    error: str | None


@dataclass
class Rejected(TaskEvent):
    """``max_waiting`` left no room: its submit raised ``QueueFull``, queuing nothing."""

    __slots__ = ()


@dataclass
class Rescheduled(TaskEvent):
    """``reschedule()`` changed it: ``due`` is its due time now."""

    __slots__ = ("due",)

    due: float


@dataclass
class LaneConfigured(Event):
    """A lane was made with options, or ``configure()`` changed them: its options now."""

    __slots__ = ("options",)

    options: Mapping[str, object]


@dataclass
class Dropped(Event):
    """``count`` events were dropped since the last one delivered: the subscribers were
    too slow, and ``BUFFER`` events waited for them."""

    __slots__ = ("count",)

    count: int


class Timings:
    """When a task was submitted, first due, last started and finished (on the executor's
    clock), and how long it waited, in seconds, by cause: for its upstreams (``blocked``:
    ``options(after=)``), for its due time (``delay``: a ``delay``, a ``run_at``, a
    series' interval), for a worker (``queue``), for its lane's limits (``throttled``),
    for a retry's backoff (``backoff``). Read-only; see ``timings()``."""

    __slots__ = (
        "_state",
        "backoff",
        "blocked",
        "delay",
        "due",
        "finished",
        "queue",
        "started",
        "submitted",
        "task",
        "throttled",
    )

    def __init__(self, task: int, submitted: float) -> None:
        self.task = task
        self.submitted = submitted
        self.due: float | None = None
        self.started: float | None = None
        self.finished: float | None = None
        self.blocked = 0.0
        self.delay = 0.0
        self.queue = 0.0
        self.throttled = 0.0
        self.backoff = 0.0

    def __repr__(self) -> str:
        return (
            f"<Timings task={self.task} submitted={self.submitted} due={self.due}"
            f" started={self.started} finished={self.finished} blocked={self.blocked}"
            f" delay={self.delay}"
            f" queue={self.queue} throttled={self.throttled} backoff={self.backoff}>"
        )


def timings(future: Future[Any]) -> Timings | None:
    """The timings of the task of ``future`` once it is done; None before, and for a
    task that was not timed (submitted with no subscriber, without
    ``options(timings=True)``)."""
    found: Timings | None = getattr(future, "_timings", None)
    return found if found is not None and future.done() else None


# (event class, lane state, at, its fields after at, wall and lane, then): a Submitted's fn
# in place of its name; then: the time of the Due told with a Submitted (a task due at its
# submit, queued through the intake), else None. One tuple for the two steps of that move.
Entry = tuple[type[Event], Any, float, tuple[Any, ...], Optional[float]]
Subscriber = Callable[[Event], object]


class Channel:
    """Where observers leave events for the dispatcher: appended under the scheduler's
    lock (a run's end, in its worker), taken by the dispatcher alone. Deque appends and
    pops are atomic, on free-threaded builds too (see docs/design.md)."""

    __slots__ = ("clock", "drops", "entries", "idle")

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.entries: deque[Entry | None] = deque()
        self.drops: deque[None] = deque()  # one per entry dropped, for the next Dropped
        self.idle: list[threading.Lock] = []  # the dispatcher's, while it sleeps

    def put(self, entry: Entry) -> None:
        entries = self.entries
        if len(entries) < BUFFER:
            entries.append(entry)
        else:
            self.drops.append(None)
        if self.idle:  # the dispatcher sleeps: most puts find it busy, or gathering
            self.wake()

    def put_pair(self, entry: Entry) -> None:
        """Put an entry that tells two events (its ``then``): it takes two places, itself and
        a None that the dispatcher skips, so that ``BUFFER`` bounds the events that wait."""
        entries = self.entries
        if len(entries) < BUFFER - 1:
            entries.append(entry)
            entries.append(None)
            if self.idle:
                self.wake()
        else:  # room for one at most: each on its own, kept or dropped
            kind, lane, at, fields, then = entry
            self.put((kind, lane, at, fields, None))
            self.put((Due, lane, cast(float, then), fields[:2], None))

    def wake(self) -> None:
        # After the append: the dispatcher lists itself idle, then looks again, so one of
        # the two sees the other (as workers do: see _workers).
        if self.idle:
            with suppress(IndexError):  # another thread woke it first
                self.idle.pop().release()


class Observer:
    """What an observed task's extension carries: its id, its timings, where it tells
    its events. Holds neither the task nor its future: none lives longer for it."""

    __slots__ = (
        "channel",
        "clock",
        "id",
        "lane",
        "priority",
        "seq",
        "since",
        "state",
        "tally",
        "timings",
        "waits",
    )

    def __init__(
        self, task: Task, lane: Any, clock: Clock, channel: Channel | None, now: float
    ) -> None:
        # now: the time its submit read, from which its due time was computed.
        self.id = self.seq = task._seq  # seq: of the task that stands for it (see moved)
        self.lane = lane  # its LaneState, or None
        self.clock = clock
        self.channel = channel  # None: timings only
        self.timings = Timings(task._seq, now)
        task.future._timings = self.timings  # see OwnFuture
        self.priority = task._priority  # as of its last move
        self.state = VOID  # as it last moved
        self.since = now  # when it last moved
        self.waits = "delay"  # what its time PENDING counts as: "delay" or "backoff"
        self.tally: Tally | None = None  # the worker's, while it runs

    def emit(self, kind: type[TaskEvent], at: float, *fields: object) -> None:
        """Tell an event of this task, with its own ``fields`` after the task's."""
        channel = self.channel
        if channel is not None:
            channel.put((kind, self.lane, at, (self.id, self.priority, *fields), None))

    def moved(
        self, task: Task, was: int, state: int, attempt: int, error: BaseException | None
    ) -> None:
        """The task moved from ``was`` to ``state`` (see ``Scheduler.move``), under the
        scheduler's lock; ``attempt``, ``error``: its retry's, if any."""
        if task._seq != self.seq:
            if state == VOID:
                return  # the original of a rescheduled task, claimed once its copy is queued
            self.seq = task._seq  # a retry, a series' next run, a copy: the same task
        now = self.clock.now()
        timings, last = self.timings, self.state
        spent = now - self.since  # in the state it leaves
        self.state, self.since, self.priority = state, now, task._priority
        if state == STARTED:  # the common steps first: started (always out of READY)
            timings.queue += spent
            timings.started = now
            self.emit(Started, now, attempt)
            return
        if last == VOID and was != VOID:
            # Queued through the intake at its submit: it moves first out of it.
            if state == READY:  # due at its submit: the common step, Submitted and Due
                timings.queue += spent
                timings.due = task._when
                self._submitted(task, timings.submitted, now)
                return
            last = INTAKE
            self._submitted(task, timings.submitted)
        # The time it spent in the state it leaves, by what it waited for.
        if last == PENDING:
            if self.waits == "delay":
                timings.delay += spent
            else:
                timings.backoff += spent
        elif last in (READY, INTAKE):
            timings.queue += spent
        elif last == THROTTLED:
            timings.throttled += spent
        elif last == BLOCKED:
            timings.blocked += spent
        if was == VOID and state != VOID:  # queued
            if last == VOID:  # new
                self._submitted(task, now)
            elif last <= READY:
                self.emit(Rescheduled, now, task._when)
            else:
                self.waits = "delay"  # a series' next run waits for its time
        elif last == STARTED and state <= READY:  # a failed attempt, to be tried again
            self.waits = "backoff"
            wait = max(0.0, task._when - now)
            name = None if error is None else error_name(error)
            self.emit(RetryScheduled, now, attempt, wait, name)
        if last == BLOCKED:
            if BLOCKED < state <= READY:  # its upstreams done: queued (a copy stays blocked)
                self.emit(Released, now)
        elif state == BLOCKED:
            self.emit(Blocked, now)
        if state == READY:
            if last != READY and last != THROTTLED:
                if timings.due is None:
                    timings.due = task._when
                self.emit(Due, now)
        elif state == THROTTLED:
            if last == READY:
                self.emit(Throttled, now, *self._held(now))
        elif state >= FAILED and state != VOID:
            self._ended(now, state)

    def _submitted(self, task: Task, at: float, due: float | None = None) -> None:
        """Tell its Submitted (at ``at``), and if ``due``, its Due then with it."""
        channel = self.channel
        if channel is not None:
            series = task.ext is not None and task.ext.recurrence is not None
            fields = (self.id, self.priority, task.fn, task._when, task.context, series)
            entry = (Submitted, self.lane, at, fields, due)
            if due is None:
                channel.put(entry)
            else:
                channel.put_pair(entry)

    def timed_out(self, attempt: int, limit: float, now: float) -> None:
        """A run reached its time limit (see ``_runtime.RunLimit.fire``), under the lock."""
        self.emit(TimedOut, now, attempt, limit)

    def _held(self, now: float) -> tuple[HeldBy | None, str | None]:
        held = self.lane.holding(now)  # the lane's own answer, as waiting() gives it
        return (None, None) if held is None else (held[1], held[0].name)

    def _ended(self, now: float, state: int) -> None:
        self.timings.finished = now
        if state == EXPIRED:
            self.emit(Expired, now)
        elif state == SKIPPED:
            self.emit(Skipped, now)
        else:
            outcome: Outcome = (
                "completed" if state == COMPLETED else "failed" if state == FAILED else "cancelled"
            )
            self.emit(Finished, now, outcome)

    def rejected(self) -> None:
        """Its submit raised ``QueueFull``: it was never queued."""
        now = self.clock.now()
        self.timings.finished = now
        self.emit(Rejected, now)

    def running(self, tally: Tally) -> Tally:
        """A run begins in a worker whose tally is ``tally``: the tally it counts in."""
        self.tally = tally
        return self

    # As the worker's tally (see _task.Tally): a run counts how it ended here, in its
    # worker, outside the lock, before its future completes. VOID: the run of a series
    # cancelled since it was claimed, which never began.
    def __getitem__(self, state: int) -> int:
        return self.tally[state]  # type: ignore[index]  # set by running()

    def __setitem__(self, state: int, count: int) -> None:
        self._ended(self.clock.now(), CANCELLED if state == VOID else state)
        self.tally[state] = count  # type: ignore[index]  # set by running()


class Subscription:
    """What ``subscribe()`` returns: ``close()`` (or the end of a ``with`` block) ends it.
    Once ``close()`` has returned, no event reaches it (but one in the callback now),
    not even one that happened before and was not delivered yet."""

    __slots__ = ("_callback", "_close", "lane")

    def __init__(
        self, close: Callable[[Subscription], object], callback: Subscriber, lane: Any
    ) -> None:
        self._close = close  # the executor's, held weakly
        self._callback = callback
        self.lane = lane  # a LaneState, whose events (and its inner lanes') it gets; or None

    def wants(self, lane: Any) -> bool:
        """Whether it gets an event of ``lane`` (None: of no lane)."""
        mine = self.lane
        if mine is None:
            return True
        return lane is not None and any(outer is mine for outer in lane.chain())

    def close(self) -> None:
        self._close(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class Events:
    """The subscribers of one executor, and the dispatcher thread that calls them.

    The dispatcher holds its channel and this object only weakly: an executor dropped
    without ``shutdown()`` lets go of it, and the dispatcher exits. ``close()`` (the
    executor's ``shutdown(wait=True)``) has it deliver what is left, then exit."""

    def __init__(self, clock: Clock, name: str, owner: object) -> None:
        self.channel = Channel(clock)
        self.subscribers: tuple[Subscription, ...] = ()  # replaced whole: read unlocked
        self._name = name
        self._owner = owner  # whom the dispatcher acts for (see _threads.acting_for)
        self._lock = threading.Lock()  # for subscribe, unsubscribe, close
        self._thread: threading.Thread | None = None
        self._closed = False
        # Wakes the dispatcher once this is collected, so that it exits.
        self._finalizer = weakref.finalize(self, self.channel.wake)

    def subscribe(self, subscription: Subscription) -> None:
        """Add a subscriber; start the dispatcher if none runs. Raises ``RuntimeError`` if
        no thread can start, adding nothing."""
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot subscribe after shutdown")
            if self._thread is None:
                self._thread = _threads.start(
                    self._name, self._owner, _dispatch, weakref.ref(self), self.channel
                )
            self.subscribers = (*self.subscribers, subscription)

    def unsubscribe(self, subscription: Subscription) -> bool:
        """Remove a subscriber; return whether any is left."""
        with self._lock:
            self.subscribers = tuple(s for s in self.subscribers if s is not subscription)
            return bool(self.subscribers)

    def lane_configured(self, lane: Any, options: Mapping[str, object]) -> None:
        self.channel.put((LaneConfigured, lane, self.channel.clock.now(), (options,), None))

    def close(self) -> None:
        """Deliver what is left, then let the dispatcher exit; wait for it, unless called
        from it (a subscriber that shuts the executor down)."""
        with self._lock:
            self._closed = True
            thread = self._thread
        self.channel.wake()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    @property
    def closed(self) -> bool:
        return self._closed


def _dispatch(events: weakref.ref[Events], channel: Channel) -> None:
    _threads.serve(_deliver, events, channel)


def _deliver(events_ref: weakref.ref[Events], channel: Channel) -> None:
    """The dispatcher's loop: deliver each entry, in order; sleep while there is none."""
    entries, drops, idle = channel.entries, channel.drops, channel.idle
    park = threading.Lock()
    park.acquire()
    while True:
        events = events_ref()
        if events is None:
            return  # the executor is gone: no one subscribes any more
        # Read once a batch: where the executor's clock falls on the wall clock.
        offset = channel.clock.wall_offset()
        while entries:
            if drops:
                count = len(drops)
                for _ in range(count):
                    drops.popleft()
                clock = channel.clock
                dropped = Dropped(clock.now(), clock.wall(), None, count)
                _call(events.subscribers, _EVERY_LANE, dropped)
            entry = entries.popleft()
            if entry is None:
                continue  # the place of a Due told with its Submitted (see put_pair)
            kind, lane, at, fields, then = entry
            name = None if lane is None else lane.name
            if kind is Submitted:
                task, priority, fn, due, context, series = fields
                # Its fn, named here, off the hot path.
                event = Submitted(
                    at, at + offset, name, task, priority, callable_name(fn), due, context, series
                )
                _call(events.subscribers, lane, event)
                if then is None:
                    continue
                kind, at, fields = Due, then, (task, priority)
            _call(events.subscribers, lane, kind(at, at + offset, name, *fields))
        if events.closed:
            return
        del events  # while it sleeps, it holds the executor's events only weakly
        idle.append(park)
        # After the append: a put, a close() or the executor's end that came after the
        # look above, perhaps without seeing it idle, is seen here.
        events = events_ref()
        if entries or drops or events is None or events.closed:
            try:
                idle.remove(park)
            except ValueError:
                park.acquire()  # popped by a waker, which releases it: take that back
            continue
        del events
        park.acquire()
        # Woken by the first event after a pause: those that follow it, while the tasks
        # go on (a worker's start and end, the next submits), are delivered with it. Each
        # wake-up is a switch between threads, the greater part of what a subscriber costs a
        # task; this pause makes it one per burst of events, not several per task.
        time.sleep(GATHER)


_EVERY_LANE = object()  # what a Dropped event is of: every subscriber gets it


def _call(subscribers: tuple[Subscription, ...], lane: Any, event: Event) -> None:
    for subscription in subscribers:
        if subscription.lane is None or lane is _EVERY_LANE or subscription.wants(lane):
            try:
                subscription._callback(event)
            except Exception:
                LOGGER.exception(
                    "Event subscriber %r raised on %r",
                    subscription._callback,
                    event,
                    extra={"priority_executor_event": type(event).__name__},
                )
