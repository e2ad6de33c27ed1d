"""Tasks for the backend tests. They run in other processes (a process pool's, a Dask
worker's), which import them from this module by name."""

from __future__ import annotations

import contextvars
import os
import time
from pathlib import Path

_value: object = None

# Read by a task in whatever process runs it: a process pool's child has its own context,
# never the submitter's (a contextvars.Context cannot be pickled).
REQUEST: contextvars.ContextVar[str] = contextvars.ContextVar("request", default="none")


def square(x: int) -> int:
    return x * x


def echo(x: object) -> object:
    return x


def pid() -> int:
    return os.getpid()


def fail(message: str) -> None:
    raise ValueError(message)


def touch(path: str) -> None:
    Path(path).touch()


def log_pid(path: str) -> None:
    with open(path, "a") as log:
        log.write(f"{os.getpid()}\n")


def wait_for(path: str, started: str | None = None, timeout: float = 30.0) -> int:
    """Block until ``path`` exists: a gate that this process and the test both see.
    Creates ``started``, if given, first."""
    if started is not None:
        Path(started).touch()
    end = time.monotonic() + timeout
    while not Path(path).exists():
        if time.monotonic() > end:
            raise TimeoutError(f"{path} was never created")
        time.sleep(0.005)
    return os.getpid()


def die() -> None:
    os._exit(1)


def die_once(marker: str) -> str:
    """Kill this process the first time; a rerun of the task then survives."""
    if not Path(marker).exists():
        Path(marker).touch()
        os._exit(1)
    return "survived"


def remember(value: object) -> None:
    global _value
    _value = value


def remembered() -> object:
    return _value


def fail_until(path: str, failures: int) -> int:
    """Raise ``failures`` times, counting calls in ``path`` (shared by every process), then
    return the number of calls."""
    with open(path, "a") as log:
        log.write("x")
    calls = len(Path(path).read_text())
    if calls <= failures:
        raise ValueError(f"call {calls}")
    return calls


def request() -> str:
    return REQUEST.get()
