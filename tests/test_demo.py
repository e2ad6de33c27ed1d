"""The demo, ``python -m priority_executor``: it shows what it says it shows, and ``--help``
explains it instead of running it."""

from __future__ import annotations

import subprocess
import sys

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
    assert "series cancelled" not in result.stdout


def test_demo_shows_both_executors_side_by_side() -> None:
    lines = demo().stdout.splitlines()
    # "  0.30 s  <left column><right column>": which executor did what, in time order.
    events = [line[9:] for line in lines if line[5:9] == " s  "]
    plain = [event.strip() for event in events if not event.startswith(" " * WIDTH)]
    ours = [event.strip() for event in events if event.startswith(" " * WIDTH)]
    assert plain == [
        "runs report (LOW)",
        "runs thumbnail",
        "runs answer (HIGH)",
        "runs reply (stale after 0.2 s)",
        "runs heartbeat",
    ]
    runs = [event for event in ours if event.startswith("runs ") and event != "runs heartbeat"]
    assert runs == ["runs answer (HIGH)", "runs thumbnail", "runs report (LOW)"]
    assert ours[0] == "reply expired: cancelled at its deadline"
    assert ours.count("runs heartbeat") >= 3
    assert ours[-1] == "heartbeat series cancelled"
