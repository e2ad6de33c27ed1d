"""The demo: ``python -m priority_executor``; ``--help`` says what it shows."""

from __future__ import annotations

import argparse
import threading
import time
from concurrent.futures import Executor, Future, ThreadPoolExecutor

from priority_executor import Priority, PriorityExecutor

DESCRIPTION = """\
Runs the same five tasks through a ThreadPoolExecutor (left) and a PriorityExecutor (right),
side by side, with the time at which each thing happens. Each has one worker, busy for the
first 0.3 s, so the order in which the queued tasks start is plain to see:

  report      priority=LOW
  thumbnail   (no scheduling keyword)
  answer      priority=HIGH
  reply       expires=0.2: worthless if it has not started within 0.2 s
  heartbeat   submit_recurring(interval=0.5) on PriorityExecutor; a one-off task on
              ThreadPoolExecutor, which has no recurring tasks

ThreadPoolExecutor takes no scheduling keyword: it runs everything in submission order,
the stale reply included, and the heartbeat once. PriorityExecutor runs the urgent answer
first, cancels the reply at its deadline (its future reports cancelled()), and repeats the
heartbeat every 0.5 s until it is cancelled. Takes about two seconds."""

BUSY = 0.3  # how long the only worker is busy before the queued tasks can start
TASK = 0.1  # how long each queued task runs
DEADLINE = 0.2
INTERVAL = 0.5
DURATION = 1.9
WIDTH = 36

_start = time.monotonic()
_print_lock = threading.Lock()


def say(column: int, text: str) -> None:
    """Print ``text`` in the executor's column, at the current time."""
    line = f"{time.monotonic() - _start:5.2f} s  " + " " * (WIDTH * column) + text
    with _print_lock:
        print(line, flush=True)


def run(column: int, name: str) -> None:
    say(column, f"runs {name}")
    time.sleep(TASK)


def busy(started: threading.Event) -> None:
    started.set()
    time.sleep(BUSY)


def beat(column: int) -> None:
    say(column, "runs heartbeat")


def submit_all(ex: Executor, column: int) -> dict[str, Future[None]]:
    """Keep the worker busy, then queue the five tasks, with the scheduling keywords that
    the executor takes."""
    started = threading.Event()
    ex.submit(busy, started)
    started.wait()  # so that the five tasks wait, and the executor alone orders them
    if isinstance(ex, PriorityExecutor):
        futures = {
            "report": ex.submit(run, column, "report (LOW)", priority=Priority.LOW),
            "thumbnail": ex.submit(run, column, "thumbnail"),
            "answer": ex.submit(run, column, "answer (HIGH)", priority=Priority.HIGH),
            "reply": ex.submit(run, column, "reply", expires=DEADLINE),
            "heartbeat": ex.submit_recurring(beat, column, interval=INTERVAL),
        }
    else:
        futures = {
            "report": ex.submit(run, column, "report (LOW)"),
            "thumbnail": ex.submit(run, column, "thumbnail"),
            "answer": ex.submit(run, column, "answer (HIGH)"),
            "reply": ex.submit(run, column, "reply (stale after 0.2 s)"),
            "heartbeat": ex.submit(beat, column),
        }
    futures["reply"].add_done_callback(lambda future: report_expiry(column, future))
    return futures


def report_expiry(column: int, future: Future[None]) -> None:
    if future.cancelled():
        say(column, "reply expired: cancelled at its deadline")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m priority_executor",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.parse_args(argv)
    print(f"{'time':>7}  {'ThreadPoolExecutor(1)':<{WIDTH}}PriorityExecutor(1)")
    print(f"{'':7}  {'(worker busy until 0.30 s)':<{WIDTH}}(worker busy until 0.30 s)")
    with ThreadPoolExecutor(1) as plain, PriorityExecutor(1) as ours:
        submit_all(plain, 0)
        series = submit_all(ours, 1)["heartbeat"]
        time.sleep(DURATION)
        series.cancel()
        say(1, "heartbeat series cancelled")
    print(
        "\nThreadPoolExecutor: submission order; the stale reply still ran, the heartbeat once."
        "\nPriorityExecutor: HIGH first, then submission order among equals, LOW last; the"
        "\nreply cancelled at its deadline; the heartbeat every 0.5 s until cancelled."
    )


if __name__ == "__main__":
    main()
