"""Fair share: weighted lanes, lanes inside lanes, several rates, limits changed at run time."""

from __future__ import annotations

import gc
import random
import threading
import time
from collections import Counter
from concurrent.futures import wait
from typing import Any, Callable

import pytest
from helpers import TIMEOUT, wait_until

from priority_executor import Fifo, PriorityExecutor
from priority_executor.testing import ManualClock


class Starts:
    """Task bodies that record their label as they start; one may hold its worker until
    the test lets it go."""

    def __init__(self, clock: ManualClock | None = None) -> None:
        self.clock = clock
        self.log: list[str] = []  # list.append is atomic: workers append without a lock
        self.times: list[tuple[str, float]] = []
        self.gates: dict[str, threading.Event] = {}

    def job(self, label: str, *, hold: bool = False) -> Callable[[], str]:
        gate = None
        if hold:
            gate = self.gates[label] = threading.Event()

        def body() -> str:
            self.log.append(label)
            if self.clock is not None:
                self.times.append((label, self.clock.now()))
            if gate is not None:
                assert gate.wait(TIMEOUT)
            return label

        return body

    def release(self, label: str) -> None:
        self.gates[label].set()

    def wait_for(self, count: int) -> None:
        wait_until(lambda: len(self.log) >= count, what=f"{count} starts")


def no_ready(ex: PriorityExecutor, starts: Starts | None = None) -> None:
    """Wait until every task that may start has started (``clock.settle()`` would wait
    for the held ones to end too); with ``starts``, its bodies, which all tasks are, have
    logged it (a task is counted running as a worker claims it, before its body runs)."""

    def started() -> bool:
        stats = ex.stats()
        logged = starts is None or stats.running + stats.completed <= len(starts.log)
        return stats.ready == 0 and logged

    wait_until(started, what="no ready task")


def hold_workers(ex: PriorityExecutor, workers: int) -> threading.Event:
    """Occupy every worker (plain tasks of the highest priority) until the event is set."""
    go, started = threading.Event(), threading.Semaphore(0)

    def blocker() -> None:
        started.release()
        assert go.wait(TIMEOUT)

    for _ in range(workers):
        ex.submit(blocker, priority=10**6)
    for _ in range(workers):
        assert started.acquire(timeout=TIMEOUT)
    return go


# -- weights --------------------------------------------------------------------------------


@pytest.mark.parametrize("workers", [1, 2])
def test_two_saturated_lanes_weighted_1_to_3_get_a_quarter_and_three_quarters(
    workers: int,
) -> None:
    starts = Starts()
    with PriorityExecutor(workers, clock=ManualClock()) as ex:
        light = ex.lane("light", weight=1)
        heavy = ex.lane("heavy", weight=3)
        go = hold_workers(ex, workers)
        futures = [lane.submit(starts.job(lane.name or "")) for lane in (light, heavy) * 4000]
        go.set()
        wait(futures, timeout=TIMEOUT)
    first = Counter(starts.log[:4000])
    assert first["light"] / 4000 == pytest.approx(0.25, abs=0.02)
    assert first["heavy"] / 4000 == pytest.approx(0.75, abs=0.02)


def test_a_lane_that_becomes_busy_behind_a_backlog_of_100000_starts_next() -> None:
    starts = Starts()
    ex = PriorityExecutor(1, clock=ManualClock())
    try:
        bulk = ex.lane("bulk", weight=1)
        newcomer = ex.lane("newcomer")  # no weight: it weighs 1, as any lane
        holder = threading.Event()

        def bulk_task(i: int) -> None:
            starts.log.append("bulk")
            if i == 10:
                assert holder.wait(TIMEOUT)  # the worker is in the backlog's 11th task

        for i in range(100_000):
            bulk.submit(bulk_task, i)
        starts.wait_for(11)
        first = newcomer.submit(starts.job("newcomer"))
        holder.set()  # one task's time
        assert first.result(timeout=TIMEOUT) == "newcomer"
        assert starts.log.index("newcomer") == 11  # the next start after the running one
    finally:
        ex.shutdown(cancel_futures=True)


def test_a_lane_busy_behind_a_backlog_that_its_parent_holds_back_starts_next() -> None:
    """The enclosing lane is the bottleneck: its room goes to the lanes inside it in the
    fair order, not to the oldest task."""
    starts = Starts()
    ex = PriorityExecutor(2, clock=ManualClock())
    try:
        api = ex.lane("api", max_running=1)
        bulk = ex.lane("bulk", parent=api, weight=1)
        newcomer = ex.lane("newcomer", parent=api)
        bulk.submit(starts.job("bulk 0", hold=True))
        starts.wait_for(1)
        for _ in range(100_000):
            bulk.submit(starts.log.append, "bulk")
        first = newcomer.submit(starts.job("newcomer"))
        no_ready(ex)  # all held back by api
        starts.release("bulk 0")  # one task's time
        assert first.result(timeout=TIMEOUT) == "newcomer"
        assert starts.log.index("newcomer") == 1
    finally:
        ex.shutdown(cancel_futures=True)


def test_tasks_without_a_lane_are_one_share_of_weight_1() -> None:
    starts = Starts()
    with PriorityExecutor(1, clock=ManualClock()) as ex:
        lane = ex.lane("lane", weight=2)
        go = hold_workers(ex, 1)
        futures = [ex.submit(starts.job("plain")) for _ in range(300)]
        futures += [lane.submit(starts.job("lane")) for _ in range(600)]
        go.set()
        wait(futures, timeout=TIMEOUT)
    assert Counter(starts.log[:300]) == {"plain": 100, "lane": 200}


def test_priority_comes_before_the_shares() -> None:
    starts = Starts()
    with PriorityExecutor(1, clock=ManualClock()) as ex:
        heavy = ex.lane("heavy", weight=100)
        light = ex.lane("light", weight=1)
        go = hold_workers(ex, 1)
        futures = [heavy.submit(starts.job("heavy")) for _ in range(5)]
        futures.append(light.submit(starts.job("light urgent"), priority=5))
        futures.append(ex.submit(starts.job("plain urgent"), priority=5))
        futures.append(ex.submit(starts.job("plain late")))
        go.set()
        wait(futures, timeout=TIMEOUT)
    assert set(starts.log[:2]) == {"light urgent", "plain urgent"}
    assert starts.log[2:7] == ["heavy"] * 5  # weight 100 to 1
    assert starts.log[7] == "plain late"


def test_within_a_share_the_policy_orders() -> None:
    starts = Starts()
    with PriorityExecutor(1, clock=ManualClock()) as ex:
        lane = ex.lane("lane", weight=1)
        go = hold_workers(ex, 1)
        futures = [lane.submit(starts.job(f"p{p}"), priority=p) for p in (0, 2, 1)]
        go.set()
        wait(futures, timeout=TIMEOUT)
    assert starts.log == ["p2", "p1", "p0"]


def test_under_fifo_every_task_ranks_alike_and_the_shares_decide() -> None:
    starts = Starts()
    with PriorityExecutor(1, clock=ManualClock(), policy=Fifo()) as ex:
        a, b = ex.lane("a", weight=1), ex.lane("b", weight=2)
        go = hold_workers(ex, 1)
        futures = [a.submit(starts.job("a"), priority=9) for _ in range(30)]
        futures += [b.submit(starts.job("b")) for _ in range(60)]
        go.set()
        wait(futures, timeout=TIMEOUT)
    assert Counter(starts.log[:30]) == {"a": 10, "b": 20}


def test_a_weight_changed_at_run_time_acts_on_the_next_start() -> None:
    starts = Starts()
    with PriorityExecutor(1, clock=ManualClock()) as ex:
        a, b = ex.lane("a", weight=1), ex.lane("b", weight=1)
        go = hold_workers(ex, 1)
        futures = [lane.submit(starts.job(lane.name or "")) for lane in (a, b) * 1000]
        futures.append(a.submit(starts.job("pause", hold=True), priority=1))
        go.set()
        starts.wait_for(1)  # "pause" holds the worker, before any other
        b.configure(weight=3)
        assert b.weight == 3.0
        starts.release("pause")
        wait(futures, timeout=TIMEOUT)
    # "pause" was a's start: a is one step behind, then 1 to 3.
    assert abs(Counter(starts.log[1:401])["a"] - 100) <= 1


def test_waiting_lists_due_tasks_in_the_fair_order() -> None:
    with PriorityExecutor(1, clock=ManualClock()) as ex:
        a, b = ex.lane("a", weight=1), ex.lane("b", weight=2)
        go = hold_workers(ex, 1)
        for lane in (a, a, a, b, b, b):
            lane.submit(int)
        ex.submit(int)
        order = [task.lane for task in ex.waiting()]
        go.set()
    assert Counter(order[:4]) == {"a": 1, "b": 2, None: 1}
    assert sorted(order, key=str) == sorted(["a"] * 3 + ["b"] * 3 + [None], key=str)


# -- lanes inside lanes ---------------------------------------------------------------------


def test_nested_limits_both_hold_and_neither_blocks_a_sibling() -> None:
    clock = ManualClock()
    starts = Starts(clock)
    with PriorityExecutor(4, clock=clock) as ex:
        hosts = ex.lane("hosts", max_starts=3, per=10)
        a = ex.lane("host-a", parent=hosts, max_running=1)
        b = ex.lane("host-b", parent=hosts, max_running=1)
        c = ex.lane("host-c", parent=hosts)
        assert a.parent is hosts and hosts.parent is None
        a1, a2 = a.submit(starts.job("a1", hold=True)), a.submit(starts.job("a2"))
        b.submit(starts.job("b1", hold=True))
        b2 = b.submit(starts.job("b2"))
        c.submit(starts.job("c1"))
        c2 = c.submit(starts.job("c2"))
        no_ready(ex, starts)
        # host-a at max_running holds a2 back, not b1 or c1; hosts' window, full with a1,
        # b1 and c1, holds c2 back.
        assert sorted(starts.log) == ["a1", "b1", "c1"]
        held = {t.future: (t.held_in, t.held_by, t.starts_in) for t in ex.waiting()}
        assert held == {
            a2: ("host-a", "max_running", None),
            b2: ("host-b", "max_running", None),
            c2: ("hosts", "max_starts", 10.0),
        }
        # Outside "hosts", work goes on.
        assert ex.submit(starts.job("plain")).result(timeout=TIMEOUT) == "plain"
        # a1 ends: host-a has room, but hosts has none: a2 waits for hosts now.
        starts.release("a1")
        a1.result(timeout=TIMEOUT)
        no_ready(ex, starts)
        assert [t.held_in for t in ex.waiting() if t.lane == "host-a"] == ["hosts"]
        clock.advance(10)  # the window passes: hosts' room goes to a2 and c2, not b2
        a2.result(timeout=TIMEOUT)
        c2.result(timeout=TIMEOUT)
        no_ready(ex, starts)
        assert sorted(starts.log[4:]) == ["a2", "c2"]
        assert not b2.done()
        assert a.stats().completed == 2 and hosts.stats().completed == 0
        starts.release("b1")  # host-b has room, and hosts' window a third start left
        assert b2.result(timeout=TIMEOUT) == "b2"
        d = ex.lane("host-d", parent=hosts)
        late = d.submit(starts.job("d1"))
        no_ready(ex, starts)
        assert not late.done()  # a2, c2 and b2 fill hosts' window until t = 20
        clock.advance(10)
        assert late.result(timeout=TIMEOUT) == "d1"
    assert [at for label, at in starts.times if label != "plain"] == [0, 0, 0, 10, 10, 10, 20]


def test_a_lane_held_back_by_its_parent_holds_back_no_lane_outside_it() -> None:
    clock = ManualClock()
    starts = Starts(clock)
    with PriorityExecutor(2, clock=clock) as ex:
        api = ex.lane("api", max_running=1)
        search = ex.lane("search", parent=api)
        other = ex.lane("other", max_running=1)
        held = search.submit(starts.job("search 1", hold=True))
        starts.wait_for(1)
        later = [search.submit(starts.job(f"search {i}")) for i in (2, 3)]
        # Held back by api: an unrelated lane's task still starts, on the other worker.
        assert other.submit(starts.job("other")).result(timeout=TIMEOUT) == "other"
        assert api.submit(starts.job("api own")) is not None
        no_ready(ex)
        assert ex.stats().throttled == 3
        assert {t.held_in for t in ex.waiting()} == {"api"}
        starts.release("search 1")
        held.result(timeout=TIMEOUT)
        wait(later, timeout=TIMEOUT)
    assert starts.log[:2] == ["search 1", "other"]
    assert sorted(starts.log[2:]) == ["api own", "search 2", "search 3"]


def test_weights_of_lanes_inside_a_parent_are_flat_shares() -> None:
    starts = Starts()
    with PriorityExecutor(1, clock=ManualClock()) as ex:
        tenants = ex.lane("tenants", max_running=5)
        a = ex.lane("a", parent=tenants, weight=1)
        b = ex.lane("b", parent=tenants, weight=3)
        go = hold_workers(ex, 1)
        futures = [lane.submit(starts.job(lane.name or "")) for lane in (a, b) * 200]
        go.set()
        wait(futures, timeout=TIMEOUT)
    assert Counter(starts.log[:200]) == {"a": 50, "b": 150}


@pytest.mark.parametrize("configured", [False, True])
def test_an_enclosing_lanes_window_passes_on_the_real_clock(configured: bool) -> None:
    with PriorityExecutor(2) as ex:
        api = ex.lane("api", **({} if configured else {"max_starts": 5, "per": 0.05}))
        child = ex.lane("child", parent=api)
        assert child.submit(int).result(timeout=TIMEOUT) == 0
        if configured:
            api.configure(max_starts=5, per=0.05)  # after the child's first task
        started = time.monotonic()
        futures = [child.submit(int) for _ in range(20)]
        assert not wait(futures, timeout=TIMEOUT).not_done
        assert time.monotonic() - started >= 0.15  # 20 starts at 5 per 50 ms: 3 windows


# -- several rates --------------------------------------------------------------------------


def test_two_rates_on_one_lane_both_hold() -> None:
    clock = ManualClock()
    starts = Starts(clock)
    with PriorityExecutor(2, clock=clock) as ex:
        api = ex.lane("api", rates=[(2, 1.0), (3, 10.0)])
        assert api.rates == ((2, 1.0), (3, 10.0))
        assert (api.max_starts, api.per) == (2, 1.0)
        futures = [api.submit(starts.job(str(i))) for i in range(6)]
        clock.settle()
        assert len(starts.log) == 2  # 2 a second
        [first, *_] = ex.waiting()
        assert (first.held_by, first.held_in, first.starts_in) == ("max_starts", "api", 1.0)
        for _ in range(30):
            clock.advance(1)
            clock.settle()
        wait(futures, timeout=TIMEOUT)
    # 2 a second, and 3 in any 10 s: never more than either.
    assert [at for _, at in starts.times] == [0, 0, 1, 10, 10, 11]


# -- limits changed at run time -------------------------------------------------------------


def test_max_running_raised_starts_at_once_and_lowered_cancels_nothing() -> None:
    clock = ManualClock()
    starts = Starts(clock)
    with PriorityExecutor(4, clock=clock) as ex:
        lane = ex.lane("io", max_running=1)
        held = [lane.submit(starts.job(f"t{i}", hold=True)) for i in range(3)]
        no_ready(ex)
        assert len(starts.log) == 1
        lane.configure(max_running=3)
        starts.wait_for(3)  # at once: no clock moved, no run ended
        assert lane.max_running == 3
        lane.configure(max_running=1)  # three run: none is cancelled
        late = lane.submit(starts.job("late"))
        for i in range(2):
            starts.release(f"t{i}")
            held[i].result(timeout=TIMEOUT)
            no_ready(ex)
            assert not late.done()  # two, then one, still run: not below 1
        starts.release("t2")
        assert late.result(timeout=TIMEOUT) == "late"
        assert [f.result() for f in held] == ["t0", "t1", "t2"]
        lane.configure(max_running=None)
        assert lane.max_running is None


def test_rates_raised_and_lowered_at_run_time() -> None:
    clock = ManualClock()
    starts = Starts(clock)
    with PriorityExecutor(2, clock=clock) as ex:
        lane = ex.lane("api", max_starts=1, per=10)
        futures = [lane.submit(starts.job(str(i))) for i in range(6)]
        clock.settle()
        assert len(starts.log) == 1
        lane.configure(max_starts=3)  # per: 1 s, as in lane()
        clock.settle()
        assert len(starts.log) == 3 and lane.rates == ((3, 1.0),)
        lane.configure(rates=[(1, 10.0)])  # the three starts of t = 0 count in it
        clock.advance(5)
        clock.settle()
        assert len(starts.log) == 3
        clock.advance(5)  # t = 10: they left the window; one more may start
        clock.settle()
        assert len(starts.log) == 4
        lane.configure(max_starts=None)  # no rate: the rest start at once
        wait(futures, timeout=TIMEOUT)
    assert [at for _, at in starts.times] == [0, 0, 0, 10, 10, 10]


def test_cooldown_raised_and_lowered_at_run_time() -> None:
    clock = ManualClock()
    starts = Starts(clock)
    with PriorityExecutor(2, clock=clock) as ex:
        lane = ex.lane("device", max_running=1, cooldown=60)
        futures = [lane.submit(starts.job(str(i))) for i in range(3)]
        clock.settle()
        assert len(starts.log) == 1  # the first ended at t = 0: 60 s of cooldown
        clock.advance(1)
        lane.configure(cooldown=0.5)  # already passed: the next starts at once
        clock.settle()
        assert len(starts.log) == 2
        lane.configure(cooldown=5)
        clock.advance(4.9)
        clock.settle()
        assert len(starts.log) == 2
        clock.advance(0.1)
        wait(futures, timeout=TIMEOUT)
    assert [at for _, at in starts.times] == [0, 1, 6]


def test_a_parents_limit_raised_releases_the_lanes_inside_it() -> None:
    clock = ManualClock()
    starts = Starts(clock)
    with PriorityExecutor(4, clock=clock) as ex:
        hosts = ex.lane("hosts", max_running=1)
        a = ex.lane("a", parent=hosts)
        b = ex.lane("b", parent=hosts)
        futures = [lane.submit(starts.job(lane.name or "", hold=True)) for lane in (a, b)]
        no_ready(ex)
        assert starts.log in (["a"], ["b"])
        hosts.configure(max_running=2)
        starts.wait_for(2)
        for label in "ab":
            starts.release(label)
        wait(futures, timeout=TIMEOUT)


def test_a_named_lane_compares_with_its_options_as_configured() -> None:
    with PriorityExecutor(1) as ex:
        api = ex.lane("api", max_running=1)
        api.configure(max_running=2, weight=2)
        assert ex.lane("api", max_running=2, weight=2) is api
        with pytest.raises(ValueError, match="max_running=2, not 1"):
            ex.lane("api", max_running=1)
        # One made without options and configured keeps what it was given.
        ex.lane("tenant").configure(max_running=4)
        gc.collect()
        assert ex.lanes()["tenant"].max_running == 4
        assert "max_running=2" in repr(api) and "weight=2.0" in repr(api)


# -- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"weight": 0}, ValueError, "weight"),
        ({"weight": -1}, ValueError, "weight"),
        ({"weight": float("inf")}, ValueError, "weight"),
        ({"weight": float("nan")}, ValueError, "weight"),
        ({"weight": True}, TypeError, "weight"),
        ({"weight": "1"}, TypeError, "weight"),
        ({"rates": [(0, 1.0)]}, ValueError, "rates"),
        ({"rates": [(1, 0)]}, ValueError, "rates"),
        ({"rates": [(1.5, 1)]}, TypeError, "rates"),
        ({"rates": [(1,)]}, TypeError, "rates"),
        ({"rates": "10/s"}, TypeError, "rates"),
        ({"rates": [(1, 1)], "max_starts": 1}, ValueError, "rates"),
        ({"max_running": 0}, ValueError, "max_running"),
        ({"cooldown": -1}, ValueError, "cooldown"),
        ({"per": 2}, ValueError, "max_starts"),
    ],
)
def test_bad_options_raise_at_lane_and_at_configure_and_change_nothing(
    options: dict[str, Any], error: type[Exception], match: str
) -> None:
    with PriorityExecutor(1) as ex:
        with pytest.raises(error, match=match):
            ex.lane("x", **options)
        lane = ex.lane("y", max_running=2, max_starts=5, cooldown=1, weight=2)
        before = repr(lane)
        with pytest.raises(error, match=match):
            lane.configure(**options)
        assert repr(lane) == before
        assert lane.submit(int).result(timeout=TIMEOUT) == 0


def test_bad_parents() -> None:
    with PriorityExecutor(1) as ex, PriorityExecutor(1) as other:
        with pytest.raises(TypeError, match="parent"):
            ex.lane("x", parent="hosts")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="parent"):
            ex.lane("x", parent=other.lane("hosts"))
        closed = ex.lane("closed")
        closed.shutdown()
        with pytest.raises(ValueError, match="parent"):
            ex.lane("x", parent=closed)
        hosts = ex.lane("hosts")
        ex.lane("x", parent=hosts)
        with pytest.raises(ValueError, match="parent"):
            ex.lane("x", parent=ex.lane("elsewhere"))
        with pytest.raises(RuntimeError, match="shutdown"):
            closed.configure(max_running=1)
        assert ex.lane("x").parent is hosts


# -- under load -----------------------------------------------------------------------------


@pytest.mark.parametrize("round_", range(3))
def test_weighted_nested_lanes_under_load_keep_their_limits_while_configured(round_: int) -> None:
    """Threads submit to weighted lanes inside a parent and cancel, while another changes
    the lanes' limits and weights: every future completes, and no limit is ever exceeded."""
    lock = threading.Lock()
    running: Counter[str] = Counter()
    peak: Counter[str] = Counter()

    def body(name: str) -> None:
        group = "plain" if name == "plain" else "parent"
        with lock:
            for key in {name, group}:
                running[key] += 1
                peak[key] = max(peak[key], running[key])
        threading.Event().wait(0.0005)
        with lock:
            for key in {name, group}:
                running[key] -= 1

    with PriorityExecutor(6) as ex:
        parent = ex.lane("parent", max_running=4)
        lanes = [ex.lane(f"l{i}", parent=parent, max_running=2, weight=i + 1) for i in range(3)]
        futures = []
        stop = threading.Event()

        def submitter(seed: int) -> None:
            rnd = random.Random(seed)
            for _ in range(300):
                lane = rnd.choice(lanes)
                future = lane.submit(body, lane.name, priority=rnd.choice((0, 0, 1)))
                futures.append(future)
                if rnd.random() < 0.1:
                    future.cancel()

        def configurer() -> None:
            rnd = random.Random(round_)
            while not stop.is_set():
                lane = rnd.choice(lanes)
                lane.configure(max_running=rnd.choice((1, 2)), weight=rnd.choice((1, 2, 5)))
                ex.submit(body, "plain")

        threads = [threading.Thread(target=submitter, args=(round_ * 10 + i,)) for i in range(3)]
        changer = threading.Thread(target=configurer)
        for thread in (*threads, changer):
            thread.start()
        for thread in threads:
            thread.join(TIMEOUT)
        stop.set()
        changer.join(TIMEOUT)
        assert not wait(futures, timeout=TIMEOUT).not_done
    assert all(1 <= peak[lane.name or ""] <= 2 for lane in lanes)
    assert peak["parent"] <= 4
    assert parent.stats().running == 0


@pytest.mark.parametrize("fair_share", ["starts", "time"])
def test_two_lanes_of_weight_1_share_what_fair_share_counts_to_2_points(fair_share: str) -> None:
    """One lane's tasks take 10x the other's. By starts, each gets half the starts (and the
    long one 10/11 of the time); by busy time, each gets half the time."""
    clock = ManualClock()
    runs: list[tuple[str, float]] = []

    def job(name: str, seconds: float) -> Callable[[], None]:
        def body() -> None:
            runs.append((name, seconds))
            clock.advance(seconds)  # the run's time, on the executor's clock

        return body

    with PriorityExecutor(1, clock=clock, fair_share=fair_share) as ex:  # type: ignore[arg-type]
        short, long = ex.lane("short", weight=1), ex.lane("long", weight=1)
        go = hold_workers(ex, 1)
        futures = [
            lane.submit(job(lane.name or "", seconds))
            for lane, seconds in ((short, 1.0), (long, 10.0)) * 2000
        ]
        go.set()
        wait(futures, timeout=TIMEOUT)
    # While both lanes have tasks waiting: up to the last start of the one that ran out.
    first_out = min(
        max(i for i, (name, _) in enumerate(runs) if name == lane) for lane in ("short", "long")
    )
    both = runs[: first_out + 1]
    if fair_share == "starts":
        shares = Counter(name for name, _ in both)
        total = len(both)
    else:
        shares = Counter()
        for name, seconds in both:
            shares[name] += seconds
        total = sum(shares.values())
    assert shares["short"] / total == pytest.approx(0.5, abs=0.02)
    assert shares["long"] / total == pytest.approx(0.5, abs=0.02)


def test_a_bad_fair_share_raises_naming_it() -> None:
    with pytest.raises(ValueError, match="fair_share"):
        PriorityExecutor(1, fair_share="workers")  # type: ignore[arg-type]
