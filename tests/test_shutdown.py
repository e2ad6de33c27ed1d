"""shutdown(), with blocks, and interpreter exit."""

from __future__ import annotations

import concurrent.futures as cf
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import Future

import pytest
from helpers import SAY, TIMEOUT, blocked_worker, in_thread, run_script

from priority_executor import PriorityExecutor
from priority_executor.testing import ManualClock

# Scripts write whole lines at once: print() writes its parts separately, and lines
# printed by two threads at the same time could interleave.
SHUTDOWN_MESSAGE = "cannot schedule new futures after shutdown"


# -- no more submissions ---------------------------------------------------------------------


@pytest.mark.parametrize("wait", [True, False])
def test_submit_after_shutdown_raises_runtime_error(wait: bool) -> None:
    ex = PriorityExecutor(2)
    assert ex.submit(int, 1).result(timeout=TIMEOUT) == 1
    ex.shutdown(wait=wait)
    with pytest.raises(RuntimeError, match=SHUTDOWN_MESSAGE):
        ex.submit(int)
    with pytest.raises(RuntimeError, match=SHUTDOWN_MESSAGE):
        ex.submit(int, delay=1)
    with pytest.raises(RuntimeError, match=SHUTDOWN_MESSAGE):
        ex.submit_recurring(int, interval=1)
    with pytest.raises(RuntimeError, match=SHUTDOWN_MESSAGE):
        list(ex.map(int, [1, 2]))
    ex.shutdown(wait=True)


def test_refused_submit_after_shutdown_changes_no_stats() -> None:
    ex = PriorityExecutor(1)
    ex.submit(int).result(timeout=TIMEOUT)
    ex.shutdown()
    before = ex.stats()
    with pytest.raises(RuntimeError):
        ex.submit(int)
    assert ex.stats() == before


def test_shutdown_twice_is_harmless() -> None:
    ex = PriorityExecutor(2)
    future = ex.submit(int, 5)
    ex.shutdown()
    ex.shutdown()
    ex.shutdown(wait=False, cancel_futures=True)
    assert future.result(timeout=0) == 5


def test_shutdown_of_unused_executor() -> None:
    ex = PriorityExecutor(3)
    ex.shutdown(wait=True)
    with pytest.raises(RuntimeError):
        ex.submit(int)
    assert ex.stats().completed == 0


# -- what was submitted still runs -----------------------------------------------------------


def test_delayed_one_shots_still_run_at_their_time_after_shutdown_wait_false() -> None:
    clock = ManualClock()
    ex = PriorityExecutor(2, clock=clock)
    try:
        first = ex.submit(int, 1, delay=5)
        second = ex.submit(int, 2, delay=10)
        ex.shutdown(wait=False)
        assert not first.done()
        assert ex.stats().scheduled == 2
        clock.advance(4)
        assert ex.stats().scheduled == 2
        assert not first.done()
        clock.advance(1)
        assert first.result(timeout=TIMEOUT) == 1
        assert not second.done()
        clock.advance(5)
        assert second.result(timeout=TIMEOUT) == 2
    finally:
        clock.advance(100)
        ex.shutdown(wait=True)
    stats = ex.stats()
    assert (stats.completed, stats.scheduled, stats.cancelled) == (2, 0, 0)


@pytest.mark.parametrize("worker_started", [False, True], ids=["no-worker-yet", "worker"])
def test_shutdown_wait_true_waits_for_delayed_tasks(worker_started: bool) -> None:
    clock = ManualClock()
    ex = PriorityExecutor(2, clock=clock)
    if worker_started:
        assert ex.submit(int).result(timeout=TIMEOUT) == 0
    future = ex.submit(int, 3, delay=60)
    returned = threading.Event()
    thread = in_thread(lambda: (ex.shutdown(wait=True), returned.set()))
    try:
        assert not returned.wait(0.2), "shutdown(wait=True) did not wait for a delayed task"
        assert not future.done()
    finally:
        clock.advance(60)
    assert returned.wait(TIMEOUT)
    thread.join(TIMEOUT)
    assert future.result(timeout=0) == 3


@pytest.mark.timeout(30)
def test_shutdown_wait_true_waits_for_delayed_tasks_real_time() -> None:
    ex = PriorityExecutor(2)
    future = ex.submit(time.monotonic, delay=0.2)
    start = time.monotonic()
    ex.shutdown(wait=True)
    assert future.done()
    assert future.result() >= start


def test_shutdown_wait_true_waits_for_running_and_queued_tasks() -> None:
    ran: list[int] = []
    ex = PriorityExecutor(1)
    with blocked_worker(ex) as (release, blocker):
        queued = [ex.submit(ran.append, i) for i in range(5)]
        returned = threading.Event()
        thread = in_thread(lambda: (ex.shutdown(wait=True), returned.set()))
        assert not returned.wait(0.2)
        release.set()
        assert returned.wait(TIMEOUT)
        thread.join(TIMEOUT)
    # shutdown(wait=True) returned: everything has finished, nothing is left running.
    assert blocker.done()
    assert all(f.done() for f in queued)
    assert ran == [0, 1, 2, 3, 4]
    stats = ex.stats()
    assert (stats.completed, stats.running, stats.ready) == (6, 0, 0)


def test_shutdown_wait_false_returns_at_once_and_queued_tasks_still_run() -> None:
    ran: list[int] = []
    ex = PriorityExecutor(1)
    with blocked_worker(ex) as (release, _):
        queued = [ex.submit(ran.append, i) for i in range(5)]
        start = time.monotonic()
        ex.shutdown(wait=False)
        assert time.monotonic() - start < 2.0
        assert not any(f.done() for f in queued)
        release.set()
        for f in queued:
            f.result(timeout=TIMEOUT)
    assert ran == [0, 1, 2, 3, 4]
    ex.shutdown(wait=True)


# -- cancel_futures --------------------------------------------------------------------------


def test_cancel_futures_cancels_queued_and_delayed_tasks() -> None:
    clock = ManualClock()
    ran: list[str] = []
    ex = PriorityExecutor(1, clock=clock)
    with blocked_worker(ex) as (release, blocker):
        queued = [ex.submit(ran.append, f"q{i}") for i in range(3)]
        delayed = [ex.submit(ran.append, f"d{i}", delay=10 + i) for i in range(3)]
        ex.shutdown(wait=False, cancel_futures=True)
        victims = queued + delayed
        assert all(f.cancelled() for f in victims)
        # wait() and as_completed() see them at once: the worker is still blocked.
        done, not_done = cf.wait(victims, timeout=0)
        assert set(done) == set(victims)
        assert not not_done
        assert set(cf.as_completed(victims, timeout=5)) == set(victims)
        done, not_done = cf.wait([*victims, blocker], timeout=0)
        assert not_done == {blocker}
        assert not blocker.done()
        release.set()
        assert blocker.result(timeout=TIMEOUT) is None  # the running task was not cancelled
    clock.advance(100)
    ex.shutdown(wait=True)
    assert ran == []
    stats = ex.stats()
    assert (stats.cancelled, stats.completed, stats.scheduled, stats.ready) == (6, 1, 0, 0)


def test_cancel_futures_wakes_a_waiter_blocked_before_shutdown() -> None:
    clock = ManualClock()
    ex = PriorityExecutor(1, clock=clock)
    delayed = ex.submit(int, delay=3600)
    box: list[object] = []
    woke = threading.Event()
    thread = in_thread(lambda: (box.append(cf.wait([delayed], timeout=TIMEOUT)), woke.set()))
    ex.shutdown(wait=False, cancel_futures=True)
    assert woke.wait(5)
    thread.join(TIMEOUT)
    done, _ = box[0]  # type: ignore[misc]
    assert done == {delayed}
    assert delayed.cancelled()
    ex.shutdown(wait=True)  # nothing left: returns without advancing the clock


def test_cancel_futures_with_wait_true_waits_only_for_the_running_task() -> None:
    clock = ManualClock()
    ex = PriorityExecutor(1, clock=clock)
    with blocked_worker(ex) as (release, blocker):
        queued = ex.submit(int)
        delayed = ex.submit(int, delay=3600)
        returned = threading.Event()
        thread = in_thread(lambda: (ex.shutdown(wait=True, cancel_futures=True), returned.set()))
        assert not returned.wait(0.2)
        assert queued.cancelled()
        assert delayed.cancelled()
        release.set()
        assert returned.wait(TIMEOUT)  # no clock advance needed: the delayed task is gone
        thread.join(TIMEOUT)
    assert blocker.result(timeout=0) is None


# -- shutdown from inside --------------------------------------------------------------------


@pytest.mark.parametrize("workers", [1, 3])
def test_shutdown_from_inside_a_task(workers: int) -> None:
    ex = PriorityExecutor(workers)
    ran: list[int] = []
    outcome: list[object] = []
    all_submitted = threading.Event()

    def stopper() -> str:
        assert all_submitted.wait(TIMEOUT)
        try:
            ex.shutdown()  # wait=True: a task cannot wait for itself; must not deadlock
            ex.shutdown(wait=True)
        except BaseException as exc:  # pragma: no cover - reported below
            outcome.append(exc)
            raise
        try:
            ex.submit(int)
        except RuntimeError as exc:
            outcome.append(exc)
        return "stopped"

    try:
        futures = [ex.submit(ran.append, i) for i in range(5)]
        stop = ex.submit(stopper)
        futures += [ex.submit(ran.append, i) for i in range(5, 10)]
        all_submitted.set()
        assert stop.result(timeout=TIMEOUT) == "stopped"
        assert len(outcome) == 1
        assert isinstance(outcome[0], RuntimeError)
        for f in futures:
            f.result(timeout=TIMEOUT)  # the remaining tasks still complete
    finally:
        all_submitted.set()
        ex.shutdown(wait=True)
    assert sorted(ran) == list(range(10))


def test_shutdown_with_cancel_futures_from_inside_a_task() -> None:
    ex = PriorityExecutor(1)
    ran: list[int] = []

    def stopper() -> str:
        ex.shutdown(wait=True, cancel_futures=True)
        return "stopped"

    with blocked_worker(ex) as (release, _):
        stop = ex.submit(stopper, priority=1)
        rest = [ex.submit(ran.append, i) for i in range(3)]
        release.set()
        assert stop.result(timeout=TIMEOUT) == "stopped"
    ex.shutdown(wait=True)
    assert all(f.cancelled() for f in rest)
    assert ran == []


def test_shutdown_from_a_done_callback_run_by_a_worker() -> None:
    ex = PriorityExecutor(1)
    errors: list[BaseException] = []
    called = threading.Event()

    def callback(_: Future[object]) -> None:
        try:
            ex.shutdown()  # wait=True, from the worker that completes the future
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        called.set()

    try:
        with blocked_worker(ex) as (release, blocker):
            blocker.add_done_callback(callback)
            rest = [ex.submit(int, i) for i in range(5)]
            release.set()
            assert called.wait(TIMEOUT)
            assert [f.result(timeout=TIMEOUT) for f in rest] == [0, 1, 2, 3, 4]
    finally:
        ex.shutdown(wait=True)
    assert errors == []
    with pytest.raises(RuntimeError):
        ex.submit(int)


def test_shutdown_from_a_done_callback_of_a_cancelled_queued_task() -> None:
    """The callback runs in the thread that calls cancel(): shutdown() must not wait there
    for the blocked worker (the contract: from a done-callback it returns without waiting)."""
    ex = PriorityExecutor(1)
    errors: list[BaseException] = []
    try:
        with blocked_worker(ex) as (release, blocker):
            victim = ex.submit(int)
            after = ex.submit(int, 7)

            def callback(_: Future[object]) -> None:
                try:
                    ex.shutdown()
                except BaseException as exc:  # pragma: no cover - reported below
                    errors.append(exc)

            victim.add_done_callback(callback)
            canceller = in_thread(victim.cancel)
            canceller.join(5)
            assert not canceller.is_alive(), "shutdown() in a done-callback waited for the pool"
            assert not blocker.done()
            release.set()
            assert after.result(timeout=TIMEOUT) == 7
    finally:
        ex.shutdown(wait=True)
    assert errors == []
    assert victim.cancelled()


def test_shutdown_from_a_done_callback_of_a_task_cancelled_by_cancel_futures() -> None:
    clock = ManualClock()
    ex = PriorityExecutor(1, clock=clock)
    errors: list[BaseException] = []
    calls: list[str] = []

    def callback(_: Future[object]) -> None:
        try:
            ex.shutdown(wait=True)
            calls.append("returned")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    with blocked_worker(ex) as (release, _):
        victims = [ex.submit(int, delay=d) for d in (None, 5)]
        for victim in victims:
            victim.add_done_callback(callback)
        done = threading.Event()
        thread = in_thread(lambda: (ex.shutdown(wait=False, cancel_futures=True), done.set()))
        assert done.wait(5), "shutdown() from a done-callback deadlocked"
        thread.join(TIMEOUT)
        release.set()
    ex.shutdown(wait=True)
    assert errors == []
    assert calls == ["returned", "returned"]
    assert all(v.cancelled() for v in victims)


# -- with blocks -----------------------------------------------------------------------------


def test_with_block_waits_for_everything_and_closes() -> None:
    ran: list[int] = []
    with PriorityExecutor(2) as ex:
        futures = [ex.submit(ran.append, i) for i in range(20)]
    assert all(f.done() for f in futures)
    assert sorted(ran) == list(range(20))
    with pytest.raises(RuntimeError):
        ex.submit(int)
    assert ex.stats().completed == 20


def test_with_block_waits_for_delayed_tasks() -> None:
    clock = ManualClock()
    with PriorityExecutor(2, clock=clock) as ex:
        late = ex.submit(int, 8, delay=30)
        advancer = threading.Timer(0.2, clock.advance, args=(30,))
        advancer.start()
    try:
        assert late.done(), "leaving the with block did not wait for a delayed task"
        assert late.result() == 8
    finally:
        advancer.join(TIMEOUT)


def test_with_block_returns_the_executor_and_shuts_down_on_exception() -> None:
    ex = PriorityExecutor(1)
    with pytest.raises(KeyError), ex as entered:
        assert entered is ex
        future = ex.submit(int, 1)
        raise KeyError("boom")
    assert future.result(timeout=0) == 1
    with pytest.raises(RuntimeError):
        ex.submit(int)


# -- recurring series ------------------------------------------------------------------------


def test_shutdown_cancels_recurring_series() -> None:
    clock = ManualClock()
    runs: list[int] = []
    ran = threading.Event()
    ex = PriorityExecutor(2, clock=clock)
    series = ex.submit_recurring(lambda: (runs.append(1), ran.set()), interval=1)
    oneshot = ex.submit(int, 4, delay=10)
    assert ran.wait(TIMEOUT)  # the first run is due now
    ex.shutdown(wait=False)
    assert series.cancelled()
    done, _ = cf.wait([series], timeout=5)
    assert done == {series}
    clock.advance(10)
    assert oneshot.result(timeout=TIMEOUT) == 4  # one-shots still run
    ex.shutdown(wait=True)
    count = len(runs)
    clock.advance(100)
    assert len(runs) == count


# -- interpreter exit ------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_interpreter_exit_runs_a_delayed_task_then_exits() -> None:
    start = time.monotonic()
    proc = run_script(
        """
        import time
        from priority_executor import PriorityExecutor

        ex = PriorityExecutor()
        say("main submits")
        t0 = time.monotonic()
        ex.submit(lambda: say("delayed ran after", time.monotonic() - t0),
                  delay=0.2)
        """
    )
    elapsed = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "main submits"
    assert len(lines) == 2
    assert lines[1].startswith("delayed ran after")
    assert float(lines[1].split()[-1]) >= 0.2
    assert elapsed < 30
    assert proc.stderr == ""


@pytest.mark.timeout(60)
def test_interpreter_exit_completes_queued_work_and_refuses_new_submissions() -> None:
    proc = run_script(
        """
        import threading, time
        from priority_executor import PriorityExecutor

        ex = PriorityExecutor(1)
        gate = threading.Event()

        def first():
            gate.wait(10)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # until the exiting interpreter shuts it down
                try:
                    ex.submit(int)
                except RuntimeError as exc:
                    say("refused:", exc)
                    return
                time.sleep(0.005)
            say("never refused")

        ex.submit(first)
        for i in range(5):
            ex.submit(say, "queued", i)
        ex.submit(say, "delayed", delay=0.3)
        gate.set()
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "refused: cannot schedule new futures after interpreter shutdown",
        *[f"queued {i}" for i in range(5)],
        "delayed",
    ]


@pytest.mark.timeout(60)
def test_interpreter_exit_is_not_kept_alive_by_a_recurring_series() -> None:
    proc = run_script(
        """
        import threading
        from priority_executor import PriorityExecutor

        ex = PriorityExecutor(2)
        ticked = threading.Event()

        def tick():
            say("tick")
            ticked.set()

        ex.submit_recurring(tick, interval=0.05)
        ex.submit(say, "one-shot", delay=0.2)
        assert ticked.wait(10)
        """
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "tick"
    assert "one-shot" in lines
    assert set(lines) == {"tick", "one-shot"}


@pytest.mark.timeout(60)
def test_interpreter_exit_with_explicit_sys_exit_and_an_idle_executor() -> None:
    proc = run_script(
        """
        import sys
        from priority_executor import PriorityExecutor

        ex = PriorityExecutor(4)
        assert ex.submit(int, 1).result() == 1
        sys.exit(3)
        """
    )
    assert proc.returncode == 3, proc.stderr


@pytest.mark.timeout(60)
def test_interpreter_exit_waits_for_a_far_delayed_task() -> None:
    """Nothing submitted is silently dropped: an hour-delayed one-shot keeps the process."""
    source = """
        from priority_executor import PriorityExecutor

        ex = PriorityExecutor(1)
        ex.submit(say, "ran", delay=3600)
        say("exiting")
    """
    proc = subprocess.Popen(
        [sys.executable, "-c", SAY + textwrap.dedent(source)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "exiting\n"
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=0.5)
    finally:
        proc.kill()
        proc.communicate(timeout=30)


def test_shutdown_from_a_callback_added_to_a_done_future_does_not_wait() -> None:
    ex = PriorityExecutor(1)
    with blocked_worker(ex) as (release, _):
        done = ex.submit(int)
        done.cancel()
        returned = threading.Event()
        done.add_done_callback(lambda _: (ex.shutdown(wait=True), returned.set()))
        assert returned.is_set(), "shutdown() from the callback waited for the pool"
        release.set()
    ex.shutdown(wait=True)
