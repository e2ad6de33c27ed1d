"""``PriorityExecutor``: the public façade over one scheduler and its worker pool.

The façade owns nothing the threads need: workers, promoter and tasks reference the
scheduler only, so an executor dropped without ``shutdown()`` is garbage collected and then
shut down without waiting, as ``ThreadPoolExecutor`` is.
"""

from __future__ import annotations

import functools
import itertools
import os
import signal
import sys
import threading
import weakref
from collections.abc import Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from concurrent.futures.thread import BrokenThreadPool
from contextvars import copy_context
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Callable, Literal, cast

from . import _control, _lifecycle, _submitting
from ._arguments import (
    check_callable,
    check_int,
    check_policy,
    check_priority,
    deadline_time,
    due_time,
    expiry_time,
)
from ._backend import RemoteFuture, open_backend
from ._calendar import Schedule
from ._clock import Clock, ManualClock, MonotonicClock
from ._dependencies import Blocked, Upstreams
from ._events import Channel, Event, Events, Observer, Subscription
from ._extension import Extension, Observed
from ._gate import QueueFull, make_gate
from ._lane_engine import LaneState
from ._lane_registry import LaneRegistry
from ._lanes import Lane, make_lane_state, parent_state
from ._limits import Smooth
from ._options import Options
from ._policies import Aging, Policy, PriorityFirst
from ._recurring import series_of
from ._retry import Retry, check_retry
from ._runtime import check_time_limit, limited_future
from ._scheduler import Scheduler
from ._stats import ExecutorStats
from ._task import Extended, Owner, OwnFuture, Task
from ._waiting import WaitingTask
from ._work_queue import WorkQueue
from ._workers import WorkerPool

_DEFAULT_POLICY = PriorityFirst()
_cpu_count = getattr(os, "process_cpu_count", os.cpu_count)


def _weak_call(method: Callable[[Subscription], None]) -> Callable[[Subscription], None]:
    """``method`` of an object, called only while the object lives: a subscription does
    not keep its executor alive."""
    ref = weakref.WeakMethod(method)

    def call(subscription: Subscription) -> None:
        bound = ref()
        if bound is not None:
            bound(subscription)

    return call


class PriorityExecutor(_submitting.Executor, ThreadPoolExecutor):
    """A ``ThreadPoolExecutor`` that runs the most important due task first.

    ``submit()`` also takes ``priority``, ``delay``, ``run_at`` and ``expires``; due tasks
    are taken in the order of ``policy``; ``clock`` replaces real time (see
    ``priority_executor.testing.ManualClock``); a failed task is tried again as ``retry``
    says (see ``Retry``). ``reschedule()`` changes a task that has not started;
    ``waiting()`` shows every such task. With ``max_waiting``, a submit waits while that
    many tasks wait to start (a series counts once): until there is room, or for at most
    ``waiting_timeout`` seconds (0: not at all), then raises ``QueueFull``, having queued
    nothing. A submit from a thread that runs an asyncio event loop never waits, which
    would stall the loop: it raises ``QueueFull`` at once. One from the executor's own
    tasks or callbacks is let through; one waiting when shutdown begins raises
    ``RuntimeError``. A lane can have a bound of its own (see ``lane()``).

    ``time_limit``: how long each run of a task may take (seconds or a timedelta), unless
    its lane's or its call's (``options(time_limit=...)``) says otherwise; at the limit its
    future fails with ``TaskTimeoutError`` and its token is set (see ``current()``).

    A task runs in a copy of the ``contextvars`` context of the code that submitted it (a
    series' every run in a copy of the context of the code that started it), so tracing
    spans and request-scoped values follow it; ``inherit_context=False`` runs tasks in the
    worker thread's context instead, as ``ThreadPoolExecutor`` does.

    ``fair_share``: what weighted lanes share (see ``lane(weight=...)``): ``"starts"``, or
    ``"time"``, the workers' busy time, charged to a lane as each of its runs ends.
    """

    # A ThreadPoolExecutor for whoever checks (asyncio's set_default_executor(), grpc), but
    # none of its machinery: its __init__ is not called, so its queue, threads and locks do
    # not exist, and every method of it that would reach them is replaced below. What it
    # has is what clients read: _max_workers, _thread_name_prefix, _work_queue (a view of
    # the waiting tasks that drains as its queue does: see _work_queue), and the class
    # attribute BROKEN (Python 3.14 reads it for the exception of a broken pool; set here for every
    # Python, as it is what this executor raises). prepare_context() (3.14) is inherited
    # and never called: the initializer runs in this executor's own workers.
    BROKEN = BrokenThreadPool

    _counter = itertools.count().__next__

    def __init__(
        self,
        max_workers: int | None = None,
        thread_name_prefix: str = "",
        initializer: Callable[..., object] | None = None,
        initargs: tuple[Any, ...] = (),
        *,
        policy: Policy = _DEFAULT_POLICY,
        clock: ManualClock | None = None,
        backend: Executor | Literal["process"] | None = None,
        retry: Retry | None = None,
        max_waiting: int | None = None,
        waiting_timeout: float | timedelta | None = None,
        inherit_context: bool = True,
        fair_share: Literal["starts", "time"] = "starts",
        time_limit: float | timedelta | None = None,
    ) -> None:
        if max_workers is None:
            # Threads as ThreadPoolExecutor's, for I/O-bound work: at least 5, at most 32;
            # with a backend, as ProcessPoolExecutor's: one task in flight per CPU.
            cpus = _cpu_count() or 1
            max_workers = min(32, cpus + 4) if backend is None else cpus
        if check_int("max_workers", max_workers) <= 0:
            raise ValueError("max_workers must be greater than 0")
        if initializer is not None and not callable(initializer):
            raise TypeError("initializer must be a callable")
        check_policy(policy)
        if clock is not None and not isinstance(clock, ManualClock):
            raise TypeError(f"clock must be a ManualClock or None, not {type(clock).__name__}")
        check_retry(retry)
        if not isinstance(inherit_context, bool):
            raise TypeError(f"inherit_context must be a bool, not {type(inherit_context).__name__}")
        if fair_share not in ("starts", "time"):
            raise ValueError(f"fair_share must be 'starts' or 'time', not {fair_share!r}")
        gate = make_gate(max_waiting, waiting_timeout)
        # How long each run may take, unless its lane or its call says (see _runtime).
        self._time_limit = check_time_limit(time_limit)
        # Whether any lane was given one: until then, a lane's task runs under the
        # executor's, and its submit looks up no lane for it (see _limit_lanes).
        self._lane_limits = False
        # Named as Python 3.14's sys.flags.thread_inherit_context, which does for a thread
        # what this does for a task: start it in a copy of its starter's context.
        self._inherit_context = inherit_context
        self._retry = retry
        self._clock: Clock = MonotonicClock() if clock is None else clock
        self._backend = open_backend(backend, max_workers, initializer, initargs)
        if self._time_limit is not None:
            self._check_limit()
        if self._backend is not None:
            initializer = None  # it runs in the backend's workers, not in ours
        # Read by clients that size their work to the pool, as ThreadPoolExecutor's is:
        # dask's threaded scheduler keeps this many tasks in flight.
        self._max_workers = max_workers
        self._policy = policy
        self._aging = isinstance(policy, Aging)  # priorities must fit a float (_check_priority)
        self._thread_name_prefix = name_prefix = (
            thread_name_prefix or f"PriorityExecutor-{self._counter()}"
        )
        workers = WorkerPool(max_workers, name_prefix, initializer, initargs, self._backend)
        self._scheduler = scheduler = Scheduler(self._clock, policy, workers, gate)
        if fair_share == "time":
            # Shares from the start: its workers charge them as runs end (see _workers).
            scheduler.share_fairly(by_time=True)
        _lifecycle.register(scheduler)
        # Drained by clients as ThreadPoolExecutor's queue.SimpleQueue: google-cloud-pubsub
        # hands the messages of tasks not started back, dask.distributed clears it.
        self._work_queue = WorkQueue(scheduler)  # type: ignore[assignment]
        # How its tasks' futures reach the scheduler (see OwnFuture).
        self._owner: weakref.ref[Owner] = weakref.ref(scheduler)
        # The futures of its tasks: those of a series, or of a task tried again, stay ours
        # with a backend too (each call is handed off); any other is the backend's to run.
        self._future_type: type[OwnFuture[Any]] = (
            OwnFuture if self._backend is None else RemoteFuture
        )
        # Garbage collection may run it in any thread, even one that holds the scheduler's
        # lock: it only asks the executor's own threads to shut it down.
        finalizer = weakref.finalize(self, scheduler.request_shutdown, _lifecycle.shutdown_reason())
        finalizer.atexit = False  # at exit, _lifecycle shuts down every executor and waits
        self._registry = LaneRegistry()
        self._events_lock = threading.Lock()  # see subscribe()
        # Its tasks that wait for upstreams (see _dependencies).
        self._blocked = Blocked()
        # Its subscribers (see subscribe()), and while it has any, where its tasks' events go.
        self._events: Events | None = None
        self._observing: Channel | None = None

    def _schedule(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        priority: int | None,
        delay: float | timedelta | None,
        run_at: datetime | None,
        expires: float | timedelta | datetime | None,
        options: Options | None = None,
        lane: LaneState | None = None,
    ) -> Future[Any]:
        clock = self._clock
        now = clock.now()
        if delay is None and run_at is None and expires is None:
            due, deadline, wall = now, None, None
        else:
            due, wall = self._due(now, delay, run_at)
            deadline = deadline_time(clock, now, due, expires)
        if priority is None:
            priority = 0 if lane is None else lane.priority
        elif self._aging:
            self._check_priority(priority)
        if not callable(fn) or type(priority) is not int:  # one test on the common path
            check_callable(fn)
            check_priority(priority)
        scheduler = self._scheduler
        # _retry_for(lane), inlined: no call on a lane's submit either.
        retry = self._retry if lane is None or lane.retry is None else lane.retry
        limit = (
            self._time_limit
            if options is None and (lane is None or not self._lane_limits)
            else self._limit(options, lane)
        )
        if limit is not None:
            self._check_limit()
            future = limited_future(self._owner, self._backend is not None and retry is None)
        else:
            # Its future stays ours across a retry's attempts, with a backend too: each
            # attempt's call is handed off.
            future = self._future_type(self._owner) if retry is None else OwnFuture(self._owner)
        context = copy_context() if self._inherit_context else None
        # While it has a subscriber, every task is observed (see _events): the one test of
        # the plain path for events.
        channel = self._observing
        plain = (
            deadline is None
            and retry is None
            and wall is None
            and options is None
            and limit is None
            and channel is None
        )
        if lane is None and plain:
            task = Task(scheduler.next_seq(), fn, args, kwargs, future, priority, due, context)
            scheduler.add(task, due <= now)
            return future
        task = Extended(scheduler.next_seq(), fn, args, kwargs, future, priority, due, context)
        if plain:
            task.ext = lane  # a lane is the extension of its tasks that have no other feature
            scheduler.add(task, due <= now)
            return future
        observer = self._observer(task, lane, channel, options, now)
        after = options is not None and bool(options.after or options.after_any)
        if (
            observer is not None
            and deadline is None
            and retry is None
            and wall is None
            and limit is None
            and not after
        ):
            task.ext = Observed(None, lane, None, None, None, options, None, observer)
        else:
            ext = Extension(deadline, lane, retry, None, wall, options, limit, observer)
            if after:
                self._submit_after(task, ext, cast(Options, options))
                return future
            task.ext = ext
        self._add(task, due <= now, observer)
        return future

    def _submit_after(self, task: Extended, ext: Extension, options: Options) -> None:
        """Queue ``task`` BLOCKED until the futures of ``options`` are done (see
        _dependencies): queued first, so that an upstream done already, which calls back
        at once, finds it; if the queueing raises, nothing is left to call back."""
        ext.options = options.for_task()
        ext.upstreams = upstreams = Upstreams(
            self._owner, self._blocked, options.after + options.after_any
        )
        task.ext = ext
        self._add(task, False, ext.observer)
        upstreams.listen(options.after, options.after_any)

    def _observer(
        self,
        task: Task,
        lane: LaneState | None,
        channel: Channel | None,
        options: Options | None,
        now: float,
    ) -> Observer | None:
        """The observer of a task submitted at ``now``, if it is observed or timed (see
        _events)."""
        if channel is None and (options is None or not options.timings):
            return None
        return Observer(task, lane, self._clock, channel, now)

    def _add(self, task: Task, due_now: bool, observer: Observer | None) -> None:
        try:
            self._scheduler.add(task, due_now)
        except QueueFull:
            if observer is not None:
                observer.rejected()
            raise

    def _due(self, now: float, delay: object, run_at: object) -> tuple[float, float | None]:
        """When a task is due, and the wall-clock time it waits for: a ``run_at`` still to
        come is a wall-clock time, which a step of the system clock moves (the scheduler
        places it under its lock: see WallTime)."""
        due = due_time(self._clock, now, delay, run_at)
        if run_at is None or due <= now:
            return due, None
        return due, cast(datetime, run_at).timestamp()

    def _schedule_recurring(
        self,
        fn: Callable[..., object],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        interval: float | timedelta | Schedule,
        fixed_rate: bool,
        priority: int | None,
        delay: float | timedelta | None,
        run_at: datetime | None,
        options: Options | None = None,
        lane: LaneState | None = None,
    ) -> Future[None]:
        if "expires" in kwargs:
            # Reserved as in submit(), so that code moved from there fails rather than
            # handing fn a keyword it never expected.
            raise TypeError(
                "submit_recurring() got an unexpected keyword argument 'expires': a series has"
                " no start deadline (pass a callee's own 'expires' through functools.partial)"
            )
        clock = self._clock
        now = clock.now()
        due, wall = self._due(now, delay, run_at)  # a run_at's first run waits for the wall time
        if not isinstance(fixed_rate, bool):
            raise TypeError(f"fixed_rate must be a bool, not {type(fixed_rate).__name__}")
        check_callable(fn)
        if priority is None:
            priority = 0 if lane is None else lane.priority
        self._check_priority(priority)
        scheduler = self._scheduler
        recurrence, due, wall = series_of(interval, fixed_rate, clock, now, due, wall)
        limit = self._limit(options, lane)
        if limit is not None:
            self._check_limit()
        future: OwnFuture[None] = (
            OwnFuture(self._owner) if limit is None else limited_future(self._owner, False)
        )
        context = copy_context() if self._inherit_context else None
        task = Extended(scheduler.next_seq(), fn, args, kwargs, future, priority, due, context)
        observer = self._observer(task, lane, self._observing, options, now)
        ext = Extension(
            None, lane, self._retry_for(lane), recurrence, wall, options, limit, observer
        )
        if options is not None and (options.after or options.after_any):
            self._submit_after(task, ext, options)  # its first run waits for them
        else:
            task.ext = ext
            self._add(task, due <= now, observer)
        return future

    def _check_priority(self, priority: object) -> None:
        check_priority(priority)
        # Aging computes its keys in floats: a larger int would fail its task with a bare
        # OverflowError, far from the call that caused it.
        if self._aging and abs(cast(int, priority)) > sys.float_info.max:
            raise ValueError(
                f"priority is too large for {self._policy!r}, which orders by a float"
                f" (an int of {cast(int, priority).bit_length()} bits; at most"
                f" {sys.float_info.max:.3g} either way)"
            )

    def _limit(self, options: Options | None, lane: LaneState | None) -> float | None:
        """A run's time limit: its call's, else its lane's, else that of the nearest
        enclosing lane that has one, else the executor's."""
        if options is not None and options.time_limit is not None:
            return options.time_limit
        while lane is not None:
            if lane.time_limit is not None:
                return lane.time_limit
            lane = lane.parent
        return self._time_limit

    def _check_limit(self) -> None:
        """A time limit is refused where nothing could stop the call: in a backend other
        than ``"process"`` (another process pool, Dask), which cannot kill one call."""
        if self._backend is not None and not self._backend.killable:
            raise ValueError(
                "time_limit needs threads or backend='process': a call in the backend"
                " executor given cannot be stopped"
            )

    def _limit_lanes(self) -> None:
        """A lane is given a time limit: refused as ``_check_limit`` says, else from now on
        each lane's submit looks for its lane's (see ``_limit``)."""
        self._check_limit()
        self._lane_limits = True

    def _retry_for(self, lane: LaneState | None) -> Retry | None:
        """A lane's retry policy replaces the executor's."""
        return self._retry if lane is None or lane.retry is None else lane.retry

    def lane(
        self,
        name: str | None = None,
        *,
        priority: int | None = None,
        max_running: int | None = None,
        max_starts: int | None = None,
        per: float | timedelta | None = None,
        cooldown: float | timedelta | None = None,
        retry: Retry | None = None,
        survive_failures: bool = False,
        max_waiting: int | None = None,
        waiting_timeout: float | timedelta | None = None,
        rates: Sequence[tuple[int, float | timedelta] | Smooth] | None = None,
        weight: float | None = None,
        parent: Lane | None = None,
        time_limit: float | timedelta | None = None,
    ) -> Lane:
        """A lane: a kind of work with limits of its own, on this executor's workers.

        ``max_running``: at most this many of its tasks run at once. ``max_starts`` per
        ``per`` seconds (default 1): at most this many start in any such window.
        ``cooldown``: a task starts only once this many seconds passed since the lane's
        latest run ended. ``priority``: its tasks' default priority. ``retry``: its own
        retry policy. ``survive_failures``: its recurring series go on after a failed run.
        ``max_waiting``, ``waiting_timeout``: as the executor's, for the lane's own tasks;
        a submit to the lane needs room under both bounds, the lane's and the executor's
        (it waits for the lane's first, so a lane at its bound holds back no other lane).
        ``rates``: ``(max_starts, per)`` pairs, every one a sliding window that holds (in
        place of ``max_starts`` and ``per``), and ``Smooth`` rates, whose starts are spaced
        evenly. ``weight``: among due tasks of the same
        priority, workers are shared between backlogged lanes in proportion to their
        weights (a lane without one weighs 1, as the tasks without a lane do together).
        ``parent``: a lane of this executor that this one sits in: a task starts only when
        its lane and every enclosing lane allow it. ``time_limit``: how long each run of
        its tasks may take, in place of the executor's (a call's own, given through
        ``options()``, wins). ``lane.configure()`` changes limits and weight at run time.

        A named lane is one per name: a later call returns the same lane, and options it
        gives must equal the lane's, as they are now (after any ``configure()``). Made
        with options, it keeps them until its ``shutdown()``, whether or not a reference to
        it is kept; made without, it is
        forgotten once idle and unreferenced. Raises ``RuntimeError`` after ``shutdown()``,
        and for a name whose lane with options was shut down, unless options are given:
        then they make a new lane of that name.
        """
        state = make_lane_state(
            name,
            priority,
            max_running,
            max_starts,
            per,
            cooldown,
            retry,
            survive_failures,
            max_waiting,
            waiting_timeout,
            rates,
            weight,
            parent_state(self._scheduler, parent),
            time_limit,
        )
        if state.time_limit is not None:
            self._limit_lanes()
        self._check_priority(state.priority)
        self._scheduler.check_open()
        if name is None:
            self._made(state)
            return self._lane_facade(state)
        made = self._registry.lane(state, rates is not None, self._made)
        if made is state:
            return self._lane_facade(state)
        facade = None if made.facade is None else made.facade()
        return self._lane_facade(made) if facade is None else facade

    def lanes(self) -> dict[str, Lane]:
        """The named lanes, by name: every one made with options and not shut down, and
        those made without while something references them. Each ``Lane`` shows its
        options (``max_running``, ``max_starts``, ``per``, ``cooldown``, ...)."""
        lanes = {}
        for state in self._registry.live():
            facade = None if state.facade is None else state.facade()
            lanes[cast(str, state.name)] = self._lane_facade(state) if facade is None else facade
        return lanes

    def _made(self, state: LaneState) -> None:
        """A lane was just made. A bound of its own makes every submit of the
        executor look for room (see Scheduler.bound): only once the lane is really made,
        not for a call that returns an existing lane or refuses its options."""
        if state.gate is not None:
            # Before anyone can use the lane: its first submit counts in its gate.
            self._scheduler.bound(state.gate)
        if state.weight is not None:
            self._scheduler.locked(lambda effects: self._scheduler.share_fairly())
        self._configured(state)

    def _configured(self, state: LaneState) -> None:
        """A lane was made, or configured: its subscribers are told its options."""
        if self._observing is not None:
            cast(Events, self._events).lane_configured(state, state.settings())

    def _lane_facade(self, state: LaneState) -> Lane:
        parent = None
        if state.parent is not None:
            parent = None if state.parent.facade is None else state.parent.facade()
            if parent is None:
                parent = self._lane_facade(state.parent)
        return Lane(
            state,
            self._scheduler,
            self._schedule,
            self._schedule_recurring,
            self._registry.shut,
            functools.partial(_control.waiting, self._scheduler),
            self._keep_lane,
            parent,
            self._limit_lanes,
        )

    def _keep_lane(self, state: LaneState) -> None:
        """A lane was configured."""
        self._configured(state)
        self._registry.configured(state)

    def subscribe(
        self, callback: Callable[[Event], object], *, lane: Lane | None = None
    ) -> Subscription:
        """Call ``callback(event)`` for each event of each task submitted from now on (of
        ``lane``'s tasks only, and those of the lanes inside it, if given), and each
        lane's configuration: in the executor's dispatcher thread, one event at a time,
        in the order they happened. See README, "Seeing what it does"."""
        if not callable(callback):
            raise TypeError(f"callback must be a callable, not {type(callback).__name__}")
        state = parent_state(self._scheduler, lane, "lane")
        self._scheduler.check_open()
        subscription = Subscription(_weak_call(self._unsubscribe), callback, state)
        with self._events_lock:
            events = self._events
            if events is None:
                self._events = events = Events(
                    self._clock, f"{self._thread_name_prefix}_events", self._scheduler
                )
            events.subscribe(subscription)
            self._observing = events.channel
        return subscription

    def _unsubscribe(self, subscription: Subscription) -> None:
        with self._events_lock:
            if self._events is not None and not self._events.unsubscribe(subscription):
                self._observing = None

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Take no more work; cancel recurring series; with ``cancel_futures``, also every
        task not yet started. Other tasks still run, delayed ones at their time. With
        ``wait``, return when they have: unless called from a task or a callback of this
        executor, which cannot wait for itself."""
        scheduler = self._scheduler
        scheduler.shutdown(cancel_futures, _lifecycle.shutdown_reason())
        if not wait:
            return
        try:
            waited = scheduler.join()
        except KeyboardInterrupt:
            # Ctrl-C while waiting: the user wants out. What has not started never will,
            # and exit does not wait for what runs, as after a Ctrl-C that stops
            # ThreadPoolExecutor's wait.
            scheduler.shutdown(True, _lifecycle.shutdown_reason())
            _lifecycle.forget(scheduler)
            raise
        # A task or callback of this executor does not wait: then it is not for it to close
        # the backend either, which the remaining tasks need. Else its last worker closed
        # it, if it had any.
        if waited and self._backend is not None:
            self._backend.close()
        if waited and self._events is not None:
            self._events.close()  # every task has ended: its events are delivered by now

    def terminate_workers(self) -> None:
        """As ``ProcessPoolExecutor.terminate_workers()`` of Python 3.14, for
        ``backend="process"``: shut down without waiting, cancelling every task not
        started, and terminate (SIGTERM) every process; the calls they run fail with
        ``TaskStopped``. ``RuntimeError`` without that backend."""
        self._signal_workers(signal.SIGTERM)

    def kill_workers(self) -> None:
        """As ``terminate_workers()``, with SIGKILL (``ProcessPoolExecutor.kill_workers()``
        of Python 3.14); on Windows, the same as ``terminate_workers()``."""
        self._signal_workers(getattr(signal, "SIGKILL", signal.SIGTERM))

    def _signal_workers(self, signum: int) -> None:
        backend = self._backend
        if backend is None or not backend.killable:
            raise RuntimeError(
                'terminate_workers() and kill_workers() need backend="process": they stop'
                " the processes that the executor made"
            )
        self.shutdown(wait=False, cancel_futures=True)
        backend.signal_workers(signum)

    def _adjust_thread_count(self) -> None:
        """ThreadPoolExecutor's hook to start a thread for new work: here the worker pool
        starts one as each task is queued, so there is nothing to adjust."""

    def _initializer_failed(self) -> None:
        """What ThreadPoolExecutor's worker calls when the initializer raised: the pool is
        broken, its waiting tasks and later submits fail (this executor's workers do the
        same themselves)."""
        self._scheduler.break_pool(
            self.BROKEN("A thread initializer failed, the thread pool is not usable anymore")
        )

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        """``shutdown(wait=True)``; but an exception leaving the block must surface without
        waiting for tasks not due yet: they are cancelled first. A Ctrl-C, or any exception
        on a ManualClock (which no one will advance now), cancels every task not started."""
        if exc_type is not None:
            everything = self._scheduler.manual_time or issubclass(exc_type, KeyboardInterrupt)
            self._scheduler.shutdown(everything, _lifecycle.shutdown_reason(), cancel_not_due=True)
        self.shutdown(wait=True)

    def reschedule(
        self,
        future: Future[Any],
        *,
        priority: int | None = None,
        delay: float | timedelta | None = None,
        run_at: datetime | None = None,
        expires: float | timedelta | datetime | None = None,
    ) -> bool:
        """Change a task of this executor, or of one of its lanes, that has not started:
        what is given replaces what it had (``delay``, ``run_at`` and ``expires`` measured
        from now, checked as ``submit()`` checks them). Returns True; or False, changing
        nothing, if the task started or ended. For a recurring series, ``priority`` applies
        to its waiting run and every later one, ``delay``/``run_at`` move its waiting run.
        Raises ``ValueError`` for a future that is not this executor's. O(log n)."""
        if not isinstance(future, OwnFuture) or future._owner is not self._owner:
            raise ValueError(
                f"future must be one that this executor or one of its lanes returned,"
                f" got {future!r}"
            )
        # None only for a series that ended (see Task.__call__): its arguments are
        # still checked, as for any series, before it answers False.
        task = future._task
        clock = self._clock
        now = clock.now()
        due, wall = (
            (None, None) if delay is None and run_at is None else self._due(now, delay, run_at)
        )
        deadline = None if expires is None else expiry_time(clock, now, expires)
        if priority is not None:
            self._check_priority(priority)
        if deadline is not None and (
            task is None or (task.ext is not None and task.ext.recurrence is not None)
        ):
            raise ValueError("expires cannot be given for a recurring series: it has no deadline")
        if task is None:
            return False
        return _control.reschedule(self._scheduler, future, priority, due, wall, deadline, now)

    def stats(self) -> ExecutorStats:
        """A consistent snapshot of how many tasks are in each state."""
        return _control.stats(self._scheduler)

    def waiting(self) -> list[WaitingTask]:
        """A consistent snapshot of every task not started yet: the due ones first, in the
        order workers would start them, then the others by due time. For debugging and
        dashboards: O(n log n) under the scheduler's lock, not for hot paths."""
        return _control.waiting(self._scheduler)

    def __repr__(self) -> str:
        stats = self.stats()
        return (
            f"<{type(self).__name__} max_workers={self._max_workers} policy={self._policy!r}"
            f" running={stats.running} ready={stats.ready} throttled={stats.throttled}"
            f" scheduled={stats.scheduled}>"
        )


__all__: list[str] = ["PriorityExecutor"]
