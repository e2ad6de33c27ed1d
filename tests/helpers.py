"""Helpers shared by the test modules (imported as ``helpers``: pytest puts tests/ on sys.path)."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any, Callable, Union

from priority_executor import ExecutorStats, Lane, PriorityExecutor

TIMEOUT = 10.0
# Scripts write whole lines at once: print() writes its parts separately, and lines
# printed by two threads at the same time could interleave. reap() waits for a forked
# child, killing it if it outlives ``timeout``: its exit code, or None if it hung.
SAY = """\
import os, signal, sys, time
def say(*parts):
    sys.stdout.write(" ".join(map(str, parts)) + "\\n")
    sys.stdout.flush()
def reap(pid, timeout=10):
    end = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > end:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.01)
"""


class Boom(Exception):
    pass


def wait_until(
    predicate: Callable[[], object], timeout: float = TIMEOUT, *, what: str = "a condition"
) -> None:
    """Wait for worker threads to reach a state (never used to wait for a due time)."""
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.001)


def unique_prefix(what: str) -> str:
    """A thread name prefix no other executor of the test run uses."""
    return f"pe-test-{what}-{next(_prefixes)}"


_prefixes = itertools.count()


def executor_threads(prefix: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(prefix + "_")]


@contextlib.contextmanager
def blocked_worker(
    ex: PriorityExecutor, *, priority: int = 10**6, timeout: float = TIMEOUT
) -> Iterator[tuple[threading.Event, Future[None]]]:
    """Occupy one worker until the event is set (at the latest on exit).

    Yields the release event and the blocker's future. Should the blocker fail before it
    starts (a broken policy, say), what went wrong is raised instead.
    """
    started, release = threading.Event(), threading.Event()

    def blocker() -> None:
        started.set()
        assert release.wait(timeout)

    future = ex.submit(blocker, priority=priority)
    try:
        wait_until(lambda: started.is_set() or future.done(), timeout)
        if not started.is_set():
            future.result()  # raises what went wrong
            raise AssertionError("the blocker finished without starting")
        yield release, future
    finally:
        release.set()


def counts(**nonzero: int) -> dict[str, int]:
    """What ``stats_fields()`` returns when only these fields are not zero."""
    fields = {field.name: 0 for field in dataclasses.fields(ExecutorStats)}
    del fields["retries"], fields["overrunning"]
    fields.update(nonzero)
    return fields


def stats_fields(ex: PriorityExecutor) -> dict[str, int]:
    """The executor's stats as a dict of its state fields (not ``retries``, an
    event count, nor ``overrunning``, a part of ``running``)."""
    fields = dataclasses.asdict(ex.stats())
    del fields["retries"], fields["overrunning"]
    return fields


def in_thread(fn, *args, **kwargs) -> threading.Thread:  # type: ignore[no-untyped-def]
    """Start ``fn(*args, **kwargs)`` in a daemon thread and return the thread."""
    thread = threading.Thread(target=fn, args=args, kwargs=kwargs, daemon=True)
    thread.start()
    return thread


def run_script(source: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run ``source`` (dedented, after SAY) in a fresh interpreter; capture its output."""
    return subprocess.run(
        [sys.executable, "-c", SAY + textwrap.dedent(source)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# The name of the thread call_bounded() starts: a test's own thread, never the executor's.
BOUNDED_CALL = "pe-test-bounded-call"


def call_bounded(fn: Callable[[], Any], what: str, timeout: float = TIMEOUT) -> Any:
    """Call ``fn`` in another thread; fail, instead of hanging, if it does not return."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name=BOUNDED_CALL, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"{what} hung"
    if "error" in box:
        raise box["error"]
    return box.get("result")


def shutdown_bounded(ex: PriorityExecutor, **kwargs: Any) -> None:
    call_bounded(lambda: ex.shutdown(**kwargs), "shutdown()")


# -- max_waiting -----------------------------------------------------------------------------

Target = Union[PriorityExecutor, Lane]


def blocked_in(target: Target) -> int:
    """How many submits wait for room under ``target``'s own ``max_waiting``."""
    gate = target._state.gate if isinstance(target, Lane) else target._scheduler.gate
    assert gate is not None
    return gate._blocked


def submit_in_background(
    submit: Callable[[], Future[Any]], name: str | None = None
) -> tuple[dict[str, Any], threading.Thread]:
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["future"] = submit()
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return outcome, thread


def assert_room_for(target: Target, limit: int) -> None:
    """Exactly ``limit`` submits go through at once, and the next one waits: no room was
    lost, or kept, by whatever left the waiting states before."""
    fillers = call_bounded(lambda: [target.submit(int, delay=1000) for _ in range(limit)], "fill")
    outcome, thread = submit_in_background(lambda: target.submit(int, delay=1000))
    wait_until(lambda: blocked_in(target) == 1, what="the submit past the limit to wait")
    assert outcome == {}
    for future in fillers:
        assert future.cancel()
    thread.join(TIMEOUT)
    assert outcome["future"].cancel()
