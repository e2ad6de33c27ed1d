"""Tasks that wait for other futures: ``options(after=..., after_any=...)`` and
``submit_graph()`` (issue 47).

Timing runs on a ``ManualClock``; the races between an upstream's end and the dependent's
claim by someone else run in both orders on it, then on real threads many times over.
"""

from __future__ import annotations

import asyncio
import gc
import graphlib
import sys
import threading
import time
import weakref
from concurrent.futures import (
    FIRST_COMPLETED,
    CancelledError,
    Future,
    ThreadPoolExecutor,
    as_completed,
    wait,
)
from typing import Any

import pytest
from helpers import TIMEOUT, Boom, blocked_worker, counts, stats_fields, wait_until

from priority_executor import (
    DependencyFailed,
    Expired,
    PriorityExecutor,
    Retry,
    submit_graph,
)
from priority_executor.testing import ManualClock


def raise_boom() -> None:
    raise Boom("upstream broke")


def done_future(result: object = None) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(result)
    return future


# -- 1. submit after futures -----------------------------------------------------------------


def test_a_dependent_is_blocked_until_its_upstream_is_done_then_runs() -> None:
    clock = ManualClock()
    with PriorityExecutor(2, clock=clock) as ex:
        upstream = ex.submit(lambda: 20, delay=5)
        dependent = ex.options(after=upstream).submit(lambda: upstream.result() + 1)
        clock.settle(TIMEOUT)
        assert not dependent.done()
        assert stats_fields(ex) == counts(scheduled=1, blocked=1)
        [scheduled, blocked] = ex.waiting()
        assert (scheduled.future, scheduled.state, scheduled.after) == (upstream, "scheduled", ())
        assert (blocked.future, blocked.state, blocked.after) == (dependent, "blocked", (upstream,))
        clock.advance(5)
        assert dependent.result(TIMEOUT) == 21
        clock.settle(TIMEOUT)
        assert stats_fields(ex) == counts(completed=2)


def test_waiting_lists_only_the_upstreams_not_done_yet() -> None:
    with PriorityExecutor(1) as ex:
        first: Future[int] = Future()
        second: Future[int] = Future()
        dependent = ex.options(after=[first, second]).submit(int)
        assert ex.waiting()[0].after == (first, second)
        first.set_result(1)
        assert ex.waiting()[0].after == (second,)
        second.set_result(2)
        assert dependent.result(TIMEOUT) == 0
        assert ex.waiting() == []


def test_a_delay_counts_from_the_submit_and_is_kept_once_released() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        early: Future[None] = Future()
        late: Future[None] = Future()
        waits = ex.options(after=early).submit(str, "waits", delay=5)
        overdue = ex.options(after=late).submit(str, "overdue", delay=5)
        clock.advance(2)
        early.set_result(None)  # done before the delay: due at 5, as submitted
        assert ex.waiting()[0].state == "scheduled"
        assert ex.waiting()[0].due_in == pytest.approx(3)
        clock.advance(5)  # t = 7
        assert waits.result(TIMEOUT) == "waits"
        late.set_result(None)  # done after its due time: due at once
        assert overdue.result(TIMEOUT) == "overdue"


def test_released_dependents_start_in_priority_order() -> None:
    clock = ManualClock()
    ran: list[str] = []
    with PriorityExecutor(1, clock=clock) as ex:
        upstream: Future[None] = Future()
        view = ex.options(after=upstream)
        futures = [
            view.submit(ran.append, "low", priority=-1),
            view.submit(ran.append, "high", priority=5),
            view.submit(ran.append, "normal"),
        ]
        with blocked_worker(ex) as (release, _):
            upstream.set_result(None)
            assert [task.state for task in ex.waiting()] == ["ready"] * 3
            release.set()
        wait(futures, TIMEOUT)
    assert ran == ["high", "normal", "low"]


def test_a_dependent_holds_no_worker_while_it_waits() -> None:
    # One worker, the dependent first: were it to wait in a worker, the upstream could
    # never run.
    with PriorityExecutor(1) as ex:
        gate = threading.Event()
        upstream = ex.submit(gate.wait, TIMEOUT, delay=0.05)
        dependent = ex.options(after=upstream).submit(str, "after")
        other = ex.submit(str, "meanwhile")
        assert other.result(TIMEOUT) == "meanwhile"
        gate.set()
        assert dependent.result(TIMEOUT) == "after"


def test_any_concurrent_future_is_an_upstream() -> None:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:

        async def coroutine() -> str:
            return "loop"

        with PriorityExecutor(2) as ex, ThreadPoolExecutor(1) as pool:
            other = PriorityExecutor(1)
            lane = ex.lane("elsewhere")
            upstreams = [
                pool.submit(str, "pool"),
                other.submit(str, "other executor"),
                lane.submit(str, "lane"),
                asyncio.run_coroutine_threadsafe(coroutine(), loop),
                done_future("by hand"),
            ]
            dependent = ex.options(after=upstreams).submit(
                lambda: [future.result() for future in upstreams]
            )
            assert dependent.result(TIMEOUT) == [
                "pool",
                "other executor",
                "lane",
                "loop",
                "by hand",
            ]
            other.shutdown()
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(TIMEOUT)
        loop.close()


def test_lanes_recurring_series_and_map_wait_too() -> None:
    clock = ManualClock()
    with PriorityExecutor(2, clock=clock) as ex:
        upstream: Future[None] = Future()
        lane = ex.lane("db", max_running=1)
        in_lane = lane.options(after=upstream).submit(str, "lane")
        runs: list[int] = []
        series = ex.options(after=upstream).submit_recurring(runs.append, 1, interval=10)
        mapped = ex.options(after=upstream).map(str, [1, 2, 3])
        clock.settle(TIMEOUT)
        assert lane.stats().blocked == 1
        assert ex.stats().blocked == 5  # a series counts once
        assert runs == []
        upstream.set_result(None)
        assert in_lane.result(TIMEOUT) == "lane"
        assert list(mapped) == ["1", "2", "3"]
        clock.settle(TIMEOUT)
        assert runs == [1]
        clock.advance(10)  # later runs wait for nothing
        clock.settle(TIMEOUT)
        assert runs == [1, 1]
        assert series.cancel()


def test_a_dependent_keeps_its_retries() -> None:
    clock = ManualClock()
    attempts: list[int] = []

    def flaky() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise Boom("again")
        return "third time"

    with PriorityExecutor(1, clock=clock, retry=Retry(3, backoff=1.0)) as ex:
        upstream = ex.submit(str, "up")
        dependent = ex.options(after=upstream).submit(flaky)
        clock.settle(TIMEOUT)
        clock.advance(1)
        clock.settle(TIMEOUT)
        clock.advance(2)
        assert dependent.result(TIMEOUT) == "third time"
        assert ex.stats().retries == 2


def test_reschedule_moves_a_blocked_task_which_stays_blocked() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        upstream: Future[None] = Future()
        dependent = ex.options(after=upstream).submit(str, "moved")
        assert ex.reschedule(dependent, priority=7, delay=3)
        [task] = ex.waiting()
        assert (task.state, task.priority, task.due_in, task.after) == (
            "blocked",
            7,
            3.0,
            (upstream,),
        )
        assert ex.stats().blocked == 1
        upstream.set_result(None)
        assert ex.waiting()[0].state == "scheduled"
        clock.advance(3)
        assert dependent.result(TIMEOUT) == "moved"


# -- 2. failure semantics --------------------------------------------------------------------


def test_a_failed_upstream_ends_its_dependents_transitively_at_once() -> None:
    with PriorityExecutor(2) as ex:
        gate = threading.Event()
        upstream = ex.submit(lambda: gate.wait(TIMEOUT) and raise_boom())
        child = ex.options(after=upstream).submit(str, "never")
        grandchild = ex.options(after=child).submit(str, "never")
        gate.set()
        # Reported to wait() and as_completed() as it happens.
        done, _ = wait([child, grandchild], TIMEOUT)
        assert done == {child, grandchild}
        assert set(as_completed([child, grandchild], TIMEOUT)) == {child, grandchild}
        for future in (child, grandchild):
            assert future.cancelled()
            with pytest.raises(DependencyFailed) as raised:
                future.result()
            error = raised.value
            assert isinstance(error, CancelledError)
            assert error.upstream is upstream  # however far upstream
            assert error.reason == "failed"
            assert error.task == "str"
            assert isinstance(error.__cause__, Boom)
            assert "str did not run: its upstream <Future" in str(error)
            assert "failed" in str(error)
            with pytest.raises(DependencyFailed):
                future.exception()
        wait_until(lambda: ex.stats().cancelled == 2)
        assert stats_fields(ex) == counts(failed=1, cancelled=2)


def test_a_cancelled_or_expired_upstream_names_why() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        cancelled = ex.submit(int, delay=10)
        expiring = ex.submit(int, delay=10, expires=11)
        after_cancelled = ex.options(after=cancelled).submit(int)
        after_expired = ex.options(after=expiring).submit(int)
        assert cancelled.cancel()
        with pytest.raises(DependencyFailed, match="was cancelled") as raised:
            after_cancelled.result(0)
        assert (raised.value.upstream, raised.value.reason) == (cancelled, "cancelled")
        assert raised.value.__cause__ is None
        clock.advance(11)
        with pytest.raises(DependencyFailed, match="expired") as raised:
            after_expired.result(0)
        assert (raised.value.upstream, raised.value.reason) == (expiring, "expired")
        assert stats_fields(ex) == counts(cancelled=3, expired=1)


def test_after_any_runs_on_any_outcome_and_reads_the_upstreams() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        ok = ex.submit(str, "ok")
        failed = ex.submit(raise_boom)
        cancelled = ex.submit(int, delay=10)
        expired = ex.submit(int, delay=10, expires=11)
        upstreams = [ok, failed, cancelled, expired]

        def report() -> list[str]:
            return [
                "cancelled" if future.cancelled() else repr(future.exception())
                for future in upstreams
            ]

        summary = ex.options(after_any=upstreams).submit(report)
        assert cancelled.cancel()
        clock.advance(11)
        reported = ["None", "Boom('upstream broke')", "cancelled", "cancelled"]
        assert summary.result(TIMEOUT) == reported


def test_after_and_after_any_together() -> None:
    with PriorityExecutor(1) as ex:
        needed = done_future("needed")
        optional = ex.submit(raise_boom)
        both = ex.options(after=needed, after_any=optional).submit(str, "ran")
        assert both.result(TIMEOUT) == "ran"
        broken = ex.submit(raise_boom)
        fails = ex.options(after=broken, after_any=optional).submit(str, "never")
        with pytest.raises(DependencyFailed):
            fails.result(TIMEOUT)


def test_cancelling_a_task_cancels_its_transitive_dependents_in_one_call() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        root = ex.submit(int, delay=10)
        left = ex.options(after=root).submit(int)
        right = ex.options(after=root).submit(int)
        joined = ex.options(after=[left, right]).submit(int)
        assert root.cancel()
        assert all(future.cancelled() for future in (left, right, joined))
        assert stats_fields(ex) == counts(cancelled=4)


def test_a_chain_of_10000_fails_without_recursion() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        root = ex.submit(raise_boom, delay=1)
        chain = [root]
        for _ in range(10_000):
            chain.append(ex.options(after=chain[-1]).submit(int))
        assert ex.stats().blocked == 10_000
        depth = sys.getrecursionlimit()
        sys.setrecursionlimit(200)  # a nested end per link would need 10,000 frames
        try:
            clock.advance(1)
            # The worker that ran the root ends the chain, maybe handing steps to the
            # thread that holds the lock meanwhile: each goes on with what it was handed.
            wait_until(lambda: ex.stats().blocked == 0, what="the chain to end")
        finally:
            sys.setrecursionlimit(depth)
        assert all(future.cancelled() for future in chain[1:])
        with pytest.raises(DependencyFailed) as raised:
            chain[-1].result(0)
        assert raised.value.upstream is root
        assert stats_fields(ex) == counts(failed=1, cancelled=10_000)


def test_a_chain_of_10000_cancelled_in_one_call_without_recursion() -> None:
    with PriorityExecutor(1) as ex:
        root = ex.submit(int, delay=3600)
        chain = [root]
        for _ in range(10_000):
            chain.append(ex.options(after=chain[-1]).submit(int))
        depth = sys.getrecursionlimit()
        sys.setrecursionlimit(200)
        try:
            assert root.cancel()
        finally:
            sys.setrecursionlimit(depth)
        assert all(future.cancelled() for future in chain)


def test_a_start_deadline_applies_while_blocked() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        never: Future[None] = Future()  # a future that never finishes: the user bounds it
        dependent = ex.options(after=never).submit(int, expires=5)
        grandchild = ex.options(after=dependent).submit(int)
        assert ex.waiting()[0].expires_in == 5
        clock.advance(5)
        with pytest.raises(Expired):
            dependent.result(0)
        with pytest.raises(DependencyFailed, match="expired"):
            grandchild.result(0)
        never.set_result(None)  # too late: nothing changes
        clock.settle(TIMEOUT)
        assert stats_fields(ex) == counts(expired=1, cancelled=1)


def test_shutdown_with_cancel_futures_ends_blocked_dependents() -> None:
    ex = PriorityExecutor(1)
    upstream: Future[None] = Future()
    dependent = ex.options(after=upstream).submit(int)
    ex.shutdown(cancel_futures=True)
    assert dependent.cancelled()
    with pytest.raises(CancelledError) as raised:
        dependent.result(0)
    assert type(raised.value) is CancelledError  # by the shutdown, not by an upstream
    upstream.set_result(None)
    assert stats_fields(ex) == counts(cancelled=1)


def test_shutdown_waits_for_blocked_dependents_whose_upstreams_finish() -> None:
    ex = PriorityExecutor(1)
    upstream: Future[None] = Future()
    dependent = ex.options(after=upstream).submit(str, "still runs")
    threading.Timer(0.05, upstream.set_result, (None,)).start()
    ex.shutdown(wait=True)
    assert dependent.result(0) == "still runs"


def test_an_exception_leaving_a_with_block_cancels_blocked_dependents() -> None:
    upstream: Future[None] = Future()
    with pytest.raises(Boom), PriorityExecutor(1) as ex:
        dependent = ex.options(after=upstream).submit(int)
        raise Boom("in the block")
    assert dependent.cancelled()


def test_a_lanes_shutdown_with_cancel_futures_ends_its_blocked_tasks() -> None:
    with PriorityExecutor(1) as ex:
        upstream: Future[None] = Future()
        lane = ex.lane("db")
        in_lane = lane.options(after=upstream).submit(int)
        elsewhere = ex.options(after=upstream).submit(str, "other")
        lane.shutdown(cancel_futures=True)
        assert in_lane.cancelled()
        upstream.set_result(None)
        assert elsewhere.result(TIMEOUT) == "other"


# -- 6. bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["after", "after_any"])
@pytest.mark.parametrize(
    ("value", "match"),
    [
        (1, "must be a concurrent.futures.Future or an iterable of them, not int"),
        ("abc", "must be a concurrent.futures.Future or an iterable of them, not str"),
        ([done_future(), 1], "must hold concurrent.futures.Future objects, not int"),
    ],
)
def test_bad_upstreams_raise_at_options_naming_the_argument(
    name: str, value: object, match: str
) -> None:
    with PriorityExecutor(1) as ex:
        with pytest.raises(TypeError, match=f"^{name} {match}"):
            ex.options(**{name: value})
        assert stats_fields(ex) == counts()


def test_an_asyncio_future_is_refused_with_the_way_to_a_concurrent_one() -> None:
    loop = asyncio.new_event_loop()
    try:
        with PriorityExecutor(1) as ex, pytest.raises(TypeError, match="run_coroutine_threadsafe"):
            ex.options(after=loop.create_future())
    finally:
        loop.close()


def test_a_dependent_submitted_after_shutdown_raises_and_registers_nothing() -> None:
    ex = PriorityExecutor(1)
    ex.shutdown()
    upstream: Future[None] = Future()
    with pytest.raises(RuntimeError, match="after shutdown"):
        ex.options(after=upstream).submit(int)
    assert upstream._done_callbacks == []  # type: ignore[attr-defined]
    lane_ex = PriorityExecutor(1)
    lane = lane_ex.lane("closed")
    lane.shutdown()
    with pytest.raises(RuntimeError, match="lane's shutdown"):
        lane.options(after=upstream).submit(int)
    assert upstream._done_callbacks == []  # type: ignore[attr-defined]
    lane_ex.shutdown()


def test_a_view_of_a_view_is_refused_rather_than_dropping_its_upstreams() -> None:
    with PriorityExecutor(1) as ex:
        with pytest.raises(TypeError, match="in one call"):
            ex.options(after=done_future()).options(after=done_future())
        assert stats_fields(ex) == counts()


def test_no_upstream_given_is_a_plain_submit() -> None:
    with PriorityExecutor(1) as ex:
        assert ex.options(after=[]).submit(str, "now").result(TIMEOUT) == "now"
        assert ex.options(after=None, after_any=()).submit(str, "now").result(TIMEOUT) == "now"


# -- 5. scale --------------------------------------------------------------------------------


def test_a_fan_in_of_10000_costs_constant_time_per_upstream() -> None:
    with PriorityExecutor(1) as ex:
        upstreams: list[Future[int]] = [Future() for _ in range(10_000)]
        joined = ex.options(after=upstreams).submit(
            lambda: sum(future.result() for future in upstreams)
        )
        started = time.perf_counter()
        for i, future in enumerate(upstreams):
            future.set_result(i)
        elapsed = time.perf_counter() - started
        assert joined.result(TIMEOUT) == sum(range(10_000))
        # A scan of the upstreams per completion would be 10^8 steps: minutes, not this.
        assert elapsed < 5


def test_a_long_chain_runs_and_holds_no_finished_link() -> None:
    with PriorityExecutor(2) as ex:
        first = ex.submit(int, 0)
        first_ref = weakref.ref(first)
        last: Future[int] = first
        for _ in range(20_000):
            upstream = last
            last = ex.options(after=upstream).submit(int, 1)
        del first, upstream
        assert last.result(TIMEOUT) == 1
        gc.collect()
        # The last link keeps nothing of the chain before it alive.
        assert first_ref() is None


# -- races: the move out of BLOCKED decides ------------------------------------------------


def test_upstream_done_before_the_deadline_releases_it() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        upstream: Future[None] = Future()
        dependent = ex.options(after=upstream).submit(str, "ran", delay=1, expires=5)
        upstream.set_result(None)  # first: released, pending until 1
        clock.advance(1)
        assert dependent.result(TIMEOUT) == "ran"


def test_deadline_before_the_upstream_is_done_expires_it() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        upstream: Future[None] = Future()
        dependent = ex.options(after=upstream).submit(str, "ran", delay=1, expires=5)
        clock.advance(5)  # first: claimed EXPIRED
        upstream.set_result(None)
        with pytest.raises(Expired):
            dependent.result(0)
        assert stats_fields(ex) == counts(expired=1)


def test_a_cancel_before_the_upstream_fails_is_a_plain_cancellation() -> None:
    with PriorityExecutor(1) as ex:
        upstream: Future[None] = Future()
        dependent = ex.options(after=upstream).submit(int)
        assert dependent.cancel()
        upstream.set_exception(Boom("late"))
        with pytest.raises(CancelledError) as raised:
            dependent.result(0)
        assert type(raised.value) is CancelledError
        assert stats_fields(ex) == counts(cancelled=1)


def test_an_upstream_failing_before_the_cancel_wins() -> None:
    with PriorityExecutor(1) as ex:
        upstream: Future[None] = Future()
        dependent = ex.options(after=upstream).submit(int)
        upstream.set_exception(Boom("first"))
        assert dependent.cancel()  # cancelled already: True, as for any cancelled future
        with pytest.raises(DependencyFailed):
            dependent.result(0)
        assert stats_fields(ex) == counts(cancelled=1)


def test_shutdown_cancelling_before_the_upstream_is_done() -> None:
    ex = PriorityExecutor(1)
    upstream: Future[None] = Future()
    dependent = ex.options(after=upstream).submit(int)
    ex.shutdown(wait=False, cancel_futures=True)
    upstream.set_result(None)
    assert dependent.cancelled()
    ex.shutdown()
    assert stats_fields(ex) == counts(cancelled=1)


def test_upstream_done_before_shutdown_cancels_runs_or_cancels_it_once() -> None:
    clock = ManualClock()
    ex = PriorityExecutor(1, clock=clock)
    upstream: Future[None] = Future()
    dependent = ex.options(after=upstream).submit(int, delay=1)
    upstream.set_result(None)  # released first: pending, then cancelled where it waits
    ex.shutdown(wait=False, cancel_futures=True)
    assert dependent.cancelled()
    ex.shutdown()
    assert stats_fields(ex) == counts(cancelled=1)


@pytest.mark.parametrize("outcome", ["result", "exception"])
def test_upstream_end_racing_a_cancel_on_threads_ends_the_dependent_once(outcome: str) -> None:
    with PriorityExecutor(2) as ex:
        for _ in range(200):
            upstream: Future[None] = Future()
            dependent = ex.options(after=upstream).submit(str, "ran")
            go = threading.Barrier(2)

            def finish(upstream: Future[None] = upstream, go: threading.Barrier = go) -> None:
                go.wait()
                if outcome == "result":
                    upstream.set_result(None)
                else:
                    upstream.set_exception(Boom("raced"))

            finisher = threading.Thread(target=finish)
            finisher.start()
            go.wait()
            cancelled = dependent.cancel()
            finisher.join(TIMEOUT)
            wait([dependent], TIMEOUT)
            assert dependent.done()
            if not dependent.cancelled():
                assert not cancelled
                assert dependent.result() == "ran"
        ex.shutdown()
        stats = ex.stats()
        assert stats.completed + stats.cancelled == 200
        assert stats.blocked == stats.ready == stats.scheduled == 0


def test_many_threads_completing_a_fan_in_release_it_once() -> None:
    with PriorityExecutor(4) as ex, ThreadPoolExecutor(8) as pool:
        for _ in range(20):
            runs: list[int] = []
            upstreams = [pool.submit(time.sleep, 0.001) for _ in range(50)]
            joined = ex.options(after=upstreams).submit(runs.append, 1)
            joined.result(TIMEOUT)
            assert runs == [1]


# -- 4. graphs -------------------------------------------------------------------------------


def test_a_graph_runs_each_node_after_its_predecessors_with_their_results() -> None:
    order: list[str] = []

    def step(node: str, inputs: dict[str, str]) -> str:
        order.append(node)
        return node + "(" + ",".join(inputs[before] for before in sorted(inputs)) + ")"

    with PriorityExecutor(4) as ex:
        futures = submit_graph(ex, {"parse": ["fetch"], "store": ["parse", "fetch"]}, step)
        assert set(futures) == {"fetch", "parse", "store"}
        assert futures["store"].result(TIMEOUT) == "store(fetch(),parse(fetch()))"
    assert order == ["fetch", "parse", "store"]


def test_a_cycle_is_refused_before_anything_is_submitted() -> None:
    with PriorityExecutor(1) as ex:
        with pytest.raises(graphlib.CycleError):
            submit_graph(ex, {"a": ["b"], "b": ["c"], "c": ["a"], "d": []}, lambda n, i: n)
        with pytest.raises(graphlib.CycleError):
            submit_graph(ex, {"self": ["self"]}, lambda n, i: n)
        assert stats_fields(ex) == counts()


def test_a_failed_node_ends_its_successors_only() -> None:
    def step(node: str, inputs: dict[str, object]) -> str:
        if node == "bad":
            raise Boom("node")
        return node

    with PriorityExecutor(2) as ex:
        futures = submit_graph(ex, {"after_bad": ["bad"], "after_good": ["good"]}, step)
        assert futures["after_good"].result(TIMEOUT) == "after_good"
        with pytest.raises(DependencyFailed) as raised:
            futures["after_bad"].result(TIMEOUT)
        assert raised.value.upstream is futures["bad"]
        assert raised.value.task == "test_a_failed_node_ends_its_successors_only.<locals>.step"


def test_a_graph_goes_to_a_lane() -> None:
    with PriorityExecutor(2) as ex:
        lane = ex.lane("graph", max_running=1)
        futures = submit_graph(lane, {2: [1], 3: [2]}, lambda node, inputs: node)
        assert futures[3].result(TIMEOUT) == 3
        assert lane.stats().completed == 3


def test_bad_graph_arguments_raise_naming_them() -> None:
    with PriorityExecutor(1) as ex:
        with pytest.raises(TypeError, match=r"^graph must be a mapping"):
            submit_graph(ex, [("a", "b")], lambda n, i: n)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"^fn must be a callable"):
            submit_graph(ex, {"a": []}, None)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"^executor must be a PriorityExecutor or a Lane"):
            submit_graph(ex.options(), {"a": []}, lambda n, i: n)
        assert stats_fields(ex) == counts()


def test_a_graph_whose_submit_fails_is_taken_back_whole() -> None:
    ex = PriorityExecutor(1)
    calls = 0
    real = ex._schedule

    def failing(*args: Any, **kwargs: Any) -> Future[Any]:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise RuntimeError("cannot schedule new futures after shutdown")
        return real(*args, **kwargs)

    ex._schedule = failing  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        submit_graph(ex, {"b": ["a"], "c": ["b"], "d": ["c"]}, lambda n, i: n)
    ex.shutdown()
    assert ex.stats().completed + ex.stats().cancelled == 2
    assert ex.stats().cancelled >= 1  # b waited for a: cancelled, or a ran first


def test_waiting_shows_a_blocked_state_first_class() -> None:
    with PriorityExecutor(1) as ex:
        upstream: Future[None] = Future()
        dependent = ex.options(after=upstream).submit(int)
        done, _ = wait([dependent], 0.01, return_when=FIRST_COMPLETED)
        assert not done
        assert repr(ex.stats()).endswith("blocked=1)")
        upstream.set_result(None)
        dependent.result(TIMEOUT)
