"""Races forced both ways: each test pauses one side at the step that the race turns on.

The pause is a hook on the scheduler (an instance attribute replaced for one executor, or
its intake deque swapped for a subclass), never a sleep: the other side runs to completion
while the first one waits, so each interleaving happens every time.
"""

from __future__ import annotations

import datetime
import threading
from collections import deque
from concurrent.futures import Executor, Future
from contextlib import nullcontext
from typing import Any, Callable

import pytest
from helpers import (
    TIMEOUT,
    blocked_worker,
    call_bounded,
    in_thread,
    shutdown_bounded,
    wait_until,
)

from priority_executor import PriorityExecutor
from priority_executor.testing import ManualClock


class Pause:
    """A point where one thread waits, once, until the test lets it go on."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.go_on = threading.Event()
        self._used = False

    def __call__(self) -> None:
        if self._used:
            return
        self._used = True
        self.reached.set()
        assert self.go_on.wait(TIMEOUT)


def pause_before(fn: Callable[..., Any], pause: Pause) -> Callable[..., Any]:
    def paused(*args: Any, **kwargs: Any) -> Any:
        pause()
        return fn(*args, **kwargs)

    return paused


class PausingIntake(deque):  # type: ignore[type-arg]
    """The intake deque, pausing the first submitter right after its append."""

    def __init__(self, pause: Pause) -> None:
        super().__init__()
        self.pause = pause

    def append(self, entry: Any) -> None:
        super().append(entry)
        self.pause()


class PausingBeforeIntake(deque):  # type: ignore[type-arg]
    """The intake deque, pausing the first submitter right before its append."""

    def __init__(self, pause: Pause) -> None:
        super().__init__()
        self.pause = pause

    def append(self, entry: Any) -> None:
        self.pause()
        super().append(entry)


def submit_in_thread(ex: Executor, fn: Callable[[], object]) -> dict[str, Any]:
    outcome: dict[str, Any] = {}

    def submit() -> None:
        try:
            outcome["future"] = ex.submit(fn)
        except BaseException as exc:
            outcome["error"] = exc

    outcome["thread"] = in_thread(submit)
    return outcome


def shutdown_returns_after_what_it_accepted(outcome: dict[str, Any], log: list[str]) -> None:
    """The promise: a submit that returned is waited for by shutdown(wait=True); one that
    raised left nothing behind."""
    outcome["thread"].join(TIMEOUT)
    assert not outcome["thread"].is_alive()
    if "future" in outcome:
        future: Future[Any] = outcome["future"]
        assert future.done() and future.result(timeout=0) is None
        assert log == ["ran", "shutdown returned"]
    else:
        assert isinstance(outcome["error"], RuntimeError)
        assert log == ["shutdown returned"]


@pytest.mark.parametrize("workers", ["none yet", "one busy"])
def test_submit_paused_after_its_open_check_while_shutdown_completes(workers: str) -> None:
    """Shutdown first: it closes intake and returns while the submit waits between its
    check that intake is open and the append of its task to the intake. The submit then
    raises, and its task never runs, even though it finds room to start a worker."""
    ex = PriorityExecutor(2)
    log: list[str] = []
    scheduler = ex._scheduler
    pause = Pause()
    # Set before any worker starts, which holds on to the intake; armed once one is busy.
    pause._used = True
    scheduler.intake = PausingBeforeIntake(pause)  # type: ignore[assignment]
    with blocked_worker(ex) if workers == "one busy" else nullcontext() as blocker:
        pause._used = False
        outcome = submit_in_thread(ex, lambda: log.append("ran"))
        assert pause.reached.wait(TIMEOUT)
        if blocker is not None:
            blocker[0].set()
        ex.shutdown(wait=True)
        log.append("shutdown returned")
        pause.go_on.set()
        shutdown_returns_after_what_it_accepted(outcome, log)
    assert "future" not in outcome
    assert ex.stats().running == ex.stats().ready == 0


@pytest.mark.parametrize("workers", ["none yet", "one busy"])
def test_submit_paused_before_starting_its_worker_while_shutdown_completes(
    workers: str,
) -> None:
    """The submit's task is in the intake, and the submit waits to start a worker for it
    (none is idle) while shutdown(wait=True) runs: shutdown finds the task accepted and
    returns only once it ran, with no help from the paused submit, which then returns."""
    ex = PriorityExecutor(2)
    log: list[str] = []
    pause = Pause()
    with blocked_worker(ex) if workers == "one busy" else nullcontext() as blocker:
        workers_ = ex._scheduler.workers
        workers_.start_worker = pause_before(workers_.start_worker, pause)  # type: ignore[method-assign]
        outcome = submit_in_thread(ex, lambda: log.append("ran"))
        assert pause.reached.wait(TIMEOUT)
        if blocker is not None:
            blocker[0].set()
        shutdown_bounded(ex)
        log.append("shutdown returned")
        pause.go_on.set()
        shutdown_returns_after_what_it_accepted(outcome, log)
    assert "future" in outcome
    assert ex.stats().completed == (2 if workers == "one busy" else 1)


@pytest.mark.parametrize("closing", ["the executor", "its lane"])
def test_submit_paused_after_queueing_while_shutdown_closes(closing: str) -> None:
    """Shutdown second: the task is in the intake when shutdown (of the executor, or of the
    task's lane) closes it, and the submit has not yet looked again. Either the submit
    takes its task back and raises, or a worker started it, the submit returns, and
    shutdown(wait=True) waits for it."""
    ex = PriorityExecutor(1)
    assert ex.submit(int).result(timeout=TIMEOUT) == 0  # a worker, idle
    lane = None if closing == "the executor" else ex.lane(max_running=1)
    target: Executor = ex if lane is None else lane
    log: list[str] = []
    pause = Pause()
    ex._scheduler.intake = PausingIntake(pause)  # type: ignore[assignment]
    outcome = submit_in_thread(target, lambda: log.append("ran"))
    assert pause.reached.wait(TIMEOUT)

    def shutdown() -> None:
        target.shutdown(wait=True)
        log.append("shutdown returned")

    closing_thread = in_thread(shutdown)
    wait_until(
        lambda: ex._scheduler.closed is not None if lane is None else lane._state.closed,
        what="shutdown to close",
    )
    pause.go_on.set()
    closing_thread.join(TIMEOUT)
    assert not closing_thread.is_alive()
    shutdown_returns_after_what_it_accepted(outcome, log)
    if lane is not None:
        stats = lane.stats()
        assert stats.ready == stats.running == 0
        assert stats.completed == (1 if "future" in outcome else 0)
        ex.shutdown()


@pytest.mark.parametrize("max_waiting", [None, 1])
def test_lane_submit_paused_after_its_open_check_while_the_lane_shuts_down(
    max_waiting: int | None,
) -> None:
    """The lane's shutdown first: it finds the lane idle and returns while a submit to the
    lane waits between its check that the lane is open and its append to the intake. The
    submit then raises, and its task never runs, though the worker woken for it drains the
    intake before the submit looks again. With ``max_waiting``, the room it held is free
    again."""
    with PriorityExecutor(1, max_waiting=max_waiting) as ex:
        scheduler = ex._scheduler
        before_append, before_look = Pause(), Pause()
        # After the open check: the append to the intake. Set before the worker starts,
        # which holds on to the intake; armed once it is idle.
        before_append._used = True
        scheduler.intake = PausingBeforeIntake(before_append)  # type: ignore[assignment]
        assert ex.submit(int).result(timeout=TIMEOUT) == 0  # a worker, idle
        before_append._used = False
        lane = ex.lane(max_running=1)
        log: list[str] = []
        scheduler._take_back = pause_before(scheduler._take_back, before_look)  # type: ignore[method-assign]
        outcome = submit_in_thread(lane, lambda: log.append("ran"))
        assert before_append.reached.wait(TIMEOUT)
        lane.shutdown(wait=True)
        log.append("shutdown returned")
        before_append.go_on.set()
        assert before_look.reached.wait(TIMEOUT)
        wait_until(lambda: not scheduler.intake, what="the worker to drain the intake")
        before_look.go_on.set()
        shutdown_returns_after_what_it_accepted(outcome, log)
        go_on = call_bounded(lambda: ex.submit(int), "the next submit")
        assert go_on.result(timeout=TIMEOUT) == 0  # the executor goes on
        assert lane.stats() == ex.lane().stats()  # nothing of it counted, anywhere
        assert ex.stats().completed == 2


def test_submit_paused_before_queueing_while_the_clock_advances_past_its_due_time() -> None:
    """advance() first: the submit read the time before it and computed its due time from
    it, so advance() never saw the task. When the submit returns, the task is due all the
    same: it runs without another advance()."""
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        pause = Pause()
        scheduler = ex._scheduler
        scheduler.add = pause_before(scheduler.add, pause)  # type: ignore[method-assign]
        ran = threading.Event()
        outcome: dict[str, Any] = {}
        submitter = in_thread(lambda: outcome.update(future=ex.submit(ran.set, delay=1)))
        assert pause.reached.wait(TIMEOUT)
        clock.advance(2)
        pause.go_on.set()
        submitter.join(TIMEOUT)
        assert ran.wait(TIMEOUT), "a task due by the clock's time waits for the next advance()"
        assert outcome["future"].result(timeout=TIMEOUT) is None


def test_submit_queued_before_the_clock_advances_past_its_due_time() -> None:
    """The submit first: advance() finds the task in the pending heap and promotes it."""
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        future = ex.submit(int, delay=1)
        assert ex.stats().scheduled == 1
        clock.advance(2)
        assert future.result(timeout=TIMEOUT) == 0


def test_the_last_task_ends_while_another_worker_holds_the_lock_to_look() -> None:
    """Worker A, in take() with the lock, finds the executor closed but not finished: the
    last task still runs in worker B. Before A releases the lock, B counts that task's end
    (in its tally, without the lock) and, finding the lock held by a worker in take(), parks
    behind A without a look of its own. A, parking in turn, must see to it that someone
    looks again: else both sleep, and shutdown(wait=True) waits for ever."""
    ex = PriorityExecutor(2)
    scheduler = ex._scheduler
    threads: dict[str, threading.Thread] = {}
    started = {name: threading.Event() for name in "AB"}
    go_on = {name: threading.Event() for name in "AB"}

    def body(name: str) -> str:
        threads[name] = threading.current_thread()
        started[name].set()
        assert go_on[name].wait(TIMEOUT)
        return name

    b = ex.submit(body, "B")
    assert started["B"].wait(TIMEOUT)
    a = ex.submit(body, "A")
    assert started["A"].wait(TIMEOUT)
    pause = Pause()
    finished = scheduler._finished

    def finished_then_pause() -> bool:
        done = finished()
        if not done and threading.current_thread() is threads["A"]:
            pause()  # A holds the lock, and took B's task for running
        return done

    scheduler._finished = finished_then_pause  # type: ignore[method-assign]
    try:
        closing = in_thread(ex.shutdown)  # wait=True: it looks once, now, then waits
        wait_until(lambda: scheduler.closed is not None, what="shutdown to close intake")
        go_on["A"].set()
        assert pause.reached.wait(TIMEOUT)
        go_on["B"].set()
        wait_until(lambda: scheduler.workers.idle, what="B to park behind A")
        pause.go_on.set()
        closing.join(TIMEOUT)
        assert not closing.is_alive(), "shutdown(wait=True) hung: no one looked again"
    finally:
        for event in (*go_on.values(), pause.go_on):
            event.set()
        shutdown_bounded(ex)  # looks again itself: ends the executor even if that hung
    assert (a.result(timeout=0), b.result(timeout=0)) == ("A", "B")
    assert ex.stats().running == 0


def test_a_lanes_run_ends_while_the_worker_that_throttled_its_next_task_holds_the_lock() -> None:
    """Worker B, in take() with the lock, throttles a lane's task: the lane's one run goes
    on in worker A. Before B releases the lock, A's run ends: with a task of its lane
    throttled, A counts the end under the lock, before its future completes (so that the
    throttled task starts at once, not after the future's callbacks), and so waits for B
    to let go of it. Whichever comes first, the throttled task, to which that end gives
    the lane's room back, starts."""
    ex = PriorityExecutor(2)
    scheduler = ex._scheduler
    lane = ex.lane(max_running=1)
    worker_a: list[threading.Thread] = []
    running, go_on = threading.Event(), threading.Event()

    def first() -> None:
        worker_a.append(threading.current_thread())
        running.set()
        assert go_on.wait(TIMEOUT)

    a = lane.submit(first)
    assert running.wait(TIMEOUT)
    assert ex.submit(int).result(timeout=TIMEOUT) == 0  # starts B, A being busy
    wait_until(lambda: len(scheduler.workers.idle) == 1, what="B to park, idle")
    pause = Pause()
    finished = scheduler._finished

    def finished_then_pause() -> bool:
        me = threading.current_thread()
        if me in scheduler.workers.threads and me is not worker_a[0]:
            pause()  # B holds the lock, and throttled the lane's next task
        return finished()

    scheduler._finished = finished_then_pause  # type: ignore[method-assign]
    try:
        b = lane.submit(int)
        assert pause.reached.wait(TIMEOUT)
        go_on.set()
        pause.go_on.set()
        assert b.result(timeout=TIMEOUT) == 0, "the lane's room came back to no one"
    finally:
        go_on.set()
        pause.go_on.set()
        shutdown_bounded(ex)
    assert a.result(timeout=0) is None


def test_a_lanes_shutdown_while_its_last_run_ended_and_its_future_is_not_yet_done() -> None:
    """A run's end reaches its lane before its future completes (see LaneTally). The
    lane's shutdown(wait=True), coming between the two, counts that end and finds nothing
    of the lane waiting or running: it must still wait for the future, or whoever it
    returns to finds a task of the lane unfinished."""
    with PriorityExecutor(1) as ex:
        scheduler = ex._scheduler
        lane = ex.lane(max_running=1)
        pause = Pause()
        # The run's end: nothing waits for the lane's room, so it is posted; then the
        # worker pauses, with the end posted and the future not yet done.
        scheduler.later = PausingIntake(pause)  # type: ignore[assignment]
        future = lane.submit(int)
        assert pause.reached.wait(TIMEOUT)
        done_when_it_returned: list[bool] = []

        def shut_down() -> None:
            lane.shutdown(wait=True)
            done_when_it_returned.append(future.done())

        shutting = in_thread(shut_down)
        shutting.join(0.1)  # returns at once if it does not wait; else it waits for the run
        pause.go_on.set()
        shutting.join(TIMEOUT)
        assert done_when_it_returned == [True]
        assert future.result(timeout=0) == 0
        assert lane.stats().completed == 1


def test_a_delayed_submit_promotes_the_tasks_due_by_then() -> None:
    """A thread that submits in a loop holds the GIL for the switch interval at a time, so
    a submit that queues a delayed task promotes whatever is due itself, without waiting
    for the promoter (here, the clock's own promotion, held up after the time moved)."""
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        scheduler = ex._scheduler
        due = ex.submit(str, "due", delay=1)
        pause = Pause()
        scheduler.promote_due = pause_before(scheduler.promote_due, pause)  # type: ignore[method-assign]
        advancing = in_thread(clock.advance, 1)
        assert pause.reached.wait(TIMEOUT)  # the time moved; its promotion waits
        later = ex.submit(str, "later", delay=1)
        assert due.result(timeout=TIMEOUT) == "due"
        assert not later.done()
        pause.go_on.set()
        advancing.join(TIMEOUT)
        clock.advance(1)
        assert later.result(timeout=TIMEOUT) == "later"


@pytest.mark.parametrize("step", [-3600, 3600])
def test_a_run_at_submitted_across_a_wall_clock_step_waits_for_its_wall_time(step: int) -> None:
    # The submit turns run_at into a time on the executor's clock before it takes the lock;
    # the wall clock is stepped (and the waiting tasks placed anew) in between. Placed by
    # the offset from before the step, the task would start an hour early, or late.
    wall = 1_800_000_000.0
    clock = ManualClock(wall=wall)
    pause = Pause()
    with PriorityExecutor(max_workers=1, clock=clock) as ex:
        scheduler = ex._scheduler
        scheduler.add = pause_before(scheduler.add, pause)  # type: ignore[method-assign]
        started: Future[float] = Future()
        submitted: list[Future[None]] = []
        submitter = in_thread(
            lambda: submitted.append(
                ex.submit(
                    lambda: started.set_result(clock.wall()),
                    run_at=datetime.datetime.fromtimestamp(wall + 60, datetime.timezone.utc),
                )
            )
        )
        assert pause.reached.wait(TIMEOUT)
        clock.step_wall(step)
        pause.go_on.set()
        submitter.join(TIMEOUT)
        assert submitted
        if step < 0:
            clock.advance(60)
            clock.settle()
            assert not started.done()  # the wall clock shows 59 minutes before run_at
            clock.advance(3600)
        # Forward: the wall clock is past run_at already, and the task due.
        assert started.result(TIMEOUT) >= wall + 60
