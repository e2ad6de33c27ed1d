"""Tasks that wait for other tasks: ``python benchmarks/dependencies.py [chain] [fan_in]``
(defaults 100,000 and 10,000) prints, for ``PriorityExecutor`` with ``options(after=...)``
and for ``ThreadPoolExecutor`` with the same work written by hand as done-callbacks that
submit the next task:

- the cost of one edge: a submit after one done future, against a plain submit;
- a chain of ``chain`` no-op tasks, each after the previous one, all submitted before the
  first runs (wall time; and, in a run of its own, the memory held at its end as tracemalloc
  counts it, only the last future being kept);
- a fan-in: ``fan_in`` no-op tasks, then one task after all of them.

The hand-written version is what users write today: each upstream's callback counts down
under a lock of its own and submits the dependent at zero. It has no failure semantics
(a failed upstream just never submits), no deadline, and no lane."""

from __future__ import annotations

import gc
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from priority_executor import PriorityExecutor

WORKERS = 4


def noop() -> None:
    pass


def best(runs: int, measure: Callable[[], float]) -> float:
    return min(measure() for _ in range(runs))


# -- hand-written dependencies on ThreadPoolExecutor -----------------------------------------


def submit_after_by_hand(pool: ThreadPoolExecutor, upstreams: list[Future[Any]]) -> Future[Any]:
    """``fn`` once every upstream is done: a count down in the upstreams' callbacks."""
    result: Future[Any] = Future()
    left = [len(upstreams)]
    lock = threading.Lock()

    def done(_: Future[Any]) -> None:
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if last:
            inner = pool.submit(noop)
            inner.add_done_callback(lambda f: result.set_result(f.result()))

    for upstream in upstreams:
        upstream.add_done_callback(done)
    return result


# -- the measures ----------------------------------------------------------------------------


def edge_cost(count: int) -> dict[str, float]:
    """Microseconds a submit: plain, and after one future done already (one edge)."""
    done: Future[None] = Future()
    done.set_result(None)
    costs = {}
    with PriorityExecutor(WORKERS) as ex:
        view = ex.options(after=done)
        for label, submit in (
            ("PE plain submit", lambda: ex.submit(noop)),
            ("PE submit after 1 done future", lambda: view.submit(noop)),
        ):

            def measure(submit: Callable[[], Future[Any]] = submit) -> float:
                futures = []
                started = time.perf_counter()
                for _ in range(count):
                    futures.append(submit())
                elapsed = time.perf_counter() - started
                for future in futures:
                    future.result()
                return elapsed / count * 1e6

            costs[label] = best(5, measure)
    with ThreadPoolExecutor(WORKERS) as pool:

        def by_hand() -> float:
            futures = []
            started = time.perf_counter()
            for _ in range(count):
                futures.append(submit_after_by_hand(pool, [done]))
            elapsed = time.perf_counter() - started
            for future in futures:
                future.result()
            return elapsed / count * 1e6

        costs["TPE submit after 1 done future, by hand"] = best(5, by_hand)
    return costs


def chain_pe(length: int, trace: bool) -> float:
    """Seconds the chain took; or, with ``trace``, the bytes held at its end."""
    with PriorityExecutor(WORKERS) as ex:
        gc.collect()
        if trace:
            tracemalloc.start()
        started = time.perf_counter()
        gate = threading.Event()
        last: Future[Any] = ex.submit(gate.wait)
        for _ in range(length):
            last = ex.options(after=last).submit(noop)
        gate.set()
        last.result()
        elapsed = time.perf_counter() - started
        if not trace:
            return elapsed
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
    return held


def chain_by_hand(length: int, trace: bool) -> float:
    with ThreadPoolExecutor(WORKERS) as pool:
        gc.collect()
        if trace:
            tracemalloc.start()
        started = time.perf_counter()
        gate = threading.Event()
        last: Future[Any] = pool.submit(gate.wait)
        for _ in range(length):
            last = submit_after_by_hand(pool, [last])
        gate.set()
        last.result()
        elapsed = time.perf_counter() - started
        if not trace:
            return elapsed
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
    return held


def fan_in_pe(width: int) -> float:
    with PriorityExecutor(WORKERS) as ex:
        started = time.perf_counter()
        upstreams = [ex.submit(noop) for _ in range(width)]
        ex.options(after=upstreams).submit(noop).result()
        return time.perf_counter() - started


def fan_in_by_hand(width: int) -> float:
    with ThreadPoolExecutor(WORKERS) as pool:
        started = time.perf_counter()
        upstreams = [pool.submit(noop) for _ in range(width)]
        submit_after_by_hand(pool, upstreams).result()
        return time.perf_counter() - started


def main() -> None:
    chain = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    fan_in = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    print(f"Python {sys.version.split()[0]}, {WORKERS} workers")
    for label, micros in edge_cost(20_000).items():
        print(f"  {label:<42} {micros:6.2f} us a submit")
    for label, run in (("PE after=", chain_pe), ("TPE callbacks by hand", chain_by_hand)):
        elapsed, held = run(chain, False), run(chain, True)  # tracemalloc slows it 5x
        print(
            f"  chain of {chain:,}, {label:<22} {elapsed:6.2f} s"
            f" ({elapsed / chain * 1e6:5.1f} us a link), {held / 1024:8.0f} KiB held at its end"
        )
    for label, width_run in (("PE after=", fan_in_pe), ("TPE callbacks by hand", fan_in_by_hand)):
        elapsed = best(3, lambda width_run=width_run: width_run(fan_in))
        print(f"  fan-in of {fan_in:,}, {label:<22} {elapsed * 1e3:7.1f} ms")


if __name__ == "__main__":
    main()
