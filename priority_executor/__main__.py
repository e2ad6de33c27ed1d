"""A short demo: ``python -m priority_executor``.

One worker, so the order in which it picks tasks is plain to see: urgent work first, later
work at its time, stale work dropped at its deadline, and a heartbeat every 0.4 s.
"""

from __future__ import annotations

import threading
import time

from priority_executor import Priority, PriorityExecutor

_start = time.monotonic()


def say(message: str) -> None:
    print(f"{time.monotonic() - _start:5.2f} s  {message}", flush=True)


def work(name: str, seconds: float = 0.05) -> str:
    say(f"runs {name}")
    time.sleep(seconds)
    return name


def main() -> None:
    with PriorityExecutor(max_workers=1, thread_name_prefix="demo") as executor:
        gate = threading.Event()
        executor.submit(gate.wait)  # keeps the only worker busy while we queue the rest
        say("queued while the worker is busy: LOW, NORMAL, HIGH, and a HIGH due in 0.5 s")
        executor.submit(work, "LOW", priority=Priority.LOW)
        executor.submit(work, "NORMAL")
        executor.submit(work, "HIGH", priority=Priority.HIGH)
        executor.submit(work, "HIGH, 0.5 s later", priority=Priority.HIGH, delay=0.5)
        stale = executor.submit(work, "stale (never)", priority=Priority.LOW, expires=0.1)
        heartbeat = executor.submit_recurring(say, "heartbeat", interval=0.4, delay=0.2)
        time.sleep(0.2)
        say("worker released: it takes the most important due task first")
        gate.set()
        time.sleep(1.3)
        heartbeat.cancel()
        say(f"the stale task expired: cancelled={stale.cancelled()}")
        say(f"stats: {executor.stats()}")


if __name__ == "__main__":
    main()
