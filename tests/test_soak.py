"""Concurrency stress, and leaks of threads and memory.

The quick variants run in every test run, in a few seconds. ``test_soak`` is the long
variant, for on-demand runs only: it is skipped unless the environment variable
``PRIORITY_EXECUTOR_SOAK=1`` is set (``PRIORITY_EXECUTOR_SOAK_SECONDS`` sets its length,
60 s by default), e.g.::

    PRIORITY_EXECUTOR_SOAK=1 python -m pytest tests/test_soak.py::test_soak
"""

from __future__ import annotations

import collections
import gc
import itertools
import os
import random
import threading
import time
import tracemalloc
import weakref
from concurrent.futures import CancelledError, Future
from concurrent.futures import wait as futures_wait
from typing import Any, Callable

import pytest
from helpers import executor_threads, unique_prefix, wait_until

from priority_executor import PriorityExecutor

TIMEOUT = 20.0
BACKLOG = 4000  # tasks waiting in a stressed executor, at most (about)
SOAK = os.environ.get("PRIORITY_EXECUTOR_SOAK") == "1"
SOAK_SECONDS = float(os.environ.get("PRIORITY_EXECUTOR_SOAK_SECONDS", "60"))

# -- the stress scenario ----------------------------------------------------------------------


class Record:
    """One submit() call: what was asked, what it returned, what happened to the task."""

    __slots__ = ("cancel_results", "error", "future", "kind", "tid")

    def __init__(self, tid: int, kind: str) -> None:
        self.tid = tid
        self.kind = kind  # "plain", "delayed", "expiring", "raising" or "series"
        self.future: Future[Any] | None = None
        self.error: BaseException | None = None
        self.cancel_results: list[bool] = []


class Stress:
    """Submitter threads, canceller threads and a shutdown racing them all."""

    def __init__(self, seed: int, workers: int, submitters: int, cancellers: int) -> None:
        self.seed = seed
        self.prefix = unique_prefix("stress")
        self.executor = PriorityExecutor(max_workers=workers, thread_name_prefix=self.prefix)
        self.submitters = submitters
        self.cancellers = cancellers
        self.ids = itertools.count()
        self.lock = threading.Lock()
        self.runs: collections.Counter[int] = collections.Counter()
        self.records: list[Record] = []
        self.cancellable: list[Record] = []
        self.in_series_run: set[int] = set()
        self.overlaps: list[int] = []
        self.closing = threading.Event()  # set just before shutdown() is called
        self.stop = threading.Event()  # ends the submitters and the cancellers
        self.unexpected: list[BaseException] = []

    # Task bodies: record the run; spin a little, to keep the workers busy.

    def task(self, tid: int, spin: int, fail: bool) -> int:
        with self.lock:
            self.runs[tid] += 1
        for _ in range(spin):
            pass
        if fail:
            raise ValueError(tid)
        return tid

    def series_run(self, tid: int) -> None:
        with self.lock:
            self.runs[tid] += 1
            if tid in self.in_series_run:
                self.overlaps.append(tid)
            self.in_series_run.add(tid)
        time.sleep(0)
        with self.lock:
            self.in_series_run.discard(tid)

    def submitter(self, index: int) -> None:
        rng = random.Random(self.seed * 1000 + index)
        ex = self.executor
        try:
            while not self.stop.is_set():
                tid = next(self.ids)
                roll = rng.random()
                kwargs: dict[str, Any] = {"priority": rng.choice([-10, 0, 0, 5, 10])}
                if roll < 0.03:
                    kind = "series"
                    fn: Callable[..., Any] = self.series_run
                    args: tuple[Any, ...] = (tid,)
                    kwargs["interval"] = rng.choice([0.0005, 0.002, 0.01])
                    kwargs["fixed_rate"] = rng.random() < 0.5
                else:
                    fn, args = self.task, (tid, rng.randrange(0, 300), False)
                    if roll < 0.25:
                        kind = "delayed"
                        kwargs["delay"] = rng.uniform(0, 0.005)
                    elif roll < 0.55:
                        kind = "expiring"
                        kwargs["expires"] = rng.uniform(0.0002, 0.004)
                    elif roll < 0.6:
                        kind = "raising"
                        args = (tid, 0, True)
                    else:
                        kind = "plain"
                record = Record(tid, kind)
                try:
                    if kind == "series":
                        record.future = ex.submit_recurring(fn, *args, **kwargs)
                    else:
                        record.future = ex.submit(fn, *args, **kwargs)
                except RuntimeError as exc:
                    record.error = exc
                    # Refused only once shutdown() has been called.
                    if not self.closing.is_set():
                        self.unexpected.append(exc)
                    time.sleep(0.001)  # a few refusals prove the point: leave the drain the GIL
                # list.append() is atomic: no lock that the tasks' bodies would contend for.
                self.records.append(record)
                if record.future is not None and (kind == "series" or rng.random() < 0.3):
                    self.cancellable.append(record)
                if record.future is not None and rng.random() < 0.05:
                    record.cancel_results.append(record.future.cancel())
                if rng.random() < 0.02:
                    time.sleep(0.0005)  # let the workers catch up now and then
                if tid % 64 == 0:
                    # Keep the backlog bounded, so that the drain after shutdown() is short
                    # on any Python (workers get less of the GIL on some).
                    while not self.stop.is_set() and self.backlog() > BACKLOG:
                        time.sleep(0.001)
        except BaseException as exc:
            self.unexpected.append(exc)

    def backlog(self) -> int:
        stats = self.executor.stats()
        return stats.scheduled + stats.ready

    def canceller(self, index: int) -> None:
        rng = random.Random(self.seed * 1000 + 500 + index)
        try:
            while not self.stop.is_set():
                # No lock: the list only grows, and a lock taken in a tight loop here would
                # starve the task bodies that take it too (unfair locks, under the GIL).
                record = rng.choice(self.cancellable) if self.cancellable else None
                if record is None or record.future is None:
                    time.sleep(0.0002)
                    continue
                record.cancel_results.append(record.future.cancel())
                time.sleep(0)
        except BaseException as exc:
            self.unexpected.append(exc)

    def run(self, seconds: float, cancel_futures: bool) -> None:
        threads = [
            threading.Thread(target=self.submitter, args=(i,), name=f"{self.prefix}-submit-{i}")
            for i in range(self.submitters)
        ] + [
            threading.Thread(target=self.canceller, args=(i,), name=f"{self.prefix}-cancel-{i}")
            for i in range(self.cancellers)
        ]
        for thread in threads:
            thread.start()
        try:
            time.sleep(seconds)
            self.closing.set()
            # shutdown() races the submitters, which go on submitting for a while after.
            self.executor.shutdown(wait=True, cancel_futures=cancel_futures)
            leftover = [t.name for t in executor_threads(self.prefix)]
            time.sleep(0.05)
        finally:
            self.stop.set()
            for thread in threads:
                thread.join(TIMEOUT)
        assert not any(t.is_alive() for t in threads), "a submitter or canceller hung"
        assert leftover == [], f"threads alive after shutdown(wait=True): {leftover}"
        self.check()

    def check(self) -> None:
        assert self.unexpected == []
        assert self.overlaps == [], "two runs of one series overlapped"
        accepted = [r for r in self.records if r.future is not None]
        refused = [r for r in self.records if r.future is None]
        assert refused, "shutdown() raced no submit(); the test is too slow to prove anything"
        for record in refused:
            assert isinstance(record.error, RuntimeError)
            assert str(record.error) == "cannot schedule new futures after shutdown"
            assert self.runs[record.tid] == 0, f"refused task {record.tid} ran all the same"
        one_shot = [r for r in accepted if r.kind != "series"]
        series = [r for r in accepted if r.kind == "series"]
        # shutdown(wait=True) returned: every accepted task has ended, none is left waiting.
        pending = [r for r in accepted if not r.future.done()]  # type: ignore[union-attr]
        assert not pending, f"{len(pending)} futures not done after shutdown(wait=True)"
        futures = [r.future for r in accepted]
        assert not futures_wait(futures, timeout=0).not_done  # cancellations were notified
        completed = failed = cancelled = 0
        for record in one_shot:
            future = record.future
            assert future is not None
            runs = self.runs[record.tid]
            if future.cancelled():
                assert runs == 0, f"cancelled or expired task {record.tid} ran {runs} times"
                assert False not in record.cancel_results
                with pytest.raises(CancelledError):
                    future.result(timeout=0)
                cancelled += 1
                continue
            assert runs == 1, f"task {record.tid} ({record.kind}) ran {runs} times"
            assert True not in record.cancel_results, "cancel() said True, yet the task ran"
            exc = future.exception(timeout=0)
            if record.kind == "raising":
                assert isinstance(exc, ValueError) and exc.args == (record.tid,)
                failed += 1
            else:
                assert exc is None and future.result(timeout=0) == record.tid
                completed += 1
        series_runs = 0
        for record in series:
            future = record.future
            assert future is not None
            assert future.cancelled(), "shutdown() cancels every series"
            series_runs += self.runs[record.tid]
        stats = self.executor.stats()
        assert (stats.scheduled, stats.ready, stats.running) == (0, 0, 0), stats
        assert stats.completed == completed + series_runs, stats
        assert stats.failed == failed, stats
        # Each series counts once in cancelled, and each cancelled or expired task once.
        assert stats.cancelled + stats.expired == cancelled + len(series), stats
        assert completed > 100 and cancelled > 10, (completed, cancelled)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("cancel_futures", [False, True], ids=["drain", "cancel_futures"])
def test_stress_submits_cancels_deadlines_and_shutdown_race(cancel_futures: bool) -> None:
    seed = random.randrange(1 << 30)
    stress = Stress(seed, workers=4, submitters=6, cancellers=2)
    try:
        stress.run(1.5, cancel_futures)
    except AssertionError as exc:
        raise AssertionError(f"stress failed with seed {seed}: {exc}") from exc


# -- leaks --------------------------------------------------------------------------------------


def use_executor_once(i: int, prefix: str) -> None:
    with PriorityExecutor(max_workers=2, thread_name_prefix=prefix) as ex:
        assert ex.submit(pow, i, 2).result(timeout=TIMEOUT) == i * i
        if i % 3 == 0:  # a delayed task starts the promoter as well
            assert ex.submit(abs, -i, delay=0.0001).result(timeout=TIMEOUT) == i
        elif i % 3 == 1:
            ex.submit(abs, -i, expires=60).result(timeout=TIMEOUT)
            ex.submit_recurring(abs, -i, interval=60, delay=60)  # cancelled by shutdown


@pytest.mark.timeout(180)  # a second alone; a hang only would reach it
def test_a_thousand_executors_leave_no_threads_and_no_memory() -> None:
    prefix = unique_prefix("churn")
    for i in range(30):  # warm up: caches, lazily imported modules, counters
        use_executor_once(i, prefix)
    gc.collect()
    threads_before = set(threading.enumerate())
    tracemalloc.start()
    try:
        gc.collect()
        before, _ = tracemalloc.get_traced_memory()
        for i in range(1000):
            use_executor_once(i, prefix)
        assert executor_threads(prefix) == []
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert set(threading.enumerate()) <= threads_before
    # An executor with its threads and tasks takes tens of kilobytes; a leak of one per
    # executor would show as megabytes.
    assert after - before < 256 * 1024, f"{(after - before) / 1024:.0f} KiB left behind"


@pytest.mark.timeout(40)
def test_dropped_executors_leave_no_threads() -> None:
    prefix = unique_prefix("dropped")
    futures: list[Future[Any]] = []
    refs = []
    for i in range(200):
        ex = PriorityExecutor(max_workers=2, thread_name_prefix=prefix)
        futures.append(ex.submit(pow, i, 2))
        futures.append(ex.submit(abs, -i, delay=0.001))
        refs.append(weakref.ref(ex))
        del ex
    gc.collect()
    assert [r for r in refs if r() is not None] == []
    assert not futures_wait(futures, timeout=TIMEOUT).not_done
    wait_until(
        lambda: not executor_threads(prefix), TIMEOUT, what="the dropped executors' threads to exit"
    )


def test_a_finished_task_is_not_kept_alive_by_its_deadline() -> None:
    """A task's result belongs to its future: once the task has run and the caller drops the
    future, the result is freed, as with ThreadPoolExecutor, even if the task had a start
    deadline that lies far ahead."""

    class Result:
        pass

    ex = PriorityExecutor(max_workers=1)
    try:
        refs = []
        for kwargs in ({}, {"expires": 3600}, {"delay": 0.001, "expires": 3600}):
            future = ex.submit(Result, **kwargs)  # type: ignore[arg-type]
            refs.append(weakref.ref(future.result(timeout=TIMEOUT)))
            del future
        gc.collect()
        alive = [i for i, ref in enumerate(refs) if ref() is not None]
        assert alive == [], "results of finished tasks still referenced by the executor"
    finally:
        ex.shutdown(wait=True)


# -- the long variant -----------------------------------------------------------------------


@pytest.mark.skipif(not SOAK, reason="long soak: set PRIORITY_EXECUTOR_SOAK=1 to run it")
@pytest.mark.timeout(SOAK_SECONDS * 3 + 120)
def test_soak() -> None:
    """On demand only (PRIORITY_EXECUTOR_SOAK=1): rounds of the stress scenario, with more
    threads and longer races, then executor churn, for PRIORITY_EXECUTOR_SOAK_SECONDS (60 by
    default), checking threads and memory at the end."""
    end = time.monotonic() + SOAK_SECONDS
    rounds = 0
    threads_before = set(threading.enumerate())
    while time.monotonic() < end:
        seed = random.randrange(1 << 30)
        stress = Stress(seed, workers=8, submitters=12, cancellers=4)
        try:
            stress.run(4.0, cancel_futures=rounds % 2 == 1)
        except AssertionError as exc:
            raise AssertionError(f"soak round {rounds} failed with seed {seed}: {exc}") from exc
        del stress
        prefix = unique_prefix("soak-churn")
        for i in range(300):
            use_executor_once(i, prefix)
        rounds += 1
    gc.collect()
    assert set(threading.enumerate()) <= threads_before
