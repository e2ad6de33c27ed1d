"""Promises that a review of the code found broken: one regression test each.

Each test is written as a user would write the code, through the public API, and names the
promise it keeps.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import gc
import logging
import os
import re
import threading
import weakref
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from helpers import (
    TIMEOUT,
    Boom,
    blocked_worker,
    counts,
    executor_threads,
    unique_prefix,
    wait_until,
)

from priority_executor import PriorityExecutor, PriorityFirst, Retry
from priority_executor.testing import ManualClock


def _stats(stats: Any) -> dict[str, int]:
    """A stats snapshot's state fields (not ``retries``, an event count)."""
    return {name: getattr(stats, name) for name in counts()}


# -- 1. A call runs no one else's callbacks -------------------------------------------------


@pytest.mark.timeout(20)
def test_a_submit_runs_no_one_elses_callbacks() -> None:
    # Two executors on one clock, each with a task that expires at t=1. advance() expires
    # them one executor after the other; while it is inside the first one's callback, the
    # test submits a delayed task to the second executor, whose task has expired by the
    # clock but not been expired yet. That submit must not complete the other task's
    # future in the submitting thread.
    clock = ManualClock()
    first_called = threading.Event()
    submitted = threading.Event()
    ran_in: list[str] = []
    guard = threading.Lock()

    def callback(future: Future[Any]) -> None:
        with guard:
            first = not first_called.is_set()
            first_called.set()
        ran_in.append(threading.current_thread().name)
        if first:
            assert submitted.wait(TIMEOUT)

    executors = [PriorityExecutor(max_workers=1, clock=clock) for _ in range(2)]
    try:
        with (
            blocked_worker(executors[0]) as (release0, _),
            blocked_worker(executors[1]) as (release1, _),
        ):
            expiring = [ex.submit(int, expires=1) for ex in executors]
            for future in expiring:
                future.add_done_callback(callback)
            advancing = threading.Thread(target=clock.advance, args=(1,), name="advancing")
            advancing.start()
            assert first_called.wait(TIMEOUT)
            # Whichever executor advance() did first, the other has a task expired by the
            # clock whose expiry no one applied yet.
            for ex, future in zip(executors, expiring):
                if not future.done():
                    ex.submit(int, delay=5)
            submitted.set()
            advancing.join(TIMEOUT)
            assert not advancing.is_alive()
            assert all(future.cancelled() for future in expiring)
            release0.set()
            release1.set()
        assert threading.current_thread().name not in ran_in
    finally:
        submitted.set()
        for ex in executors:
            ex.shutdown(wait=True, cancel_futures=True)


# -- 2. Work for another executor never makes a thread forget its own ------------------------


@pytest.mark.timeout(20)
def test_work_for_another_executor_never_makes_a_thread_forget_its_own() -> None:
    # Inside a task of ``mine``, a done-callback of another executor's future runs; from
    # it, the task's own executor is used as from the task itself: a submit under
    # max_waiting is admitted, and the lane's and the executor's shutdown(wait=True)
    # return without waiting for the task they are called from.
    clock = ManualClock()
    mine = PriorityExecutor(max_workers=1, max_waiting=1, clock=clock)
    other = PriorityExecutor(max_workers=1)
    lane = mine.lane("own")
    go = threading.Event()
    steps: list[str] = []

    def in_others_callback(_: Future[int]) -> None:
        mine.submit(steps.append, "admitted")
        steps.append("submitted")
        lane.shutdown(wait=True)
        steps.append("lane shut down")
        mine.shutdown(wait=True)
        steps.append("shut down")

    def task() -> None:
        assert go.wait(TIMEOUT)
        done = other.submit(int)
        done.result(timeout=TIMEOUT)
        done.add_done_callback(in_others_callback)  # runs here and now: it is done

    try:
        outer = lane.submit(task)
        wait_until(outer.running, what="the task to start")
        held_back = mine.submit(int, delay=60)  # fills max_waiting
        go.set()
        outer.result(timeout=10)
        clock.advance(60)
        assert held_back.result(timeout=TIMEOUT) == 0
        mine.shutdown(wait=True)
        assert steps == ["submitted", "lane shut down", "shut down", "admitted"]
    finally:
        go.set()
        other.shutdown(wait=True)


# -- 3. A lane's throttled task starts at once when a running task of the lane ends ----------


@pytest.mark.timeout(20)
def test_a_throttled_task_starts_when_its_lanes_run_ends_not_after_its_callbacks() -> None:
    with PriorityExecutor(max_workers=2) as ex:
        lane = ex.lane(max_running=1)
        release = threading.Event()
        second_started = threading.Event()
        seen: list[bool] = []
        first = lane.submit(release.wait, TIMEOUT)
        wait_until(lambda: first.running(), what="the first task to start")
        second = lane.submit(second_started.set)
        wait_until(lambda: lane.stats().throttled == 1, what="the second task to be throttled")
        # A callback of the first task waits (a bounded time) for the second one, which may
        # start as soon as the first one's run ended, on the worker that is idle.
        first.add_done_callback(lambda _: seen.append(second_started.wait(5)))
        release.set()
        second.result(timeout=TIMEOUT)
        wait_until(lambda: bool(seen), what="the callback")
        assert seen == [True]


# -- 4. A closed lane refuses every submit ------------------------------------------------------


class _RefusesThirteen(PriorityFirst):
    def sort_key(self, task: Any) -> tuple[Any, ...]:
        if task.priority == 13:
            raise Boom("no key for 13")
        return super().sort_key(task)


@pytest.mark.timeout(10)
def test_a_closed_lane_refuses_a_submit_whatever_its_policy_says() -> None:
    with PriorityExecutor(max_workers=1, policy=_RefusesThirteen()) as ex:
        lane = ex.lane("closed")
        # While open, the broken key fails that task only.
        with pytest.raises(Boom):
            lane.submit(int, priority=13).result(timeout=TIMEOUT)
        before = _stats(lane.stats())
        lane.shutdown()
        with pytest.raises(RuntimeError, match="shutdown"):
            lane.submit(int, priority=13)
        with pytest.raises(RuntimeError, match="shutdown"):
            lane.submit(int)
        assert _stats(lane.stats()) == before == counts(failed=1)


# -- 5. A finished future does not keep its executor alive ------------------------------------


class _Resource:
    """Something an initializer is given, which must go once the executor is gone."""


@pytest.mark.timeout(20)
def test_a_finished_future_does_not_keep_its_executor_alive() -> None:
    def kept_alive(executor_class: type[ThreadPoolExecutor]) -> list[str]:
        resource = _Resource()
        prefix = unique_prefix("kept")
        ex = executor_class(2, prefix, initializer=id, initargs=(resource,))
        futures = [ex.submit(int, i) for i in range(4)]
        assert [f.result(timeout=TIMEOUT) for f in futures] == [0, 1, 2, 3]
        threads = executor_threads(prefix)
        assert threads
        ex.shutdown(wait=True)
        refs = {"executor": weakref.ref(ex), "initargs": weakref.ref(resource)}
        refs.update((thread.name, weakref.ref(thread)) for thread in threads)
        del ex, resource, threads
        gc.collect()
        alive = [name for name, ref in refs.items() if ref() is not None]
        assert [f.result() for f in futures] == [0, 1, 2, 3]  # kept, and still usable
        return alive

    assert kept_alive(ThreadPoolExecutor) == []
    assert kept_alive(PriorityExecutor) == []


# -- 6. A dropped executor leaves no garbage in reference cycles ------------------------------


def _use_and_drop(executor_class: type[ThreadPoolExecutor]) -> None:
    ex = executor_class(2)
    futures = [ex.submit(int, i) for i in range(10)]
    futures.append(ex.submit(divmod, 1, 0))  # one fails: its traceback is kept
    futures.append(ex.submit(int, 1))
    futures[-1].cancel()
    cf.wait(futures, timeout=TIMEOUT)
    if isinstance(ex, PriorityExecutor):
        # The rest of what an executor may have made: a promoter, deadlines, a lane with
        # timed limits, retries, a series, a rescheduled task.
        lane = ex.lane("limited", max_running=1, max_starts=5, per=0.01, cooldown=0.001)
        lane_futures = [lane.submit(int, i, expires=30) for i in range(3)]
        retried = ex.lane(retry=Retry(2, backoff=0)).submit(divmod, 1, 0)
        series = ex.submit_recurring(int, interval=30)
        later = ex.submit(int, delay=30)
        ex.reschedule(later, priority=3)
        # Dependents: one that runs, one ended by its upstream's failure, one still
        # blocked when the shutdown cancels it.
        ran = ex.options(after=futures[0]).submit(int, 1)
        ended = ex.options(after=futures[10]).submit(int)
        blocked = ex.options(after=later).submit(int)
        cf.wait([*lane_futures, retried, ran, ended], timeout=TIMEOUT)
        assert ran.result() == 1 and ended.cancelled()
        assert [f.result() for f in lane_futures] == [0, 1, 2]
        assert isinstance(retried.exception(), ZeroDivisionError)
        # Weighted lanes inside a lane that holds their tasks back, some cancelled there.
        hosts = ex.lane("hosts", max_running=1, max_starts=1, per=30, weight=2)
        gate = threading.Event()
        held = [ex.lane(f"host-{i}", parent=hosts).submit(gate.wait, TIMEOUT) for i in range(3)]
        # One runs; hosts' window holds the others back, in their lanes, when it ends.
        wait_until(lambda: ex.stats().running == 1 and ex.stats().throttled == 2)
        series.cancel()
        ex.shutdown(wait=False, cancel_futures=True)
        gate.set()
        ex.shutdown(wait=True)
        assert later.cancelled() and blocked.cancelled() and sum(f.cancelled() for f in held) >= 1
    else:
        ex.shutdown(wait=True)
    assert isinstance(futures[10].exception(), ZeroDivisionError)


def _ours(obj: object) -> bool:
    """Whether an object of the garbage belongs to an executor (its module, or a thread)."""
    kind = obj if isinstance(obj, type) else type(obj)
    module = getattr(kind, "__module__", "") or ""
    return module.startswith(("priority_executor", "concurrent.futures", "threading"))


@pytest.mark.timeout(30)
def test_a_dropped_executor_leaves_no_garbage_in_reference_cycles() -> None:
    for executor_class in (ThreadPoolExecutor, PriorityExecutor):
        gc.collect()
        debug = gc.get_debug()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            _use_and_drop(executor_class)
            gc.collect()
            garbage = sorted({repr(type(obj)) for obj in gc.garbage if _ours(obj)})
        finally:
            gc.set_debug(debug)
            gc.garbage.clear()
        assert garbage == [], executor_class.__name__


# -- 7. A forked child holds none of the parent's tasks, in its lanes either ------------------


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")
@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")
@pytest.mark.timeout(30)
def test_a_forked_childs_lane_counts_none_of_the_parents_tasks() -> None:
    with PriorityExecutor(max_workers=2) as ex:
        lane = ex.lane(max_running=1)
        release = threading.Event()
        running = lane.submit(release.wait, TIMEOUT)
        wait_until(running.running, what="the lane's task to start")
        throttled = lane.submit(int)
        wait_until(lambda: lane.stats().throttled == 1, what="the lane's task to wait")
        scheduled = lane.submit(int, delay=30)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                found = (_stats(ex.stats()), _stats(lane.stats()), len(ex.waiting()))
                os.write(write, repr(found).encode())
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read) as pipe:
            child = pipe.read()
        os.waitpid(pid, 0)
        release.set()
        assert throttled.result(timeout=TIMEOUT) == 0
        scheduled.cancel()
    nothing = counts()
    assert child == repr((nothing, nothing, 0))


# -- 8. A task counts where its future ended ---------------------------------------------------


@pytest.mark.timeout(20)
def test_a_retry_that_expires_before_it_starts_counts_as_failed() -> None:
    clock = ManualClock()
    with PriorityExecutor(max_workers=1, clock=clock) as ex:
        lane = ex.lane(retry=Retry(2, backoff=1))

        def fails() -> None:
            raise Boom("attempt")

        future = lane.submit(fails, expires=5)
        wait_until(lambda: ex.stats().retries == 1, what="the first attempt to fail")
        with blocked_worker(ex):
            clock.advance(1)  # the retry is due, but the only worker is busy
            clock.advance(4)  # and its deadline passes before it starts
            with pytest.raises(Boom, match="attempt"):
                future.result(timeout=TIMEOUT)
            assert _stats(lane.stats()) == counts(failed=1)
            assert _stats(ex.stats()) == counts(failed=1, running=1)


# -- 9. A lane's due task at its limit is throttled at once -----------------------------------


@pytest.mark.timeout(20)
def test_a_lanes_due_task_at_its_limit_is_throttled_whether_a_worker_looked_or_not() -> None:
    with PriorityExecutor(max_workers=1) as ex:
        lane = ex.lane("one at a time", max_running=1)
        release = threading.Event()
        first = lane.submit(release.wait, TIMEOUT)
        wait_until(first.running, what="the first task to start")
        second = lane.submit(int)  # due; its lane is at its limit, the only worker busy
        try:
            assert ex.stats().throttled == 1 and ex.stats().ready == 0
            assert lane.stats().throttled == 1
            assert [task.state for task in ex.waiting()] == ["throttled"]
        finally:
            release.set()
        assert second.result(timeout=TIMEOUT) == 0


# -- 10. A future reads as ThreadPoolExecutor's ------------------------------------------------


def _shape(text: str) -> str:
    return re.sub(r"0x[0-9a-fA-F]+", "0x...", text)


@pytest.mark.timeout(20)
def test_a_future_reads_and_waits_as_threadpoolexecutors(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def raises(_: Future[Any]) -> None:
        raise Boom("in a callback")

    shapes = {}
    done: dict[str, Future[int]] = {}
    with contextlib.ExitStack() as stack:
        tpe = stack.enter_context(ThreadPoolExecutor(1))
        ours = stack.enter_context(PriorityExecutor(1))
        remote = stack.enter_context(PriorityExecutor(1, backend=tpe))
        for name, ex in (("tpe", tpe), ("ours", ours), ("remote", remote)):
            release = threading.Event()
            pending = ex.submit(release.wait, TIMEOUT)
            wait_until(pending.running, what="the task to start")
            queued = ex.submit(int, 5)
            waiting = _shape(repr(queued))
            release.set()
            assert queued.result(timeout=TIMEOUT) == 5
            caplog.clear()
            with caplog.at_level(logging.ERROR, logger="concurrent.futures"):
                queued.add_done_callback(raises)
            shapes[name] = (waiting, _shape(repr(queued)), _shape(caplog.messages[0]))
            done[name] = queued
    assert shapes["ours"] == shapes["remote"] == shapes["tpe"]
    assert shapes["ours"][1] == "<Future at 0x... state=finished returned int>"
    for future in done.values():
        # Its condition answers what a threading.Condition answers.
        condition = future._condition  # type: ignore[attr-defined]
        with condition:
            assert condition.wait_for(future.done) is True
            assert condition.wait_for(lambda: 0, timeout=0.01) == 0
            condition.notify()
            condition.notify(2)
            condition.notify_all()


@contextlib.contextmanager
def _one_worker_held(ex: cf.Executor) -> Iterator[threading.Event]:
    """Hold an executor's worker until the event is set (at the latest on exit)."""
    started, release = threading.Event(), threading.Event()

    def blocker() -> None:
        started.set()
        release.wait(TIMEOUT)

    ex.submit(blocker)
    try:
        assert started.wait(TIMEOUT)
        yield release
    finally:
        release.set()


@pytest.mark.timeout(20)
def test_a_futures_condition_notifies_as_a_threading_condition() -> None:
    def woken(future: Future[Any], notify: int | None) -> int:
        condition = future._condition  # type: ignore[attr-defined]
        sleeping: list[None] = []
        results: list[bool] = []

        def waiter() -> None:
            with condition:
                sleeping.append(None)
                results.append(condition.wait(0.5))

        threads = [threading.Thread(target=waiter) for _ in range(3)]
        for thread in threads:
            thread.start()
        wait_until(lambda: len(sleeping) == 3, what="the waiters")
        with condition:  # a waiter counted has let go of it in wait(): it sleeps
            if notify is None:
                condition.notify()
            else:
                condition.notify(notify)
        for thread in threads:
            thread.join(TIMEOUT)
        return results.count(True)

    for executor_class in (ThreadPoolExecutor, PriorityExecutor):
        with executor_class(1) as ex, _one_worker_held(ex):
            future = ex.submit(int)
            assert (woken(future, None), woken(future, 2)) == (1, 2), executor_class.__name__
            assert not future.done()
