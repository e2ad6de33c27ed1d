"""The demo, ``python -m priority_executor``: it shows what it says it shows, and ``--help``
explains it instead of running it."""

from __future__ import annotations

import subprocess
import sys
import time

from priority_executor.__main__ import WIDTH


def demo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "priority_executor", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )


def test_help_explains_without_running_the_demo() -> None:
    result = demo("--help")
    assert result.stdout.startswith("usage: python -m priority_executor")
    assert "ThreadPoolExecutor" in result.stdout
    assert "calls api" not in result.stdout


def test_demo_shows_delays_limits_retries_and_deadlines_side_by_side() -> None:
    start = time.monotonic()
    result = demo()
    assert time.monotonic() - start < 10
    assert result.stderr == ""  # the retry is shown by the task, not logged
    lines = result.stdout.splitlines()
    # "  0.61 s  <left column><right column>": which executor did what, and when.
    events = [(float(line[:5]), line[9:]) for line in lines if line[5:9] == " s  "]
    plain = [(at, event.strip()) for at, event in events if not event.startswith(" " * WIDTH)]
    ours = {event.strip(): at for at, event in events if event.startswith(" " * WIDTH)}
    # Two workers: events of the same moment may come in either order.
    assert sorted(event for _, event in plain) == sorted(
        [
            "runs reply (stale)",
            "calls api 1",
            "calls api 2",
            "calls api 3",
            "calls api 4",
            "sends reminder (early)",
            "flaky fails (attempt 1)",
            "flaky gave up: not tried again",
        ]
    )
    assert max(at for at, _ in plain) < 1.4  # all at once, as soon as the workers are free
    # The deadline, the delay, the lane's rate and the retry, each at its time (printed
    # times are rounded, and a busy machine may print a start late: small margins).
    assert ours["reply expired at its deadline"] < 0.6
    assert "runs reply" not in ours
    assert ours["sends reminder"] >= 1.45
    assert ours["calls api 3"] - min(ours["calls api 1"], ours["calls api 2"]) >= 0.8
    assert ours["calls api 4"] - min(ours["calls api 1"], ours["calls api 2"]) >= 0.8
    assert ours["flaky succeeds (attempt 2)"] - ours["flaky fails (attempt 1)"] >= 0.45
