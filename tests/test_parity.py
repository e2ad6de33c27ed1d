"""Behaviour parity with ``ThreadPoolExecutor``.

Each scenario runs against both classes, through the API they share, and checks the same
observable outcome: where DESIGN.md changes nothing, ``PriorityExecutor`` is a drop-in.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
import traceback
from concurrent.futures import CancelledError, Executor, Future, ThreadPoolExecutor
from concurrent.futures.thread import BrokenThreadPool
from typing import Any, Callable

import pytest

from priority_executor import PriorityExecutor

TIMEOUT = 10.0
SUBPROCESS_TIMEOUT = 15  # each script takes well under a second

CLASSES = [ThreadPoolExecutor, PriorityExecutor]
parametrize_class = pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)

_names = itertools.count()


def unique_prefix(what: str) -> str:
    return f"pe-parity-{what}-{next(_names)}"


def wait_until(predicate: Callable[[], object], what: str, timeout: float = TIMEOUT) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.001)


def executor_threads(prefix: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(prefix + "_")]


def default_max_workers() -> int:
    cpus = getattr(os, "process_cpu_count", os.cpu_count)()
    return min(32, (cpus or 1) + 4)


class Started:
    """Counts the tasks that have started; lets a test wait until n have."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.names: list[str] = []

    def record(self) -> None:
        with self.cond:
            self.names.append(threading.current_thread().name)
            self.cond.notify_all()

    def wait_for(self, n: int) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.names) >= n, TIMEOUT), self.names


def blocking_task(started: Started, gate: threading.Event) -> Callable[[], bool]:
    def task() -> bool:
        started.record()
        return gate.wait(TIMEOUT)

    return task


# -- results and exceptions --------------------------------------------------------------------


@parametrize_class
@pytest.mark.parametrize(
    "exc", [ValueError("v"), KeyboardInterrupt("k"), SystemExit(2)], ids=lambda e: type(e).__name__
)
def test_exception_reaches_result_and_the_executor_keeps_working(
    cls: type[Executor], exc: BaseException
) -> None:
    def failing_task() -> None:
        raise exc

    with cls(max_workers=1) as ex:
        future = ex.submit(failing_task)
        with pytest.raises(type(exc)) as info:
            future.result(timeout=TIMEOUT)
        assert info.value is exc
        assert future.exception() is exc
        assert not future.cancelled()
        frames = [frame.name for frame in traceback.extract_tb(exc.__traceback__)]
        assert frames[-1] == "failing_task"
        assert ex.submit(divmod, 7, 2).result(timeout=TIMEOUT) == (3, 1)


@parametrize_class
def test_fn_and_self_are_keyword_arguments_of_the_callee(cls: type[Executor]) -> None:
    def callee(**kwargs: Any) -> dict[str, Any]:
        return kwargs

    with cls(max_workers=1) as ex:
        assert ex.submit(callee, fn=1, self=2).result(TIMEOUT) == {"fn": 1, "self": 2}


@parametrize_class
def test_submit_after_shutdown_raises_runtime_error(cls: type[Executor]) -> None:
    ex = cls(max_workers=2)
    assert ex.submit(abs, -1).result(timeout=TIMEOUT) == 1
    ex.shutdown(wait=True)
    with pytest.raises(RuntimeError) as info:
        ex.submit(abs, -2)
    assert str(info.value) == "cannot schedule new futures after shutdown"
    ex.shutdown(wait=True)  # a second shutdown is harmless
    with pytest.raises(RuntimeError, match=r"^cannot schedule new futures after shutdown$"):
        ex.map(abs, [1])


@parametrize_class
def test_max_workers_validation(cls: type[Executor]) -> None:
    for bad in (0, -1):
        with pytest.raises(ValueError) as info:
            cls(max_workers=bad)
        assert str(info.value) == "max_workers must be greater than 0"


@parametrize_class
def test_default_max_workers_runs_that_many_tasks_at_once(cls: type[Executor]) -> None:
    expected = default_max_workers()
    started, gate = Started(), threading.Event()
    ex = cls(thread_name_prefix=unique_prefix("default"))
    try:
        futures = [ex.submit(blocking_task(started, gate)) for _ in range(expected + 3)]
        started.wait_for(expected)
        time.sleep(0.05)  # room for an extra thread that should not exist
        assert len(started.names) == expected
        assert len(set(started.names)) == expected
    finally:
        gate.set()
        ex.shutdown(wait=True)
    assert all(f.result() for f in futures)


# -- map -----------------------------------------------------------------------------------------


@parametrize_class
def test_map_returns_results_in_input_order(cls: type[Executor]) -> None:
    def slow_square(x: int, pause: float) -> int:
        time.sleep(pause)
        return x * x

    pauses = [0.03, 0.0, 0.02, 0.0, 0.01, 0.0]
    with cls(max_workers=3) as ex:
        results = ex.map(slow_square, range(6), pauses, timeout=TIMEOUT)
        assert list(results) == [0, 1, 4, 9, 16, 25]
        assert list(ex.map(pow, [2, 3], [3, 2], [100, 100], chunksize=4)) == [8, 9]
        assert list(ex.map(abs, [])) == []


@parametrize_class
def test_map_raises_the_first_failure_in_input_order(cls: type[Executor]) -> None:
    with cls(max_workers=2) as ex:
        results = ex.map(lambda x: 10 // x, [5, 2, 0, 1])
        assert next(results) == 2
        assert next(results) == 5
        with pytest.raises(ZeroDivisionError):
            next(results)


@parametrize_class
def test_map_timeout_raises_and_cancels_the_rest(cls: type[Executor]) -> None:
    started, gate = Started(), threading.Event()
    ran: list[int] = []

    def task(x: int) -> int:
        ran.append(x)
        if x == 0:
            started.record()
            gate.wait(TIMEOUT)
        return x

    ex = cls(max_workers=1)
    try:
        results = ex.map(task, range(5), timeout=0.1)
        started.wait_for(1)
        t0 = time.monotonic()
        with pytest.raises(concurrent.futures.TimeoutError):
            next(results)
        assert time.monotonic() - t0 < TIMEOUT / 2
    finally:
        gate.set()
        ex.shutdown(wait=True)
    assert ran == [0]  # the others were cancelled before they could start


# -- threads ------------------------------------------------------------------------------------


@parametrize_class
@pytest.mark.parametrize("prefix", ["", "custom-prefix"])
def test_thread_names(cls: type[Executor], prefix: str) -> None:
    started, gate = Started(), threading.Event()
    ex = cls(max_workers=3, thread_name_prefix=prefix)
    try:
        for _ in range(3):
            ex.submit(blocking_task(started, gate))
        started.wait_for(3)
    finally:
        gate.set()
        ex.shutdown(wait=True)
    base = re.escape(prefix) if prefix else rf"{cls.__name__}-\d+"
    for name in started.names:
        assert re.fullmatch(rf"{base}_[0-2]", name), name
    assert len(set(started.names)) == 3
    assert {name.rsplit("_", 1)[1] for name in started.names} == {"0", "1", "2"}
    bases = {name.rsplit("_", 1)[0] for name in started.names}
    assert len(bases) == 1


@parametrize_class
def test_default_prefixes_differ_between_executors(cls: type[Executor]) -> None:
    names = []
    for _ in range(2):
        with cls(max_workers=1) as ex:
            names.append(ex.submit(lambda: threading.current_thread().name).result(TIMEOUT))
    assert names[0] != names[1]
    assert all(re.fullmatch(rf"{cls.__name__}-\d+_0", name) for name in names), names


@parametrize_class
def test_initializer_and_initargs_run_in_each_worker_thread(cls: type[Executor]) -> None:
    local = threading.local()
    calls: list[tuple[str, Any, Any]] = []

    def initializer(a: int, b: str) -> None:
        local.value = (a, b)
        calls.append((threading.current_thread().name, a, b))

    started, gate = Started(), threading.Event()

    def task() -> tuple[int, str]:
        started.record()
        gate.wait(TIMEOUT)
        return local.value  # type: ignore[no-any-return]

    ex = cls(max_workers=2, initializer=initializer, initargs=(7, "x"))
    try:
        futures = [ex.submit(task) for _ in range(2)]
        started.wait_for(2)
    finally:
        gate.set()
        ex.shutdown(wait=True)
    assert [f.result() for f in futures] == [(7, "x"), (7, "x")]
    assert sorted(calls) == sorted((name, 7, "x") for name in started.names)


@parametrize_class
def test_initializer_failure_breaks_the_pool(
    cls: type[Executor], caplog: pytest.LogCaptureFixture
) -> None:
    def initializer() -> None:
        raise ArithmeticError("init failed")

    caplog.set_level(logging.CRITICAL, logger="concurrent.futures")
    ex = cls(max_workers=1, initializer=initializer)
    try:
        future = ex.submit(abs, -1)
        exc = future.exception(timeout=TIMEOUT)
        assert type(exc) is BrokenThreadPool
        message = "A thread initializer failed, the thread pool is not usable anymore"
        assert str(exc) == message
        with pytest.raises(BrokenThreadPool) as info:
            ex.submit(abs, -2)
        assert str(info.value) == message
    finally:
        ex.shutdown(wait=True)
    records = [r for r in caplog.records if r.name == "concurrent.futures"]
    assert [(r.levelno, r.getMessage()) for r in records] == [
        (logging.CRITICAL, "Exception in initializer:")
    ]
    assert records[0].exc_info is not None
    assert isinstance(records[0].exc_info[1], ArithmeticError)


@parametrize_class
def test_initializer_must_be_callable(cls: type[Executor]) -> None:
    with pytest.raises(TypeError):
        cls(max_workers=1, initializer=42)  # type: ignore[arg-type]


# -- cancel, shutdown, with ------------------------------------------------------------------


@parametrize_class
def test_cancel_a_queued_task(cls: type[Executor]) -> None:
    started, gate = Started(), threading.Event()
    ran: list[str] = []
    ex = cls(max_workers=1)
    try:
        running = ex.submit(blocking_task(started, gate))
        started.wait_for(1)
        queued = ex.submit(ran.append, "queued")
        kept = ex.submit(ran.append, "kept")
        assert queued.cancel() is True
        assert queued.cancel() is True  # cancelling again still says it is cancelled
        assert queued.cancelled() and queued.done()
        with pytest.raises(CancelledError):
            queued.result(timeout=0)
        assert running.cancel() is False  # a running task cannot be cancelled
        assert running.running()
    finally:
        gate.set()
        ex.shutdown(wait=True)
    assert running.result() is True and not running.cancelled()
    assert kept.result() is None
    assert kept.cancel() is False  # nor a finished one
    assert ran == ["kept"]


@parametrize_class
def test_shutdown_cancel_futures_cancels_queued_tasks_only(cls: type[Executor]) -> None:
    started, gate = Started(), threading.Event()
    ran: list[int] = []
    ex = cls(max_workers=1)
    running = ex.submit(blocking_task(started, gate))
    started.wait_for(1)
    queued = [ex.submit(ran.append, i) for i in range(4)]
    t0 = time.monotonic()
    ex.shutdown(wait=False, cancel_futures=True)
    assert time.monotonic() - t0 < 1  # wait=False does not wait for the running task
    assert all(f.cancelled() for f in queued)
    assert not running.done()
    gate.set()
    ex.shutdown(wait=True)
    assert running.result() is True
    assert ran == []


@parametrize_class
def test_shutdown_without_cancel_runs_every_queued_task(cls: type[Executor]) -> None:
    started, gate = Started(), threading.Event()
    ran: list[int] = []
    ex = cls(max_workers=1, thread_name_prefix=unique_prefix("drain"))
    ex.submit(blocking_task(started, gate))
    started.wait_for(1)
    queued = [ex.submit(ran.append, i) for i in range(4)]
    closer = threading.Thread(target=ex.shutdown, kwargs={"wait": True})
    closer.start()
    time.sleep(0.02)
    assert closer.is_alive()  # waits for the running and the queued tasks
    gate.set()
    closer.join(TIMEOUT)
    assert not closer.is_alive()
    assert ran == [0, 1, 2, 3]
    assert all(f.done() and not f.cancelled() for f in queued)


@parametrize_class
def test_with_block_waits_for_every_task(cls: type[Executor]) -> None:
    prefix = unique_prefix("with")
    done: list[int] = []

    def task(i: int) -> int:
        time.sleep(0.02)
        done.append(i)
        return i

    with cls(max_workers=2, thread_name_prefix=prefix) as ex:
        futures = [ex.submit(task, i) for i in range(6)]
    assert sorted(done) == list(range(6))
    assert [f.result(timeout=0) for f in futures] == list(range(6))
    assert executor_threads(prefix) == []


@parametrize_class
def test_with_block_left_by_an_exception_still_waits(cls: type[Executor]) -> None:
    done: list[int] = []
    with pytest.raises(LookupError), cls(max_workers=1) as ex:
        future = ex.submit(lambda: time.sleep(0.05) or done.append(1))
        raise LookupError
    assert future.done() and done == [1]
    with pytest.raises(RuntimeError):
        ex.submit(abs, 1)


@parametrize_class
def test_done_callback_raising_is_logged_by_concurrent_futures(
    cls: type[Executor], caplog: pytest.LogCaptureFixture
) -> None:
    def bad(future: Future[Any]) -> None:
        raise ValueError("callback")

    caplog.set_level(logging.ERROR, logger="concurrent.futures")
    with cls(max_workers=1) as ex:
        future = ex.submit(abs, -3)
        future.add_done_callback(bad)
        assert future.result(timeout=TIMEOUT) == 3
        wait_until(
            lambda: [r for r in caplog.records if r.name == "concurrent.futures"],
            "the callback's error to be logged",
        )
        assert ex.submit(abs, -4).result(timeout=TIMEOUT) == 4
    messages = [r.getMessage() for r in caplog.records if r.name == "concurrent.futures"]
    assert len(messages) == 1 and messages[0].startswith("exception calling callback for")


@parametrize_class
def test_as_completed_and_wait(cls: type[Executor]) -> None:
    with cls(max_workers=3) as ex:
        futures = [ex.submit(time.sleep, 0.01 * (3 - i)) for i in range(3)]
        assert set(concurrent.futures.as_completed(futures, timeout=TIMEOUT)) == set(futures)
        done, not_done = concurrent.futures.wait(futures, timeout=TIMEOUT)
        assert done == set(futures) and not not_done


@parametrize_class
def test_task_submitting_to_its_own_executor(cls: type[Executor]) -> None:
    with cls(max_workers=2) as ex:
        outer = ex.submit(lambda: ex.submit(pow, 3, 3).result(TIMEOUT))
        assert outer.result(timeout=TIMEOUT) == 27


@parametrize_class
def test_dropped_executor_runs_its_queue_then_its_threads_exit(cls: type[Executor]) -> None:
    prefix = unique_prefix("dropped")
    started, gate = Started(), threading.Event()
    ex = cls(max_workers=1, thread_name_prefix=prefix)
    ex.submit(blocking_task(started, gate))
    started.wait_for(1)
    queued = [ex.submit(pow, 2, i) for i in range(3)]
    del ex
    gate.set()
    assert [f.result(timeout=TIMEOUT) for f in queued] == [1, 2, 4]
    wait_until(lambda: not executor_threads(prefix), "the threads to exit")


# -- interpreter exit -------------------------------------------------------------------------


def run_script(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
    )


@parametrize_class
@pytest.mark.timeout(40)
def test_interpreter_exit_runs_the_queued_tasks(cls: type[Executor]) -> None:
    proc = run_script(
        f"""
        import time
        from concurrent.futures import ThreadPoolExecutor
        from priority_executor import PriorityExecutor

        def task(i):
            time.sleep(0.02)
            print(i, flush=True)

        def late_submit():
            time.sleep(0.2)  # the interpreter is exiting by now
            try:
                ex.submit(print, "accepted")
            except RuntimeError as exc:
                print("refused:", exc, flush=True)

        ex = {cls.__name__}(max_workers=1)
        ex.submit(late_submit)
        for i in range(5):
            ex.submit(task, i)
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "refused: cannot schedule new futures after interpreter shutdown",
        *map(str, range(5)),
    ]
    assert proc.stderr == ""


@pytest.mark.timeout(40)
def test_interpreter_exit_runs_delayed_tasks_and_ends_series() -> None:
    """Not parity, the contract: at exit a delayed one-shot task still runs at its time
    (keeping the process alive that long), a recurring series never keeps it alive."""
    proc = run_script(
        """
        import time
        from priority_executor import PriorityExecutor
        ex = PriorityExecutor(max_workers=2)
        ex.submit_recurring(print, "tick", interval=0.05, delay=0.3)
        ex.submit(print, "delayed", flush=True, delay=0.2)
        ex.submit(print, "queued", flush=True)
        other = PriorityExecutor(max_workers=1)  # no task ever started a thread in it
        other.submit(print, "late", flush=True, delay=0.1)
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["queued", "late", "delayed"]
    assert proc.stderr == ""
