"""Many threads submitting, cancelling and shutting down at once: every task ends in exactly
one state, runs at most once, and stats() adds up."""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import hashlib
import os
import random
import threading
import time
from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass, field

import pytest
from helpers import TIMEOUT, Boom, unique_prefix

from priority_executor import ExecutorStats, PriorityExecutor
from priority_executor._clock import MonotonicClock
from priority_executor._promoter import Promoter
from priority_executor.testing import ManualClock


@dataclass
class Ledger:
    """What the tasks did, and what the submitters saw."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    runs: Counter[int] = field(default_factory=Counter)
    futures: dict[int, Future[int]] = field(default_factory=dict)
    failing: set[int] = field(default_factory=set)
    cancel_true: set[int] = field(default_factory=set)
    cancel_false: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    attempted: int = 0  # submit() calls begun
    accepted: int = 0  # submit() calls that returned a future
    errors: list[BaseException] = field(default_factory=list)

    def task(self, task_id: int) -> int:
        with self.lock:
            self.runs[task_id] += 1
        if task_id in self.failing:
            raise Boom(task_id)
        return task_id

    def cancel(self, task_id: int) -> None:
        future = self.futures[task_id]
        won = future.cancel()
        with self.lock:
            (self.cancel_true if won else self.cancel_false).add(task_id)

    def check(self, ex: PriorityExecutor) -> Counter[str]:
        """Every accepted future ended in exactly one way, consistently with what was seen."""
        outcomes: Counter[str] = Counter()
        assert not self.errors, self.errors
        futures = list(self.futures.values())
        _, not_done = cf.wait(futures, timeout=0)
        assert not not_done, f"{len(not_done)} futures not done (or cancelled but not notified)"
        for task_id, future in self.futures.items():
            assert future.done()
            runs = self.runs[task_id]
            if future.cancelled():
                outcomes["cancelled"] += 1
                assert runs == 0, f"task {task_id} was cancelled but ran {runs} times"
                assert task_id not in self.cancel_false
            else:
                assert runs == 1, f"task {task_id} ran {runs} times"
                assert task_id not in self.cancel_true, f"cancel() of {task_id} lied"
                exc = future.exception(timeout=0)
                if task_id in self.failing:
                    assert isinstance(exc, Boom)
                    assert exc.args == (task_id,)
                    outcomes["failed"] += 1
                else:
                    assert exc is None
                    assert future.result(timeout=0) == task_id
                    outcomes["completed"] += 1
        for task_id in self.rejected:
            assert self.runs[task_id] == 0, f"rejected task {task_id} ran"
        assert set(self.runs) <= set(self.futures)
        stats = ex.stats()
        assert (stats.scheduled, stats.ready, stats.running, stats.expired) == (0, 0, 0, 0)
        assert stats.completed == outcomes["completed"]
        assert stats.failed == outcomes["failed"]
        assert stats.cancelled == outcomes["cancelled"]
        assert total(stats) == len(self.futures)
        return outcomes


def total(stats: ExecutorStats) -> int:
    return (
        stats.scheduled
        + stats.ready
        + stats.running
        + stats.completed
        + stats.failed
        + stats.cancelled
        + stats.expired
    )


def run_threads(targets: list[threading.Thread]) -> None:
    for thread in targets:
        thread.start()
    for thread in targets:
        thread.join(30)
        assert not thread.is_alive(), f"{thread.name} is stuck"


def submitter(
    ex: PriorityExecutor,
    ledger: Ledger,
    ids: range,
    seed: int,
    max_delay: float | None,
    clock_delays: bool = False,
    barrier: threading.Barrier | None = None,
    closed: threading.Event | None = None,
) -> None:
    rng = random.Random(seed)
    mine: list[int] = []
    try:
        for n, task_id in enumerate(ids):
            if barrier is not None and n == len(ids) // 4:
                barrier.wait()  # a quarter in: the shutdown comes now, while we go on
            if closed is not None and n == 3 * len(ids) // 4:
                # A loaded machine may run every submitter to its end before the closer is
                # scheduled at all; the last quarter must meet a shut-down executor.
                closed.wait(30)
            if rng.random() < 0.05:
                ledger.failing.add(task_id)
            priority = rng.randint(-5, 5)
            delay = None
            if max_delay is not None and rng.random() < 0.5:
                delay = rng.uniform(0, max_delay)
                if clock_delays:
                    delay = float(rng.randint(0, 20))
            with ledger.lock:
                ledger.attempted += 1
            try:
                future = ex.submit(ledger.task, task_id, priority=priority, delay=delay)
            except RuntimeError:
                with ledger.lock:
                    ledger.rejected.add(task_id)
                continue
            with ledger.lock:
                ledger.futures[task_id] = future
                ledger.accepted += 1
            mine.append(task_id)
            roll = rng.random()
            if roll < 0.15:
                ledger.cancel(task_id)  # at once: usually waiting, sometimes running
            elif roll < 0.3 and mine:
                ledger.cancel(rng.choice(mine))  # an older one: any state
    except BaseException as exc:  # pragma: no cover - reported by check()
        ledger.errors.append(exc)
        raise


def stats_poller(ex: PriorityExecutor, ledger: Ledger, stop: threading.Event, workers: int) -> None:
    """Snapshots taken under load are consistent: no negatives, terminal counts only grow,
    and the fields add up to the number of tasks accepted around the snapshot."""
    last = (0, 0, 0, 0)
    try:
        while not stop.is_set():
            with ledger.lock:
                low = ledger.accepted
            stats = ex.stats()
            with ledger.lock:
                high = ledger.attempted
            fields = (
                stats.scheduled,
                stats.ready,
                stats.running,
                stats.completed,
                stats.failed,
                stats.cancelled,
                stats.expired,
            )
            assert all(type(v) is int and v >= 0 for v in fields), stats
            assert stats.running <= workers, stats
            assert low <= total(stats) <= high, (low, stats, high)
            terminal = (stats.completed, stats.failed, stats.cancelled, stats.expired)
            assert all(now >= before for now, before in zip(terminal, last)), (last, stats)
            last = terminal
            time.sleep(0.001)
    except BaseException as exc:
        ledger.errors.append(exc)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("seed", [1, 2])
def test_stress_submit_cancel_real_time(seed: int) -> None:
    workers, submitters, per_submitter = 4, 4, 600
    ledger = Ledger()
    stop = threading.Event()
    start = time.monotonic()
    ex = PriorityExecutor(workers)
    try:
        poller = threading.Thread(target=stats_poller, args=(ex, ledger, stop, workers))
        poller.start()
        run_threads(
            [
                threading.Thread(
                    target=submitter,
                    args=(ex, ledger, range(i * per_submitter, (i + 1) * per_submitter)),
                    kwargs={"seed": seed * 100 + i, "max_delay": 0.02},
                )
                for i in range(submitters)
            ]
        )
        for future in list(ledger.futures.values()):
            with contextlib.suppress(cf.CancelledError, Boom):
                future.result(timeout=TIMEOUT)
    finally:
        stop.set()
        poller.join(TIMEOUT)
        ex.shutdown(wait=True)
    assert len(ledger.futures) == submitters * per_submitter
    outcomes = ledger.check(ex)
    assert outcomes["cancelled"] > 0
    assert outcomes["completed"] > 0
    assert outcomes["failed"] > 0
    assert time.monotonic() - start < 30


@pytest.mark.timeout(60)
def test_stress_with_manual_clock_advanced_concurrently() -> None:
    workers, submitters, per_submitter = 3, 3, 400
    clock = ManualClock()
    ledger = Ledger()
    stop = threading.Event()

    def advancer() -> None:
        while not stop.is_set():
            clock.advance(1)
            time.sleep(0.0005)

    ex = PriorityExecutor(workers, clock=clock)
    ticking = threading.Thread(target=advancer)
    ticking.start()
    try:
        run_threads(
            [
                threading.Thread(
                    target=submitter,
                    args=(ex, ledger, range(i * per_submitter, (i + 1) * per_submitter)),
                    kwargs={"seed": 7 + i, "max_delay": 1.0, "clock_delays": True},
                )
                for i in range(submitters)
            ]
        )
    finally:
        stop.set()
        ticking.join(TIMEOUT)
        clock.advance(100)  # everything still delayed is due now
        ex.shutdown(wait=True)
    assert len(ledger.futures) == submitters * per_submitter
    ledger.check(ex)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("cancel_futures", [False, True])
def test_stress_shutdown_races_submitters(cancel_futures: bool) -> None:
    """A submit() that raises RuntimeError never runs; one that returned a future runs once
    or is cancelled; shutdown() in the middle of it all loses nothing."""
    workers, submitters, per_submitter = 4, 4, 1500
    ledger = Ledger()
    ex = PriorityExecutor(workers)
    barrier = threading.Barrier(submitters + 1, timeout=30)
    closed = threading.Event()

    def closer() -> None:
        barrier.wait()
        ex.shutdown(wait=False, cancel_futures=cancel_futures)
        closed.set()

    threads = [
        threading.Thread(
            target=submitter,
            args=(ex, ledger, range(i * per_submitter, (i + 1) * per_submitter)),
            kwargs={"seed": 31 + i, "max_delay": 0.01, "barrier": barrier, "closed": closed},
        )
        for i in range(submitters)
    ]
    try:
        run_threads([*threads, threading.Thread(target=closer)])
    finally:
        ex.shutdown(wait=True)
    # Each submitter had half its work to race the shutdown with, and a quarter after it.
    assert ledger.rejected, "no submit met the shut-down executor"
    assert len(ledger.futures) + len(ledger.rejected) == submitters * per_submitter
    outcomes = ledger.check(ex)
    if not cancel_futures:
        # Without cancel_futures, only the users' own cancels cancel anything.
        assert outcomes["cancelled"] == len(ledger.cancel_true)


@pytest.mark.timeout(60)
def test_stress_cancel_races_start() -> None:
    """Each task cancelled by another thread right as workers reach it: cancel() returning
    True always means the task never ran, False that it ran once."""
    workers, n = 4, 3000
    ledger = Ledger()
    queue: list[int] = []
    ready = threading.Condition()
    finished = threading.Event()

    def canceller() -> None:
        taken = 0
        while True:
            with ready:
                ready.wait_for(
                    lambda seen=taken: len(queue) > seen or finished.is_set(),
                    timeout=TIMEOUT,
                )
                batch, taken = queue[taken:], len(queue)
            if not batch and finished.is_set():
                return
            for task_id in batch:
                ledger.cancel(task_id)

    ex = PriorityExecutor(workers)
    thread = threading.Thread(target=canceller)
    thread.start()
    try:
        for task_id in range(n):
            ledger.futures[task_id] = ex.submit(ledger.task, task_id)
            ledger.accepted += 1
            with ready:
                queue.append(task_id)
                ready.notify()
    finally:
        finished.set()
        with ready:
            ready.notify()
        thread.join(30)
        ex.shutdown(wait=True)
    assert not thread.is_alive()
    assert len(ledger.cancel_true) + len(ledger.cancel_false) == n
    outcomes = ledger.check(ex)
    assert outcomes["cancelled"] == len(ledger.cancel_true)


class WakingPlanner:
    """Stands in for the scheduler of a promoter: each promotion plans a sleep of a
    microsecond, and every other one wakes the promoter while it is awake, as a timer queued
    meanwhile would (so that the next sleep begins with no wake-up pending, but with one
    taken since it last slept)."""

    def __init__(self, seconds: float) -> None:
        self.clock = MonotonicClock()
        self.promoter = Promoter(self, unique_prefix("promoter"))  # type: ignore[arg-type]
        self.end = self.clock.now() + seconds
        self.rounds = 0

    def promote_and_plan(self) -> float | None:
        self.rounds += 1
        if self.rounds % 2:
            self.promoter.wake()
        now = self.clock.now()
        return None if now > self.end else now + 1e-6


def burn(data: bytes, stop: threading.Event) -> None:
    while not stop.is_set():
        hashlib.sha256(data).digest()  # without the GIL: the other threads lose the CPU


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        return os.cpu_count() or 1


@pytest.mark.timeout(60)
def test_the_promoter_wakes_from_short_sleeps_on_a_busy_machine() -> None:
    """The promoter sleeps until the next due time, often microseconds away, and is woken
    when an earlier timer is queued. Each sleep ends on time, whatever wake-ups came and went
    before it, even when the promoter's thread loses the CPU as the sleep begins (here,
    threads hashing without the GIL outnumber the cores). Before Python 3.13, a
    ``SimpleQueue.get(timeout=t)`` then blocked for ever, and with it every delayed task.
    That loss of the CPU cannot be forced from Python: this makes it likely."""
    planner = WakingPlanner(seconds=2.0)
    stop, data = threading.Event(), bytes(1 << 20)
    burners = [
        threading.Thread(target=burn, args=(data, stop), daemon=True)
        for _ in range(min(usable_cores(), 16) + 1)
    ]
    for burner in burners:
        burner.start()
    try:
        planner.promoter.start()
        thread = planner.promoter._thread
        assert thread is not None
        thread.join(2.0 + TIMEOUT)
        assert not thread.is_alive(), f"a sleep never ended, after {planner.rounds} rounds"
    finally:
        stop.set()
        for burner in burners:
            burner.join(TIMEOUT)
        planner.promoter.wake()  # frees it if it hung (on the lock that a wake-up releases)
    # About 100,000 rounds alone; a few hundred on a machine busy with other work. A sleep
    # that never ended stops them at one.
    assert planner.rounds > 100
