"""Model-based test: the executor against a plain reference model, step by step.

A few workers, a ``ManualClock`` and tasks that block until the test releases them make
the executor deterministic: at every step the model (a few lists) predicts which tasks the
workers run, the state of every future, and every count of ``stats()`` and ``lane.stats()``.

Every task records its label and the clock time when it starts, then waits for its own gate.
The test opens the gate of one running task ("release", which may make it raise), and then
waits until the workers have started the tasks the model predicts next, and until the
executor shows the state the model predicts (bounded). That wait is for the worker threads to
act, never for a due time. Each policy gets its own run of examples.

Lanes with limits and retries are part of the model: which due task is throttled and which
waits for a worker, when a retry is due, what its future gets. Beyond the model's own
predictions, two invariants are checked on what the executor did, from the journal of
starts and ends: no start broke a limit of its lane, and no startable task waits while a
worker is idle.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import math
import os
import threading
import time
from concurrent.futures import CancelledError, Future
from concurrent.futures import wait as futures_wait
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from priority_executor import (
    Aging,
    EarliestDeadlineFirst,
    ExecutorStats,
    Fifo,
    Lane,
    PriorityExecutor,
    PriorityFirst,
    Retry,
)
from priority_executor.testing import ManualClock

SYNC_TIMEOUT = 5.0  # seconds for the worker thread to act; never reached unless broken
SETTLE_TIMEOUT = 2.0  # seconds for an idle worker's last steps; also reached only if broken
STUCK_TIMEOUT = 0.5  # seconds with nothing running or ready, when a start is predicted
GATE_TIMEOUT = 30.0  # a task left blocked by a broken test gives up after this
# More examples for a bug hunt: PRIORITY_EXECUTOR_MODEL_EXAMPLES=1000 pytest tests/test_model.py
EXAMPLES = int(os.environ.get("PRIORITY_EXECUTOR_MODEL_EXAMPLES", "40"))

WAITING = ("pending", "ready", "throttled")

PRIORITIES = st.sampled_from([-10, 0, 0, 3, 10])
DELAYS = st.one_of(st.none(), st.integers(0, 4))
EXPIRES = st.one_of(st.none(), st.integers(1, 4))


class Boom(Exception):
    """What a task raises when the test releases it failing: the retry policies cover it."""


class Fatal(Exception):
    """What a task raises when released failing with an exception no retry policy covers.
    A series fails only so: how series runs are retried is test_retry's."""


# Backoffs, factors and clock steps are multiples of 0.5: every due time the model predicts
# is exact in floating point, so it equals the executor's.
RETRIES = st.builds(
    Retry,
    st.sampled_from([3, 2, 4, 1]),
    backoff=st.sampled_from([0.5, 1.0, 2.0]),
    factor=st.sampled_from([1.0, 2.0, 3.0]),
    max_backoff=st.sampled_from([1.5, 4.0, 60.0]),
    on=st.just(Boom),
)
LANE_OPTIONS = st.fixed_dictionaries(
    {
        "priority": st.sampled_from([None, 5]),
        "max_running": st.sampled_from([None, 1, 1, 2]),
        "max_starts": st.sampled_from([None, 1, 2]),
        "per": st.sampled_from([None, 1, 2, 3]),
        "cooldown": st.sampled_from([None, 0, 0.5, 2]),
        "retry": st.one_of(RETRIES, st.none()),
    }
).filter(lambda options: options["per"] is None or options["max_starts"] is not None)


# -- the reference model ------------------------------------------------------------------


class MLane:
    """A lane's limits, and how its tasks used them, on the model's clock."""

    def __init__(
        self,
        name: str,
        priority: int | None,
        max_running: int | None,
        max_starts: int | None,
        per: float | None,
        cooldown: float | None,
        retry: Retry | None,
    ) -> None:
        self.name = name
        self.priority = priority or 0
        self.max_running = max_running
        self.max_starts = max_starts
        self.per = 1.0 if per is None else per
        self.cooldown = cooldown
        self.retry = retry
        self.usage = LaneUsage()
        self.retries = 0


class LaneUsage:
    """Starts and ends of a lane's runs, and what its limits allow at a time. The model
    keeps one per lane; the test replays the executor's journal into another."""

    def __init__(self) -> None:
        self.running = 0
        self.starts: list[float] = []
        self.last_end = -math.inf

    def window(self, lane: MLane, now: float) -> list[float]:
        """Starts within the sliding window that ends at ``now``."""
        return [s for s in self.starts if s + lane.per > now]

    def blocked_until(self, lane: MLane, now: float) -> float:
        """When the lane's next task may start (inf: when one of its runs ends)."""
        if lane.max_running is not None and self.running >= lane.max_running:
            return math.inf
        when = -math.inf if lane.cooldown is None else self.last_end + lane.cooldown
        window = self.window(lane, now)
        if lane.max_starts is not None and len(window) >= lane.max_starts:
            when = max(when, window[0] + lane.per)
        return when

    def room(self, lane: MLane, now: float) -> float:
        """How many of the lane's tasks may start now."""
        if self.blocked_until(lane, now) > now:
            return 0
        room = math.inf
        if lane.max_running is not None:
            room = lane.max_running - self.running
        if lane.max_starts is not None:
            room = min(room, lane.max_starts - len(self.window(lane, now)))
        return room

    def start(self, now: float) -> None:
        self.running += 1
        self.starts.append(now)

    def end(self, now: float) -> None:
        self.running -= 1
        self.last_end = now


class MTask:
    """A one-shot task, or one run of a series, as the model sees it."""

    def __init__(
        self,
        label: str,
        seq: int,
        priority: int,
        due: float,
        deadline: float | None,
        series: MSeries | None = None,
        lane: MLane | None = None,
        retry: Retry | None = None,
    ) -> None:
        self.label = label
        self.seq = seq
        self.priority = priority
        self.due = due
        self.deadline = deadline
        self.series = series
        self.lane = lane
        self.retry = retry
        self.attempt = 1
        # The last failed attempt's exception, as (class, args): what its future gets if no
        # attempt follows, or if the retry does not start by the deadline.
        self.error: tuple[type[Exception], tuple[Any, ...]] | None = None
        self.cancel_requested = False  # cancelled during an attempt (it has a retry policy)
        # Given its lane's room back when throttled: holds it until a worker takes the task.
        self.given = False
        # pending, ready, throttled, running, completed, failed, cancelled, expired, void
        self.state = "pending"


class MSeries:
    def __init__(self, label: str, priority: int, first_due: float, interval: float, rate: bool):
        self.label = label
        self.priority = priority
        self.first_due = first_due
        self.interval = interval
        self.fixed_rate = rate
        self.slot = 0
        self.state = "live"  # live, cancelled, failed
        self.run: MTask | None = None


POLICIES: dict[str, tuple[Callable[[], Any], Callable[[MTask], tuple[float, ...]]]] = {
    # name: (policy factory, the key DESIGN.md documents, without the final seq)
    "PriorityFirst": (PriorityFirst, lambda t: (-t.priority, t.due)),
    "Fifo": (Fifo, lambda t: ()),
    "EarliestDeadlineFirst": (
        EarliestDeadlineFirst,
        lambda t: (math.inf if t.deadline is None else t.deadline, t.due),
    ),
    "Aging(0.5)": (lambda: Aging(0.5), lambda t: (0.5 * t.due - t.priority, t.due)),
    "Aging(4)": (lambda: Aging(4), lambda t: (4.0 * t.due - t.priority, t.due)),
}


class Model:
    def __init__(self, policy: str, now: float, workers: int, retry: Retry | None) -> None:
        self.policy_key = POLICIES[policy][1]
        self.now = now
        self.workers = workers
        self.retry = retry
        self.seq = itertools.count()
        self.tasks: list[MTask] = []  # every task and run ever queued
        self.series: list[MSeries] = []
        self.lanes: list[MLane] = []
        self.running: list[MTask] = []  # in the order they started
        self.log: list[str] = []  # every start, by label
        self.closed = False
        self.cancelled_all = False  # by shutdown(cancel_futures=True): no retry is queued
        self.cancelled_series = 0
        self.retries = 0

    def key(self, task: MTask) -> tuple[float, ...]:
        return (*self.policy_key(task), task.seq)

    def waiting(self) -> list[MTask]:
        return [t for t in self.tasks if t.state in WAITING]

    def in_state(self, state: str, lane: MLane | None = None) -> list[MTask]:
        return [t for t in self.tasks if t.state == state and (lane is None or t.lane is lane)]

    def queue(self, task: MTask) -> None:
        task.state = "ready" if task.due <= self.now else "pending"

    def add_lane(self, name: str, **options: Any) -> MLane:
        lane = MLane(name, **options)
        self.lanes.append(lane)
        return lane

    def submit(
        self,
        label: str,
        priority: int | None,
        due: float,
        deadline: float | None,
        lane: MLane | None = None,
    ) -> MTask:
        if priority is None:
            priority = 0 if lane is None else lane.priority
        # A lane's retry policy replaces the executor's.
        retry = self.retry if lane is None or lane.retry is None else lane.retry
        task = MTask(label, next(self.seq), priority, due, deadline, lane=lane, retry=retry)
        self.tasks.append(task)
        self.queue(task)
        self.start_next()
        return task

    def submit_recurring(self, series: MSeries) -> None:
        self.series.append(series)
        self.queue_run(series, series.first_due)
        self.start_next()

    def queue_run(self, series: MSeries, due: float) -> None:
        series.run = MTask(series.label, next(self.seq), series.priority, due, None, series)
        self.tasks.append(series.run)
        self.queue(series.run)

    # -- lanes: which due task starts, which is throttled ---------------------------------

    def start_next(self) -> None:
        """Each idle worker takes the best startable task."""
        while len(self.running) < self.workers and self.take():
            pass

    def take(self) -> bool:
        """One worker's look at the due tasks, best first: one whose lane is at a limit is
        throttled (it holds back no other task); the first that may start, starts."""
        while True:
            ready = self.in_state("ready")
            if not ready:
                return False
            task = min(ready, key=self.key)
            task.given = False  # taken: it starts, or is throttled again
            lane = task.lane
            if lane is None or self.may_start(task, lane):
                task.state = "running"
                self.running.append(task)
                self.log.append(task.label)
                if lane is not None:
                    lane.usage.start(self.now)
                return True
            task.state = "throttled"
            self.release_lane(lane)

    def may_start(self, task: MTask, lane: MLane) -> bool:
        """Whether the lane has room, and for this task: a throttled one of the lane that
        comes first in policy order takes the room first."""
        if lane.usage.blocked_until(lane, self.now) > self.now:
            return False
        return all(self.key(task) < self.key(t) for t in self.in_state("throttled", lane))

    def release_lane(self, lane: MLane) -> None:
        """Give a lane's best throttled tasks back to the workers, as many as its limits let
        start now, less those given the room already that no worker took yet."""
        room = lane.usage.room(lane, self.now)
        room -= sum(task.given for task in self.in_state("ready", lane))
        for task in sorted(self.in_state("throttled", lane), key=self.key):
            if room <= 0:
                break
            task.state = "ready"
            task.given = True
            room -= 1

    def claimed(self, task: MTask, state: str) -> None:
        """A waiting task will not start: cancelled or expired."""
        was, task.state = task.state, state
        if task.lane is not None and was != "throttled":
            # It may have been given the lane's room, which now goes to another.
            self.release_lane(task.lane)

    # -- time and ends ----------------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        self.now += seconds
        for task in self.waiting():
            if task.deadline is not None and task.deadline <= self.now:
                # A retry's future gets its last attempt's exception (see check_future).
                self.claimed(task, "expired")
            elif task.state == "pending" and task.due <= self.now:
                task.state = "ready"
        for lane in self.lanes:  # a window or a cooldown may have passed
            self.release_lane(lane)
        self.start_next()

    def release(self, task: MTask, error: type[Exception] | None) -> None:
        """A running task's attempt ends: it returned, or raised ``error``."""
        self.running.remove(task)
        lane = task.lane
        if lane is not None:
            lane.usage.end(self.now)
        if error is not None:
            task.error = (error, (task.label, task.attempt))
            if not self.try_again(task, error):
                task.state = "cancelled" if task.cancel_requested else "failed"
        else:
            task.state = "cancelled" if task.cancel_requested else "completed"
        if lane is not None:
            self.release_lane(lane)
        series = task.series
        if series is not None and series.state == "live":
            if error is not None:
                series.state = "failed"
            elif not self.closed:
                if series.fixed_rate:
                    elapsed = (self.now - series.first_due) / series.interval
                    series.slot = max(series.slot + 1, math.ceil(elapsed))
                    due = series.first_due + series.slot * series.interval
                else:
                    due = self.now + series.interval
                self.queue_run(series, due)
        self.start_next()

    def try_again(self, task: MTask, error: type[Exception]) -> bool:
        """Queue the next attempt of a failed one, if its policy and deadline allow."""
        retry = task.retry
        if (
            retry is None
            or task.cancel_requested
            or self.cancelled_all
            or task.attempt >= retry.attempts
            or not issubclass(error, retry.on)
        ):
            return False
        due = self.now + min(retry.max_backoff, retry.backoff * retry.factor ** (task.attempt - 1))
        if task.deadline is not None and due >= task.deadline:
            return False  # the deadline bounds every attempt's start
        task.due = due
        task.seq = next(self.seq)  # ordered as if submitted now
        task.attempt += 1
        self.retries += 1
        if task.lane is not None:
            task.lane.retries += 1
        self.queue(task)
        return True

    # -- cancel and shutdown ----------------------------------------------------------------

    def cancel_task(self, task: MTask) -> bool:
        if task.state in WAITING:
            self.claimed(task, "cancelled")
            return True
        if task.state == "running" and task.retry is not None:
            # Its future stays pending across attempts: cancel() wins, and the outcome of the
            # attempt in progress is dropped.
            task.cancel_requested = True
            return True
        # An expired retry's future holds the last exception: it is not cancelled.
        return task.state == "cancelled" or (task.state == "expired" and task.error is None)

    def cancel_series(self, series: MSeries) -> bool:
        if series.state == "live":
            series.state = "cancelled"
            self.cancelled_series += 1  # the series counts once in cancelled...
            run = series.run
            assert run is not None
            if run.state in WAITING:
                run.state = "void"  # ...and its waiting run does not count on its own
            return True
        return series.state == "cancelled"

    def shutdown(self, cancel_futures: bool) -> None:
        self.closed = True
        for series in self.series:
            self.cancel_series(series)
        if cancel_futures:
            self.cancelled_all = True
            for task in self.waiting():
                task.state = "cancelled"

    def stats(self, lane: MLane | None = None) -> ExecutorStats:
        def count(state: str) -> int:
            return len(self.in_state(state, lane))

        return ExecutorStats(
            scheduled=count("pending"),
            ready=count("ready"),
            throttled=count("throttled"),
            running=count("running"),
            completed=count("completed"),
            failed=count("failed"),
            cancelled=count("cancelled") + (self.cancelled_series if lane is None else 0),
            expired=count("expired"),
            retries=self.retries if lane is None else lane.retries,
        )


# -- the executor side ----------------------------------------------------------------------


class Gates:
    """Task bodies that record their start, then wait for the test to release them.

    The journal holds every start and every release, with the clock time, in the order they
    happened: a release is journaled before its gate opens, so before any start it allows.
    A label runs at most once at a time (a series' runs and a task's attempts never
    overlap), so its latest gate is the one to open.
    """

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.cond = threading.Condition()
        self.journal: list[tuple[str, str, float]] = []  # ("start" or "end", label, time)
        self.starts: collections.Counter[str] = collections.Counter()
        self.gates: dict[str, tuple[threading.Event, list[type[Exception]]]] = {}
        self.open = False  # at teardown: nothing blocks any more

    def body(self, label: str) -> str:
        gate = threading.Event()
        fail: list[type[Exception]] = []
        with self.cond:
            self.starts[label] += 1
            attempt = self.starts[label]
            self.journal.append(("start", label, self.clock.now()))
            self.gates[label] = (gate, fail)
            self.cond.notify_all()
            if self.open:
                gate.set()
        if not gate.wait(GATE_TIMEOUT):
            raise RuntimeError(f"task {label} was never released")
        if fail:
            raise fail[0](label, attempt)
        return label

    def started(self) -> int:
        """Starts so far; the caller holds ``cond``."""
        return sum(self.starts.values())

    def release(self, label: str, error: type[Exception] | None) -> None:
        with self.cond:
            gate, fail = self.gates[label]
            self.journal.append(("end", label, self.clock.now()))
        if error is not None:
            fail.append(error)
        gate.set()

    def open_all(self) -> None:
        with self.cond:
            self.open = True
            for gate, _ in self.gates.values():
                gate.set()


def executor_threads(prefix: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(prefix + "_")]


_names = itertools.count()


class ExecutorMachine(RuleBasedStateMachine):
    policy = "PriorityFirst"  # a key of POLICIES; each test sets its own

    def __init__(self) -> None:
        super().__init__()
        self.prefix = f"pe-model-{next(_names)}"
        self.executor: PriorityExecutor | None = None
        self.model: Model | None = None
        self.clock: ManualClock | None = None
        self.gates: Gates | None = None
        self.futures: list[tuple[Future[Any], MTask]] = []
        self.series_futures: list[tuple[Future[Any], MSeries]] = []
        self.lanes: list[tuple[Lane, MLane]] = []
        self.lane_of: dict[str, MLane] = {}  # label: lane, for the lanes' tasks
        self.labels = itertools.count()
        self.shutdowns = 0

    @initialize(
        start=st.sampled_from([0.0, 1000.0, -50.0]),
        workers=st.sampled_from([1, 2, 3]),
        retry=st.one_of(RETRIES, st.none()),
        lanes=st.lists(LANE_OPTIONS, max_size=2),
    )
    def build(
        self, start: float, workers: int, retry: Retry | None, lanes: list[dict[str, Any]]
    ) -> None:
        policy = self.policy
        self.clock = ManualClock(start)
        self.gates = Gates(self.clock)
        self.executor = PriorityExecutor(
            max_workers=workers,
            thread_name_prefix=self.prefix,
            policy=POLICIES[policy][0](),
            clock=self.clock,
            retry=retry,
        )
        self.model = Model(policy, start, workers, retry)
        # Lanes from the start, so that most examples put tasks in them.
        for options in lanes:
            self.add_lane(options)

    # -- helpers ---------------------------------------------------------------------------

    @property
    def ex(self) -> PriorityExecutor:
        assert self.executor is not None
        return self.executor

    @property
    def m(self) -> Model:
        assert self.model is not None
        return self.model

    @property
    def g(self) -> Gates:
        assert self.gates is not None
        return self.gates

    def sync(self) -> None:
        """Wait until the workers have done what the model predicts they do next."""
        self.wait_started(len(self.m.log))
        # A worker ends a task in steps (count it, complete its future, queue a series' next
        # run or a retry, take the next task, go idle) that the test cannot wait for one by
        # one: wait until the executor shows what the model predicts, or fail with the
        # difference.
        end = time.monotonic() + SETTLE_TIMEOUT
        while True:
            try:
                self.check()
                return
            except AssertionError:
                if time.monotonic() > end:
                    raise
            time.sleep(0.0005)

    def wait_started(self, count: int) -> None:
        """Wait until the workers have started ``count`` tasks. Fail early if they cannot:
        with no task running and none ready for a while, none will start without the test
        (the workers pass through that state only for an instant, between counting a run
        and queueing the next one)."""
        gates = self.g
        end = time.monotonic() + SYNC_TIMEOUT
        stuck_since = None
        while True:
            with gates.cond:
                if gates.cond.wait_for(lambda: gates.started() >= count, 0.002):
                    return
            now = time.monotonic()
            stats = self.ex.stats()
            if stats.running or stats.ready:
                stuck_since = None
            elif stuck_since is None:
                stuck_since = now
            stuck = stuck_since is not None and now - stuck_since > STUCK_TIMEOUT
            assert not stuck, f"the model predicts start #{count}; executor: {stats}"
            assert now < end, f"the workers never made start #{count}: {stats}"

    def submitted(self) -> int:
        return len(self.futures) + len(self.series_futures)

    def check(self) -> None:
        m = self.m
        with self.g.cond:
            journal = list(self.g.journal)
        # Several workers may start tasks in one step, in any order: the step's set of
        # starts is what the model predicts (with one worker, the order too).
        started = collections.Counter(label for kind, label, _ in journal if kind == "start")
        assert started == collections.Counter(m.log), "the workers ran other tasks than the model"
        stats = self.ex.stats()
        assert stats == m.stats()
        for lane, mlane in self.lanes:
            lane_stats = lane.stats()
            assert lane_stats == m.stats(mlane), mlane.name
            # Each task of the lane in exactly one field (a lane holds no series here).
            counted = sum(dataclasses.astuple(lane_stats)) - lane_stats.retries
            assert counted == sum(t is mlane for t in self.lane_of.values()), mlane.name
        for future, task in self.futures:
            check_future(future, task)
        for future, series in self.series_futures:
            check_series_future(future, series)
        self.check_waiting()
        self.check_lane_limits(journal)
        if stats.running < m.workers:
            self.check_nothing_startable_waits(journal)

    def check_waiting(self) -> None:
        """``waiting()`` shows each waiting task in the model's state, with the model's due
        time: a retry's is its backoff after the failed attempt ended."""
        tasks: dict[Future[Any], MTask | None] = dict(self.futures)
        tasks.update((future, series.run) for future, series in self.series_futures)
        states = {"pending": "scheduled", "ready": "ready", "throttled": "throttled"}
        expected = sorted((t.label, states[t.state], t.due - self.m.now) for t in self.m.waiting())
        shown = []
        for waiting in self.ex.waiting():
            task = tasks[waiting.future]
            assert task is not None
            shown.append((task.label, waiting.state, waiting.due_in))
        assert sorted(shown) == expected

    def lane_usage(self, journal: list[tuple[str, str, float]], lane: MLane) -> LaneUsage:
        """How the executor used ``lane``, replayed from the journal; every start checked
        against the lane's limits at the time it happened."""
        usage = LaneUsage()
        for kind, label, t in journal:
            if self.lane_of.get(label) is not lane:
                continue
            if kind == "end":
                usage.end(t)
                continue
            assert usage.blocked_until(lane, t) <= t, (
                f"{label} started at {t} in {lane.name} at its limit: running {usage.running},"
                f" starts {usage.starts}, last end {usage.last_end}"
            )
            usage.start(t)
        return usage

    def check_lane_limits(self, journal: list[tuple[str, str, float]]) -> None:
        for _, lane in self.lanes:
            self.lane_usage(journal, lane)

    def check_nothing_startable_waits(self, journal: list[tuple[str, str, float]]) -> None:
        """With a worker idle, every task that is due and not expired waits for its lane."""
        lanes = {lane.name: lane for _, lane in self.lanes}
        now = self.m.now
        for waiting in self.ex.waiting():
            if waiting.due_in > 0 or (waiting.expires_in is not None and waiting.expires_in <= 0):
                continue
            assert waiting.lane is not None, f"{waiting} waits with a worker idle"
            lane = lanes[waiting.lane]
            usage = self.lane_usage(journal, lane)
            assert usage.blocked_until(lane, now) > now, f"{waiting} waits with a worker idle"

    # -- rules ----------------------------------------------------------------------------

    def submit_one(
        self,
        priority: int | None,
        delay: int | None,
        expires: int | None,
        lane: tuple[Lane, MLane] | None = None,
    ) -> None:
        label = f"t{next(self.labels)}"
        kwargs: dict[str, Any] = {"priority": priority}
        if delay is not None:
            kwargs["delay"] = delay
        deadline = None
        if expires is not None:
            kwargs["expires"] = (delay or 0) + expires  # always after the due time
            deadline = self.m.now + kwargs["expires"]
        target: PriorityExecutor | Lane = self.ex if lane is None else lane[0]
        if self.m.closed:
            with pytest.raises(RuntimeError, match="cannot schedule new futures after shutdown"):
                target.submit(self.g.body, label, **kwargs)
        else:
            future = target.submit(self.g.body, label, **kwargs)
            mlane = None if lane is None else lane[1]
            task = self.m.submit(label, priority, self.m.now + (delay or 0), deadline, mlane)
            self.futures.append((future, task))
            if mlane is not None:
                self.lane_of[label] = mlane
        self.sync()

    @rule(priority=PRIORITIES, delay=DELAYS, expires=EXPIRES)
    def submit(self, priority: int, delay: int | None, expires: int | None) -> None:
        self.submit_one(priority, delay, expires)

    @rule(tasks=st.lists(st.tuples(PRIORITIES, DELAYS, EXPIRES), min_size=2, max_size=4))
    def submit_several(self, tasks: list[tuple[int, int | None, int | None]]) -> None:
        for priority, delay, expires in tasks:
            self.submit_one(priority, delay, expires)

    @precondition(lambda self: self.model is not None and not self.model.closed)
    @precondition(lambda self: len(self.lanes) < 3)
    @rule(options=LANE_OPTIONS)
    def make_lane(self, options: dict[str, Any]) -> None:
        self.add_lane(options)

    def add_lane(self, options: dict[str, Any]) -> None:
        name = f"L{len(self.lanes)}"
        self.lanes.append((self.ex.lane(name, **options), self.m.add_lane(name, **options)))

    # Tasks due at once, more than a lane's limits let start: some are throttled.
    @precondition(lambda self: self.lanes)
    @rule(index=st.integers(0, 2), priorities=st.lists(PRIORITIES, min_size=2, max_size=5))
    def submit_burst_to_lane(self, index: int, priorities: list[int]) -> None:
        lane = self.lanes[index % len(self.lanes)]
        for priority in priorities:
            self.submit_one(priority, None, None, lane)

    # None: the lane's default priority.
    @precondition(lambda self: self.lanes)
    @rule(
        index=st.integers(0, 2),
        tasks=st.lists(
            st.tuples(st.one_of(st.none(), PRIORITIES), DELAYS, EXPIRES), min_size=1, max_size=4
        ),
    )
    def submit_to_lane(
        self, index: int, tasks: list[tuple[int | None, int | None, int | None]]
    ) -> None:
        lane = self.lanes[index % len(self.lanes)]
        for priority, delay, expires in tasks:
            self.submit_one(priority, delay, expires, lane)

    @rule(
        priority=st.sampled_from([-10, 0, 10]),
        delay=st.one_of(st.none(), st.integers(0, 3)),
        interval=st.integers(1, 3),
        fixed_rate=st.booleans(),
    )
    def submit_recurring(
        self, priority: int, delay: int | None, interval: int, fixed_rate: bool
    ) -> None:
        self.submit_series(priority, delay, interval, fixed_rate)

    # A second rule, for series that run at once on a grid that long runs overrun.
    @rule(priority=st.sampled_from([0, 10]), interval=st.integers(1, 2))
    def submit_fixed_rate_now(self, priority: int, interval: int) -> None:
        self.submit_series(priority, None, interval, True)

    def submit_series(
        self, priority: int, delay: int | None, interval: int, fixed_rate: bool
    ) -> None:
        label = f"s{next(self.labels)}"
        kwargs: dict[str, Any] = {
            "priority": priority,
            "interval": interval,
            "fixed_rate": fixed_rate,
        }
        if delay is not None:
            kwargs["delay"] = delay
        if self.m.closed:
            with pytest.raises(RuntimeError, match="cannot schedule new futures after shutdown"):
                self.ex.submit_recurring(self.g.body, label, **kwargs)
        else:
            future = self.ex.submit_recurring(self.g.body, label, **kwargs)
            series = MSeries(label, priority, self.m.now + (delay or 0), interval, fixed_rate)
            self.m.submit_recurring(series)
            self.series_futures.append((future, series))
        self.sync()

    @precondition(lambda self: self.futures)
    @rule(index=st.integers(0, 200))
    def cancel(self, index: int) -> None:
        future, task = self.futures[index % len(self.futures)]
        expected = self.m.cancel_task(task)
        assert future.cancel() is expected
        self.sync()

    @precondition(lambda self: self.series_futures)
    @rule(index=st.integers(0, 200))
    def cancel_series(self, index: int) -> None:
        future, series = self.series_futures[index % len(self.series_futures)]
        expected = self.m.cancel_series(series)
        assert future.cancel() is expected
        self.sync()

    @rule(seconds=st.sampled_from([0, 0.5, 1, 1, 2, 3, 5]))
    def advance(self, seconds: float) -> None:
        assert self.clock is not None
        self.clock.advance(seconds)
        self.m.advance(seconds)
        self.sync()

    # Time passing while tasks run: deadlines of waiting tasks pass, a fixed-rate series
    # overruns its slots, lane windows and cooldowns pass.
    @precondition(lambda self: self.model is not None and self.model.running)
    @rule(seconds=st.sampled_from([2, 4, 7]))
    def advance_while_running(self, seconds: float) -> None:
        self.advance(seconds)

    def release_running(self, index: int, error: type[Exception] | None) -> None:
        task = self.m.running[index % len(self.m.running)]
        self.g.release(task.label, error)
        self.m.release(task, error)
        self.sync()

    # Three rules, so that releasing a worker is drawn about as often as advancing time.
    @precondition(lambda self: self.model is not None and self.model.running)
    @rule(index=st.integers(0, 2))
    def release(self, index: int) -> None:
        self.release_running(index, None)

    # A series' run fails with Fatal only (see Fatal).
    @precondition(lambda self: self.model is not None and self.model.running)
    @rule(index=st.integers(0, 2))
    def release_failing(self, index: int) -> None:
        task = self.m.running[index % len(self.m.running)]
        self.release_running(index, Fatal if task.series else Boom)

    @precondition(lambda self: self.model is not None and self.model.running)
    @rule(index=st.integers(0, 2))
    def release_fatally(self, index: int) -> None:
        self.release_running(index, Fatal)

    # Not too early: most of what there is to check happens while the executor is open.
    @precondition(lambda self: self.submitted() >= 8 and self.shutdowns < 2)
    @rule(cancel_futures=st.booleans())
    def shutdown(self, cancel_futures: bool) -> None:
        self.shutdowns += 1
        self.ex.shutdown(wait=False, cancel_futures=cancel_futures)
        self.m.shutdown(cancel_futures)
        self.sync()

    @precondition(
        lambda self: (
            self.model is not None
            and not self.model.running
            and self.submitted() >= 8
            and self.shutdowns < 2
        )
    )
    @rule()
    def shutdown_wait(self) -> None:
        self.shutdowns += 2
        # Nothing runs and nothing is left to wait for: wait=True must return at once.
        self.m.shutdown(cancel_futures=True)
        joiner = threading.Thread(
            target=self.ex.shutdown, kwargs={"wait": True, "cancel_futures": True}
        )
        joiner.start()
        joiner.join(SYNC_TIMEOUT)
        assert not joiner.is_alive(), "shutdown(wait=True) hung with nothing left to run"
        assert executor_threads(self.prefix) == []
        self.sync()

    @invariant()
    def workers_run_only_what_the_model_says(self) -> None:
        if self.executor is not None:
            self.check()

    def teardown(self) -> None:
        if self.executor is None:
            return
        self.g.open_all()
        joiner = threading.Thread(
            target=self.ex.shutdown, kwargs={"wait": True, "cancel_futures": True}
        )
        joiner.start()
        joiner.join(SYNC_TIMEOUT)
        assert not joiner.is_alive(), "shutdown(wait=True) hung at teardown"
        stats = self.ex.stats()
        assert (stats.scheduled, stats.ready, stats.throttled, stats.running) == (0, 0, 0, 0)
        assert executor_threads(self.prefix) == []
        for future, _ in self.futures:
            assert future.done()


def check_future(future: Future[Any], task: MTask) -> None:
    label, state = task.label, task.state
    if state in WAITING or (state == "running" and task.retry is not None):
        # A task with a retry policy is not marked running: cancel() wins during an attempt.
        assert future.cancelled() if task.cancel_requested else not future.done(), (label, state)
        assert not future.running(), (label, state, future)
    elif state == "running":
        assert future.running(), (label, future)
    elif state == "completed":
        assert future.done() and future.result(timeout=0) == label, (label, future)
    elif state == "failed" or (task.error is not None and state == "expired"):
        assert task.error is not None
        exc = future.exception(timeout=0)
        assert type(exc) is task.error[0] and exc.args == task.error[1], (label, state, exc)
    else:
        assert state in ("cancelled", "expired"), state
        assert future.cancelled(), (label, state, future)
        # Reported to wait() at once, not when a worker would have reached it.
        assert futures_wait([future], timeout=0).done == {future}, (label, future)
        with pytest.raises(CancelledError):
            future.result(timeout=0)


def check_series_future(future: Future[Any], series: MSeries) -> None:
    if series.state == "live":
        assert not future.done(), (series.label, future)
    elif series.state == "cancelled":
        assert future.cancelled(), (series.label, future)
        assert futures_wait([future], timeout=0).done == {future}
    else:
        exc: BaseException | None = future.exception(timeout=0)
        assert isinstance(exc, Fatal) and exc.args[0] == series.label, (series.label, future)


@pytest.mark.timeout(120)  # passes in seconds; a failure may take longer to shrink
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_executor_follows_the_reference_model(policy: str) -> None:
    machine = type(f"ExecutorMachine_{policy}", (ExecutorMachine,), {"policy": policy})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=30,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
