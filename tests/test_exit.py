"""Each claim of the README's "Shutdown and exit", in a fresh interpreter: what exit,
a ``with`` block's exception and Ctrl-C do with tasks that are not due yet."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest
from helpers import SAY, run_script

# Each script prints "ready" once its tasks are queued; a hang is caught by the timeout.
EXIT_TIMEOUT = 20


def test_shutdown_wait_runs_delayed_one_shot_tasks_and_cancels_series() -> None:
    result = run_script("""
        from priority_executor import PriorityExecutor
        ex = PriorityExecutor(2)
        late = ex.submit(say, "delayed ran", delay=0.2)
        series = ex.submit_recurring(say, "series ran", interval=60, delay=30)
        ex.shutdown(wait=True)
        say("done", late.done(), series.cancelled())
        try:
            ex.submit(print)
        except RuntimeError as exc:
            say("refused:", exc)
    """)
    assert result.stdout.splitlines() == [
        "delayed ran",
        "done True True",
        "refused: cannot schedule new futures after shutdown",
    ]


def test_shutdown_without_wait_returns_and_the_tasks_still_run() -> None:
    result = run_script("""
        import time
        from priority_executor import PriorityExecutor
        ex = PriorityExecutor(2)
        ex.submit(say, "delayed ran", delay=0.2)
        start = time.monotonic()
        ex.shutdown(wait=False)
        say("returned", time.monotonic() - start < 0.1)
    """)
    assert result.stdout.splitlines() == ["returned True", "delayed ran"]


def test_shutdown_cancel_futures_cancels_delayed_tasks() -> None:
    result = run_script("""
        import time
        from priority_executor import PriorityExecutor
        ex = PriorityExecutor(2)
        late = ex.submit(say, "never", delay=30)
        start = time.monotonic()
        ex.shutdown(cancel_futures=True)
        say("cancelled", late.cancelled(), time.monotonic() - start < 5)
    """)
    assert result.stdout.splitlines() == ["cancelled True True"]


def test_shutdown_from_a_task_returns_and_the_rest_completes() -> None:
    result = run_script("""
        import threading
        from priority_executor import PriorityExecutor
        ex = PriorityExecutor(1)
        queued = threading.Event()
        def stop():
            queued.wait(10)  # else the next submit may come after the shutdown, and raise
            ex.shutdown(wait=True)
            say("shutdown returned in the task")
        ex.submit(stop)
        ex.submit(say, "queued ran")
        queued.set()
    """)
    assert result.stdout.splitlines() == ["shutdown returned in the task", "queued ran"]


def test_the_end_of_a_with_block_waits_for_every_task() -> None:
    result = run_script("""
        from priority_executor import PriorityExecutor
        with PriorityExecutor(2) as ex:
            ex.submit(say, "delayed ran", delay=0.2)
        say("after the block")
    """)
    assert result.stdout.splitlines() == ["delayed ran", "after the block"]


@pytest.mark.timeout(EXIT_TIMEOUT)
def test_an_exception_leaving_a_with_block_cancels_what_is_not_due() -> None:
    result = run_script("""
        import time
        from priority_executor import PriorityExecutor
        start = time.monotonic()
        try:
            with PriorityExecutor(2) as ex:
                late = ex.submit(say, "never", delay=30)
                due = ex.submit(time.sleep, 0.2)  # due: still waited for, as by ThreadPoolExecutor
                raise ValueError("bad page")
        except ValueError as exc:
            say("raised", exc, late.cancelled(), due.done(), time.monotonic() - start < 5)
    """)
    assert result.stdout.splitlines() == ["raised bad page True True True"]


@pytest.mark.timeout(EXIT_TIMEOUT)
def test_an_exception_on_a_manual_clock_cancels_every_task_not_started() -> None:
    result = run_script("""
        import threading
        from priority_executor import PriorityExecutor
        from priority_executor.testing import ManualClock
        try:
            with PriorityExecutor(1, clock=ManualClock()) as ex:
                late = ex.lane(cooldown=5).submit(say, "never", delay=1)
                assert False, "test failed"
        except AssertionError as exc:
            say("raised", exc, late.cancelled(), threading.active_count())
    """)
    assert result.stdout.splitlines() == ["raised test failed True 1"]


def test_a_dropped_executor_still_runs_what_was_submitted() -> None:
    result = run_script("""
        import gc, threading
        from priority_executor import PriorityExecutor
        ex = PriorityExecutor(2, thread_name_prefix="dropped")
        future = ex.submit(say, "delayed ran", delay=0.2)
        del ex
        gc.collect()
        future.result(timeout=10)
        for thread in threading.enumerate():
            if thread.name.startswith("dropped"):
                thread.join(10)
        say("threads left", sum(t.name.startswith("dropped") for t in threading.enumerate()))
    """)
    assert result.stdout.splitlines() == ["delayed ran", "threads left 0"]


@pytest.mark.timeout(EXIT_TIMEOUT)
def test_interpreter_exit_runs_delayed_one_shot_tasks_and_no_series() -> None:
    result = run_script("""
        from priority_executor import PriorityExecutor
        ex = PriorityExecutor(2)
        ex.submit(say, "delayed ran at exit", delay=0.3)
        ex.submit_recurring(say, "series ran", interval=60, delay=60)
        say("main ends")
    """)
    assert result.returncode == 0
    assert result.stdout.splitlines() == ["main ends", "delayed ran at exit"]


@pytest.mark.timeout(EXIT_TIMEOUT)
def test_shutdown_with_cancel_futures_at_the_end_of_main_exits_without_waiting() -> None:
    result = run_script(
        """
        import time
        from priority_executor import PriorityExecutor
        executor = PriorityExecutor(2)
        def main():
            executor.submit(say, "reminder", delay=30)
            say("main done")
        try:
            main()
        finally:
            executor.shutdown(cancel_futures=True)
    """,
        timeout=10,
    )
    assert result.stdout.splitlines() == ["main done"]


@pytest.mark.timeout(EXIT_TIMEOUT)
def test_atexit_runs_only_after_exit_waited_for_the_executor() -> None:
    # Why the README does not advise atexit: its handlers run after exit's own wait.
    result = run_script("""
        import atexit
        from priority_executor import PriorityExecutor
        ex = PriorityExecutor(2)
        atexit.register(say, "atexit handler")
        ex.submit(say, "delayed ran", delay=0.3)
    """)
    assert result.stdout.splitlines() == ["delayed ran", "atexit handler"]


def test_a_failing_initializer_breaks_the_pool_as_thread_pool_executor() -> None:
    result = run_script("""
        from concurrent.futures.thread import BrokenThreadPool
        from priority_executor import PriorityExecutor
        def init():
            raise OSError("no database")
        ex = PriorityExecutor(1, initializer=init)
        try:
            ex.submit(int).result(timeout=10)
        except BrokenThreadPool:
            say("broken")
        try:
            ex.submit(int)
        except BrokenThreadPool:
            say("refused")
    """)
    assert result.stdout.splitlines() == ["broken", "refused"]
    assert "CRITICAL" not in result.stdout and "Exception in initializer" in result.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="no fork")
def test_a_forked_child_refuses_the_parents_executor() -> None:
    result = run_script("""
        import os
        from priority_executor import PriorityExecutor
        ex = PriorityExecutor(1)
        ex.submit(int).result()
        pid = os.fork()
        if pid == 0:
            try:
                ex.submit(int)
            except RuntimeError:
                say("child refused")
            with PriorityExecutor(1) as own:
                say("child's own executor:", own.submit(int, 7).result(timeout=10))
            os._exit(0)
        say("child exit", reap(pid))
    """)
    assert result.stdout.splitlines() == [
        "child refused",
        "child's own executor: 7",
        "child exit 0",
    ]


@pytest.mark.timeout(EXIT_TIMEOUT)
def test_interpreter_exit_cancels_the_delayed_tasks_of_a_manual_clock() -> None:
    result = run_script(
        """
        from priority_executor import PriorityExecutor
        from priority_executor.testing import ManualClock
        ex = PriorityExecutor(1, clock=ManualClock())
        ex.submit(say, "never", delay=1)
        say("main ends")
    """,
        timeout=10,
    )
    assert result.returncode == 0
    assert result.stdout.splitlines() == ["main ends"]


# -- Ctrl-C ----------------------------------------------------------------------------------


def presses_to_stop(source: str) -> int:
    """Run ``source``; once it says "ready", press Ctrl-C every half second until it ends.
    Returns how many presses it took."""
    child = subprocess.Popen(
        [sys.executable, "-c", SAY + textwrap.dedent(source)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "ready\n"
        presses = 0
        while presses < 4:
            time.sleep(0.3)  # so that the press lands in the wait, not before it
            child.send_signal(signal.SIGINT)
            presses += 1
            try:
                child.wait(1.0)
                return presses
            except subprocess.TimeoutExpired:
                pass
        return presses + 1  # still running: more than ThreadPoolExecutor would take
    finally:
        child.kill()
        child.communicate()


@pytest.mark.timeout(EXIT_TIMEOUT)
def test_one_ctrl_c_stops_a_with_block_that_holds_a_delayed_task() -> None:
    assert (
        presses_to_stop("""
            import time
            from priority_executor import PriorityExecutor
            with PriorityExecutor(2) as ex:
                ex.submit(say, "reminder", delay=30)
                say("ready")
                time.sleep(30)
        """)
        == 1
    )


@pytest.mark.timeout(EXIT_TIMEOUT)
def test_one_ctrl_c_stops_exit_waiting_for_a_delayed_task() -> None:
    assert (
        presses_to_stop("""
            from priority_executor import PriorityExecutor
            ex = PriorityExecutor(2)
            ex.submit(say, "reminder", delay=30)
            say("ready")
        """)
        == 1
    )


@pytest.mark.timeout(EXIT_TIMEOUT)
def test_two_ctrl_c_stop_a_with_block_waiting_for_a_long_task_as_thread_pool_executor() -> None:
    source = """
        import time
        from concurrent.futures import ThreadPoolExecutor
        from priority_executor import PriorityExecutor
        with {executor}(2) as ex:
            ex.submit(time.sleep, 30)
            say("ready")
            time.sleep(30)
    """
    ours = presses_to_stop(source.format(executor="PriorityExecutor"))
    assert ours == 2
    if sys.version_info < (3, 13):  # ThreadPoolExecutor's own count, for the record
        assert presses_to_stop(source.format(executor="ThreadPoolExecutor")) == ours
