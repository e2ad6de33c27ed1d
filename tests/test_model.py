"""Model-based test: the executor against a plain reference model, step by step.

One worker, a ``ManualClock`` and tasks that block until the test releases them make the
executor deterministic: at every step the model (a few sorted lists) predicts which task
the worker runs, the state of every future, and every count of ``stats()``.

Every task records its label when it starts, then waits for its own gate. The test opens
the gate of the running task only ("release"), and then waits until the worker has started
the task the model predicts next, or, if the model predicts none, until the executor shows
the state the model predicts (bounded). That wait is for the worker thread to act, never for
a due time. Each policy gets its own run of examples.
"""

from __future__ import annotations

import itertools
import math
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
    PriorityExecutor,
    PriorityFirst,
)
from priority_executor.testing import ManualClock

SYNC_TIMEOUT = 5.0  # seconds for the worker thread to act; never reached unless broken
SETTLE_TIMEOUT = 2.0  # seconds for an idle worker's last steps; also reached only if broken
STUCK_TIMEOUT = 0.5  # seconds with nothing running or ready, when a start is predicted
GATE_TIMEOUT = 30.0  # a task left blocked by a broken test gives up after this

WAITING = ("pending", "ready")

PRIORITIES = st.sampled_from([-10, 0, 0, 3, 10])
DELAYS = st.one_of(st.none(), st.integers(0, 4))
EXPIRES = st.one_of(st.none(), st.integers(1, 4))


class Boom(Exception):
    """What a task raises when the test releases it with ``fail=True``."""


# -- the reference model ------------------------------------------------------------------


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
    ) -> None:
        self.label = label
        self.seq = seq
        self.priority = priority
        self.due = due
        self.deadline = deadline
        self.series = series
        # pending, ready, running, completed, failed, cancelled, expired
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
    def __init__(self, policy: str, now: float) -> None:
        self.key = POLICIES[policy][1]
        self.now = now
        self.seq = itertools.count()
        self.tasks: list[MTask] = []  # every task and run ever queued
        self.series: list[MSeries] = []
        self.running: MTask | None = None
        self.log: list[str] = []
        self.closed = False
        self.completed = self.failed = self.cancelled = self.expired = 0

    def waiting(self) -> list[MTask]:
        return [t for t in self.tasks if t.state in WAITING]

    def queue(self, task: MTask) -> None:
        self.tasks.append(task)
        task.state = "ready" if task.due <= self.now else "pending"

    def submit(self, label: str, priority: int, due: float, deadline: float | None) -> MTask:
        task = MTask(label, next(self.seq), priority, due, deadline)
        self.queue(task)
        self.start_next()
        return task

    def submit_recurring(self, series: MSeries) -> None:
        self.series.append(series)
        self.queue_run(series, series.first_due)
        self.start_next()

    def queue_run(self, series: MSeries, due: float) -> None:
        series.run = MTask(series.label, next(self.seq), series.priority, due, None, series)
        self.queue(series.run)

    def start_next(self) -> None:
        """The worker, if idle, takes the ready task with the smallest key."""
        if self.running is not None:
            return
        ready = [t for t in self.tasks if t.state == "ready"]
        if ready:
            task = min(ready, key=lambda t: (*self.key(t), t.seq))
            task.state = "running"
            self.running = task
            self.log.append(task.label)

    def advance(self, seconds: float) -> None:
        self.now += seconds
        for task in self.waiting():
            if task.deadline is not None and task.deadline <= self.now:
                task.state = "expired"
                self.expired += 1
            elif task.state == "pending" and task.due <= self.now:
                task.state = "ready"
        self.start_next()

    def release(self, fail: bool) -> None:
        task = self.running
        assert task is not None
        self.running = None
        task.state = "failed" if fail else "completed"
        if fail:
            self.failed += 1
        else:
            self.completed += 1
        series = task.series
        if series is not None and series.state == "live":
            if fail:
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

    def cancel_task(self, task: MTask) -> bool:
        if task.state in WAITING:
            task.state = "cancelled"
            self.cancelled += 1
            return True
        return task.state in ("cancelled", "expired")

    def cancel_series(self, series: MSeries) -> bool:
        if series.state == "live":
            series.state = "cancelled"
            self.cancelled += 1  # the series counts once in cancelled...
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
            for task in self.waiting():
                task.state = "cancelled"
                self.cancelled += 1

    def stats(self) -> ExecutorStats:
        return ExecutorStats(
            scheduled=sum(t.state == "pending" for t in self.tasks),
            ready=sum(t.state == "ready" for t in self.tasks),
            throttled=0,
            running=int(self.running is not None),
            completed=self.completed,
            failed=self.failed,
            cancelled=self.cancelled,
            expired=self.expired,
        )


# -- the executor side ----------------------------------------------------------------------


class Gates:
    """Task bodies that record their start, then wait for the test to release them."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.log: list[str] = []
        self.gates: list[tuple[threading.Event, list[bool]]] = []
        self.open = False  # at teardown: nothing blocks any more

    def body(self, label: str) -> str:
        gate = threading.Event()
        fail: list[bool] = []
        with self.cond:
            self.log.append(label)
            self.gates.append((gate, fail))
            self.cond.notify_all()
            if self.open:
                gate.set()
        if not gate.wait(GATE_TIMEOUT):
            raise RuntimeError(f"task {label} was never released")
        if fail:
            raise Boom(label)
        return label

    def release_last(self, fail: bool) -> None:
        with self.cond:
            gate, flag = self.gates[-1]
        if fail:
            flag.append(True)
        gate.set()

    def open_all(self) -> None:
        with self.cond:
            self.open = True
            for gate, _ in self.gates:
                gate.set()


def executor_threads(prefix: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(prefix + "_")]


_names = itertools.count()


class ExecutorMachine(RuleBasedStateMachine):
    policy = "PriorityFirst"  # a key of POLICIES; each test sets its own

    def __init__(self) -> None:
        super().__init__()
        self.gates = Gates()
        self.prefix = f"pe-model-{next(_names)}"
        self.executor: PriorityExecutor | None = None
        self.model: Model | None = None
        self.clock: ManualClock | None = None
        self.futures: list[tuple[Future[Any], MTask]] = []
        self.series_futures: list[tuple[Future[Any], MSeries]] = []
        self.labels = itertools.count()
        self.shutdowns = 0

    @initialize(start=st.sampled_from([0.0, 1000.0, -50.0]))
    def build(self, start: float) -> None:
        policy = self.policy
        self.clock = ManualClock(start)
        self.executor = PriorityExecutor(
            max_workers=1,
            thread_name_prefix=self.prefix,
            policy=POLICIES[policy][0](),
            clock=self.clock,
        )
        self.model = Model(policy, start)

    # -- helpers ---------------------------------------------------------------------------

    @property
    def ex(self) -> PriorityExecutor:
        assert self.executor is not None
        return self.executor

    @property
    def m(self) -> Model:
        assert self.model is not None
        return self.model

    def sync(self) -> None:
        """Wait until the worker has done what the model predicts it does next."""
        if self.m.running is not None:
            self.wait_started(len(self.m.log))
            # Before it starts the next task, the worker has finished the previous one.
            self.check()
            return
        # The worker ends a task in steps (count it, complete its future, queue a series'
        # next run, go idle) that the test cannot wait for one by one: wait until the
        # executor shows what the model predicts, or fail with the difference.
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
        """Wait until the worker has started ``count`` tasks. Fail early if it cannot: with
        no task running and none ready for a while, none will start without the test (the
        worker passes through that state only for an instant, between counting a series'
        run and queueing the next one)."""
        gates = self.gates
        end = time.monotonic() + SYNC_TIMEOUT
        stuck_since = None
        while True:
            with gates.cond:
                if gates.cond.wait_for(lambda: len(gates.log) >= count, 0.002):
                    return
            now = time.monotonic()
            stats = self.ex.stats()
            if stats.running or stats.ready:
                stuck_since = None
            elif stuck_since is None:
                stuck_since = now
            stuck = stuck_since is not None and now - stuck_since > STUCK_TIMEOUT
            assert not stuck, f"the model predicts task #{count} runs; executor: {stats}"
            assert now < end, f"the worker never started task #{count}: {stats}"

    def submitted(self) -> int:
        return len(self.futures) + len(self.series_futures)

    def check(self) -> None:
        m = self.m
        with self.gates.cond:
            log = list(self.gates.log)
        assert log == m.log, "the worker ran tasks in another order than the model"
        assert self.ex.stats() == m.stats()
        for future, task in self.futures:
            check_future(future, task.state, task.label)
        for future, series in self.series_futures:
            check_series_future(future, series)

    # -- rules ----------------------------------------------------------------------------

    def submit_one(self, priority: int, delay: int | None, expires: int | None) -> None:
        label = f"t{next(self.labels)}"
        kwargs: dict[str, Any] = {"priority": priority}
        if delay is not None:
            kwargs["delay"] = delay
        deadline = None
        if expires is not None:
            kwargs["expires"] = (delay or 0) + expires  # always after the due time
            deadline = self.m.now + kwargs["expires"]
        if self.m.closed:
            with pytest.raises(RuntimeError, match="cannot schedule new futures after shutdown"):
                self.ex.submit(self.gates.body, label, **kwargs)
        else:
            future = self.ex.submit(self.gates.body, label, **kwargs)
            task = self.m.submit(label, priority, self.m.now + (delay or 0), deadline)
            self.futures.append((future, task))
        self.sync()

    @rule(priority=PRIORITIES, delay=DELAYS, expires=EXPIRES)
    def submit(self, priority: int, delay: int | None, expires: int | None) -> None:
        self.submit_one(priority, delay, expires)

    @rule(tasks=st.lists(st.tuples(PRIORITIES, DELAYS, EXPIRES), min_size=2, max_size=4))
    def submit_several(self, tasks: list[tuple[int, int | None, int | None]]) -> None:
        for priority, delay, expires in tasks:
            self.submit_one(priority, delay, expires)

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
                self.ex.submit_recurring(self.gates.body, label, **kwargs)
        else:
            future = self.ex.submit_recurring(self.gates.body, label, **kwargs)
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

    # Time passing while a task runs: deadlines of waiting tasks pass, a fixed-rate series
    # overruns its slots.
    @precondition(lambda self: self.model is not None and self.model.running is not None)
    @rule(seconds=st.sampled_from([2, 4, 7]))
    def advance_while_running(self, seconds: float) -> None:
        self.advance(seconds)

    def release_running(self, fail: bool) -> None:
        self.gates.release_last(fail)
        self.m.release(fail)
        self.sync()

    # Two rules, so that releasing the worker is drawn about as often as advancing time.
    @precondition(lambda self: self.model is not None and self.model.running is not None)
    @rule()
    def release(self) -> None:
        self.release_running(fail=False)

    @precondition(lambda self: self.model is not None and self.model.running is not None)
    @rule()
    def release_failing(self) -> None:
        self.release_running(fail=True)

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
            and self.model.running is None
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
    def worker_runs_only_what_the_model_says(self) -> None:
        if self.executor is not None:
            self.check()

    def teardown(self) -> None:
        self.gates.open_all()
        if self.executor is None:
            return
        joiner = threading.Thread(
            target=self.ex.shutdown, kwargs={"wait": True, "cancel_futures": True}
        )
        joiner.start()
        joiner.join(SYNC_TIMEOUT)
        assert not joiner.is_alive(), "shutdown(wait=True) hung at teardown"
        stats = self.ex.stats()
        assert (stats.scheduled, stats.ready, stats.running) == (0, 0, 0), stats
        assert executor_threads(self.prefix) == []
        for future, _ in self.futures:
            assert future.done()


def check_future(future: Future[Any], state: str, label: str) -> None:
    if state in WAITING:
        assert not future.done() and not future.running(), (label, state, future)
    elif state == "running":
        assert future.running(), (label, future)
    elif state == "completed":
        assert future.done() and future.result(timeout=0) == label, (label, future)
    elif state == "failed":
        exc = future.exception(timeout=0)
        assert isinstance(exc, Boom) and exc.args == (label,), (label, future)
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
        assert isinstance(exc, Boom) and exc.args == (series.label,), (series.label, future)


@pytest.mark.timeout(120)  # passes in seconds; a failure may take longer to shrink
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_executor_follows_the_reference_model(policy: str) -> None:
    machine = type(f"ExecutorMachine_{policy}", (ExecutorMachine,), {"policy": policy})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=50,
            stateful_step_count=30,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
