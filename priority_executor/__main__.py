"""The demo: ``python -m priority_executor``; ``--help`` says what it shows."""

from __future__ import annotations

import argparse
import logging
import threading
import time
from concurrent.futures import Executor, Future, ThreadPoolExecutor

from priority_executor import PriorityExecutor, Retry

DESCRIPTION = """\
Runs the same work through a ThreadPoolExecutor (left) and a PriorityExecutor (right), side
by side, with the time at which each thing happens. Each has two workers, busy for the first
0.6 s, while this waits:

  reply       expires=0.3: worthless if it has not started within 0.3 s
  api 1..4    four calls to an API that allows 2 per second: a lane(max_starts=2, per=1)
  reminder    delay=1.5: meant for 1.5 s from now
  flaky       fails on its first attempt: a lane(retry=Retry(3, backoff=0.5))

ThreadPoolExecutor takes none of these: it runs the stale reply, calls the API four times at
once, sends the reminder early and gives up on the flaky task. PriorityExecutor cancels the
reply at its deadline, spaces the API calls by the lane's limit, sends the reminder on time
and tries the flaky task again. Takes about three seconds."""

BUSY = 0.6  # how long both workers are busy before the queued tasks can start
DEADLINE = 0.3
DELAY = 1.5
BACKOFF = 0.5
DURATION = 2.9
WIDTH = 38

_start = time.monotonic()
_print_lock = threading.Lock()


def say(column: int, text: str) -> None:
    """Print ``text`` in the executor's column, at the current time."""
    line = f"{time.monotonic() - _start:5.2f} s  " + " " * (WIDTH * column) + text
    with _print_lock:
        print(line, flush=True)


class Flaky:
    """Fails on its first attempt, as a server that is restarting does."""

    def __init__(self, column: int) -> None:
        self.column = column
        self.attempts = 0

    def __call__(self) -> None:
        self.attempts += 1
        if self.attempts == 1:
            say(self.column, "flaky fails (attempt 1)")
            raise ConnectionError("connection reset")
        say(self.column, f"flaky succeeds (attempt {self.attempts})")


def busy(started: threading.Barrier) -> None:
    started.wait()
    time.sleep(BUSY)


def submit_all(ex: Executor, column: int) -> dict[str, Future[None]]:
    """Keep both workers busy, then queue the work, with what the executor takes."""
    started = threading.Barrier(3)
    for _ in range(2):
        ex.submit(busy, started)
    started.wait()  # so that the work waits, and the executor alone decides
    futures: dict[str, Future[None]] = {}
    if isinstance(ex, PriorityExecutor):
        api = ex.lane("api", max_starts=2, per=1.0)
        flaky = ex.lane("flaky", retry=Retry(3, backoff=BACKOFF))
        futures["reply"] = ex.submit(say, column, "runs reply", expires=DEADLINE)
        for i in range(1, 5):
            api.submit(say, column, f"calls api {i}")
        ex.submit(say, column, "sends reminder", delay=DELAY)
        futures["flaky"] = flaky.submit(Flaky(column))
    else:
        futures["reply"] = ex.submit(say, column, "runs reply (stale)")
        for i in range(1, 5):
            ex.submit(say, column, f"calls api {i}")
        ex.submit(say, column, "sends reminder (early)")
        futures["flaky"] = ex.submit(Flaky(column))
    futures["reply"].add_done_callback(lambda future: report_expiry(column, future))
    futures["flaky"].add_done_callback(lambda future: report_failure(column, future))
    return futures


def report_expiry(column: int, future: Future[None]) -> None:
    if future.cancelled():
        say(column, "reply expired at its deadline")


def report_failure(column: int, future: Future[None]) -> None:
    if not future.cancelled() and future.exception() is not None:
        say(column, "flaky gave up: not tried again")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m priority_executor",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.parse_args(argv)
    # Each retry is a line on this logger: the flaky task says so itself here.
    logging.getLogger("priority_executor").setLevel(logging.ERROR)
    print(f"{'time':>7}  {'ThreadPoolExecutor(2)':<{WIDTH}}PriorityExecutor(2)")
    print(f"{'':7}  {'(workers busy until 0.60 s)':<{WIDTH}}(workers busy until 0.60 s)")
    with ThreadPoolExecutor(2) as plain, PriorityExecutor(2) as ours:
        submit_all(plain, 0)
        submit_all(ours, 1)
        time.sleep(DURATION)
    print(
        "\nThreadPoolExecutor: submission order, at once; the stale reply ran, the API got"
        "\nfour calls in a moment, the reminder went early, the flaky task failed for good."
        "\nPriorityExecutor: the reply cancelled at its deadline, two API calls a second,"
        "\nthe reminder on time, the flaky task tried again after 0.5 s."
    )


if __name__ == "__main__":
    main()
