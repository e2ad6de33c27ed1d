"""Start deadlines: ``submit(..., expires=...)`` (issue 3).

Timing behaviour runs on a ``ManualClock``; the races between a deadline and a worker
starting the task run on real threads, many times over.
"""

from __future__ import annotations

import datetime
import random
import threading
import time
from concurrent.futures import FIRST_COMPLETED, CancelledError, as_completed, wait

import pytest
from helpers import TIMEOUT, stats_fields

from priority_executor import PriorityExecutor
from priority_executor.testing import ManualClock


class Blocker:
    """A task that occupies a worker until released: the "5-second task"."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> str:
        self.started.set()
        if not self.release.wait(TIMEOUT):
            raise AssertionError("blocker never released")
        return "blocker done"


def occupy(ex: PriorityExecutor) -> tuple[Blocker, object]:
    blocker = Blocker()
    future = ex.submit(blocker)
    assert blocker.started.wait(TIMEOUT)
    return blocker, future


# -- the seed scenario -------------------------------------------------------------------


@pytest.mark.parametrize(
    "expires",
    [1, 1.0, datetime.timedelta(seconds=1)],
    ids=["int", "float", "timedelta"],
)
def test_seed_scenario_expired_task_is_cancelled_while_worker_busy(expires) -> None:
    clock = ManualClock()
    ran = threading.Event()
    with PriorityExecutor(1, clock=clock) as ex:
        blocker, busy = occupy(ex)
        late = ex.submit(ran.set, expires=expires)

        clock.advance(0.5)
        assert not late.done()

        clock.advance(0.6)  # t = 1.1: past the deadline, the worker still busy
        assert late.cancelled()
        assert late.done()
        assert busy.running()
        # as_completed() and wait() report it at once, while the worker is still busy.
        assert next(as_completed([busy, late], timeout=1)) is late
        done, not_done = wait([busy, late], timeout=1, return_when=FIRST_COMPLETED)
        assert done == {late}
        assert not_done == {busy}
        with pytest.raises(CancelledError):
            late.result(timeout=0)
        assert late.cancel()  # cancelling again is harmless
        assert stats_fields(ex) == {
            "scheduled": 0,
            "ready": 0,
            "throttled": 0,
            "running": 1,
            "completed": 0,
            "failed": 0,
            "cancelled": 0,
            "expired": 1,
            "skipped": 0,
            "blocked": 0,
        }

        clock.advance(4)  # the "5-second task" ends at t = 5
        blocker.release.set()
        assert busy.result(timeout=TIMEOUT) == "blocker done"
    assert not ran.is_set()
    assert stats_fields(ex)["expired"] == 1
    assert stats_fields(ex)["completed"] == 1


def test_expired_future_wakes_a_waiter_blocked_in_as_completed() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        blocker, busy = occupy(ex)
        late = ex.submit(lambda: "never", expires=1)
        yielded: list[object] = []
        got_one = threading.Event()

        def consume() -> None:
            for future in as_completed([late, busy], timeout=TIMEOUT):
                yielded.append(future)
                got_one.set()

        consumer = threading.Thread(target=consume)
        consumer.start()
        time.sleep(0.05)  # let the consumer block in as_completed (not a due-time wait)
        assert yielded == []
        clock.advance(2)
        assert got_one.wait(TIMEOUT)
        assert yielded == [late]
        assert busy.running()
        blocker.release.set()
        consumer.join(TIMEOUT)
        assert yielded == [late, busy]


@pytest.mark.parametrize("aware", [False, True], ids=["naive", "aware"])
def test_expires_as_datetime(aware: bool) -> None:
    clock = ManualClock()
    ran = threading.Event()
    with PriorityExecutor(1, clock=clock) as ex:
        blocker, _ = occupy(ex)
        now = datetime.datetime.now(datetime.timezone.utc) if aware else datetime.datetime.now()
        late = ex.submit(ran.set, expires=now + datetime.timedelta(seconds=1))
        clock.advance(0.9)
        assert not late.done()
        clock.advance(0.5)
        assert late.cancelled()
        blocker.release.set()
    assert not ran.is_set()
    assert ex.stats().expired == 1


def test_deadline_applies_to_a_task_far_from_the_top_of_the_queue() -> None:
    clock = ManualClock()
    ran: list[str] = []
    with PriorityExecutor(1, clock=clock) as ex:
        blocker, _ = occupy(ex)
        ahead = [ex.submit(ran.append, f"ahead {i}", priority=5) for i in range(20)]
        late = ex.submit(ran.append, "late", priority=-5, expires=3)
        behind = ex.submit(ran.append, "behind", priority=-10)
        clock.advance(3)
        assert late.cancelled()
        assert not any(f.done() for f in [*ahead, behind])
        assert ex.stats().ready == 21
        blocker.release.set()
        for future in [*ahead, behind]:
            future.result(timeout=TIMEOUT)
    assert ran == [f"ahead {i}" for i in range(20)] + ["behind"]
    assert stats_fields(ex) == {
        "scheduled": 0,
        "ready": 0,
        "throttled": 0,
        "running": 0,
        "completed": 22,
        "failed": 0,
        "cancelled": 0,
        "expired": 1,
        "skipped": 0,
        "blocked": 0,
    }


def test_delayed_task_expires_before_a_worker_is_free() -> None:
    clock = ManualClock()
    ran = threading.Event()
    with PriorityExecutor(1, clock=clock) as ex:
        blocker, _ = occupy(ex)
        late = ex.submit(ran.set, delay=2, expires=3)
        clock.advance(2)  # due now, but the only worker is busy
        assert not late.done()
        assert ex.stats().ready == 1
        clock.advance(1)  # t = 3: the deadline
        assert late.cancelled()
        assert ex.stats().ready == 0
        assert ex.stats().expired == 1
        blocker.release.set()
    assert not ran.is_set()


def test_delayed_task_due_and_expired_within_one_advance() -> None:
    clock = ManualClock()
    ran = threading.Event()
    with PriorityExecutor(1, clock=clock) as ex:
        blocker, _ = occupy(ex)
        late = ex.submit(ran.set, delay=datetime.timedelta(seconds=1), expires=2)
        clock.advance(10)
        assert late.cancelled()
        blocker.release.set()
    assert not ran.is_set()
    fields = stats_fields(ex)
    assert fields["expired"] == 1
    assert fields["cancelled"] == 0


def test_deadline_of_a_delayed_task_is_measured_from_submission() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        future = ex.submit(lambda: "ok", delay=5, expires=6)
        clock.advance(5)  # due, and a worker is free: it starts before t = 6
        assert future.result(timeout=TIMEOUT) == "ok"
    assert ex.stats().completed == 1
    assert ex.stats().expired == 0


def test_task_started_before_its_deadline_runs_normally() -> None:
    clock = ManualClock()
    started = threading.Event()
    release = threading.Event()

    def slow() -> str:
        started.set()
        assert release.wait(TIMEOUT)
        return "finished"

    with PriorityExecutor(1, clock=clock) as ex:
        future = ex.submit(slow, expires=1)
        assert started.wait(TIMEOUT)
        clock.advance(5)  # the deadline passes while it runs: it does nothing
        assert future.running()
        assert not future.cancelled()
        assert not future.cancel()
        release.set()
        assert future.result(timeout=TIMEOUT) == "finished"
        clock.advance(5)
    assert stats_fields(ex) == {
        "scheduled": 0,
        "ready": 0,
        "throttled": 0,
        "running": 0,
        "completed": 1,
        "failed": 0,
        "cancelled": 0,
        "expired": 0,
        "skipped": 0,
        "blocked": 0,
    }


def test_task_finished_before_its_deadline_is_not_expired() -> None:
    clock = ManualClock()
    with PriorityExecutor(2, clock=clock) as ex:
        futures = [ex.submit(pow, 2, i, expires=1) for i in range(10)]
        assert [f.result(timeout=TIMEOUT) for f in futures] == [2**i for i in range(10)]
        clock.advance(2)
        assert all(not f.cancelled() for f in futures)
    assert ex.stats().completed == 10
    assert ex.stats().expired == 0


def test_user_cancel_counts_as_cancelled_not_expired() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        blocker, _ = occupy(ex)
        by_user = ex.submit(lambda: None, expires=5)
        by_deadline = ex.submit(lambda: None, expires=1)
        assert by_user.cancel()
        clock.advance(2)
        assert by_deadline.cancelled()
        clock.advance(10)  # the user-cancelled task's deadline passes: nothing changes
        blocker.release.set()
    fields = stats_fields(ex)
    assert fields["cancelled"] == 1
    assert fields["expired"] == 1
    assert fields["completed"] == 1


def test_worker_never_starts_a_task_whose_deadline_the_promoter_has_not_applied() -> None:
    """One clock drives two executors; ``advance()`` promotes them one after the other.

    Each executor has its only worker blocked, a task expiring at t=1 behind it and, due
    at t=2, a marker task whose policy key is computed during the promotion. When the
    first executor's promotion computes that key, the clock already reads 2 but the other
    executor's promotion has not run, so its deadline is not applied: the hook releases
    the other executor's worker, which must see the passed deadline itself and never
    start the task.
    """
    clock = ManualClock()
    marker = 1234
    sides: list[dict] = []
    observed: list[str] = []

    class Hook:
        def __init__(self, index: int) -> None:
            self.index = index

        def sort_key(self, task):
            if task.priority == marker:
                other = sides[1 - self.index]
                if not other["late"].done():
                    # The other executor's deadline has passed but it is not applied.
                    other["blocker"].release.set()
                    try:
                        other["late"].exception(timeout=TIMEOUT)
                        observed.append("finished without being cancelled")
                    except CancelledError:
                        observed.append("cancelled by the worker")
            return (-task.priority, task.due)

    executors = [PriorityExecutor(1, clock=clock, policy=Hook(i)) for i in range(2)]
    try:
        for ex in executors:
            side: dict = {"ran": threading.Event()}
            side["blocker"], side["busy"] = occupy(ex)
            side["late"] = ex.submit(side["ran"].set, expires=1)
            side["marker"] = ex.submit(lambda: None, priority=marker, delay=2)
            sides.append(side)
        clock.advance(2)
        assert observed == ["cancelled by the worker"]
        for side in sides:
            side["blocker"].release.set()
            assert side["late"].cancelled()
            assert side["marker"].result(timeout=TIMEOUT) is None
    finally:
        for side in sides:
            side["blocker"].release.set()
        for ex in executors:
            ex.shutdown(wait=True)
    for side in sides:
        assert not side["ran"].is_set()
    for ex in executors:
        fields = stats_fields(ex)
        assert fields["expired"] == 1
        assert fields["completed"] == 2


# -- races with real threads -------------------------------------------------------------


def submit_in_rounds(ex: PriorityExecutor, fn, n: int, make_kwargs, rounds: int = 100) -> list:
    """Submit ``n`` tasks in rounds, each round waited for, so that the queue stays short
    and deadlines fall around the moments the workers reach the tasks."""
    futures: list = []
    per_round = n // rounds
    for start in range(0, n, per_round):
        batch = [ex.submit(fn, i, **make_kwargs(i)) for i in range(start, start + per_round)]
        futures.extend(batch)
        _done, not_done = wait(batch, timeout=TIMEOUT)
        assert not not_done, "a future was neither run nor cancelled"
    return futures


@pytest.mark.timeout(30)
def test_expiry_versus_start_race_each_future_runs_or_is_cancelled() -> None:
    n = 3000
    rng = random.Random(1234)
    ran: set[int] = set()
    ran_lock = threading.Lock()

    def work(i: int) -> int:
        with ran_lock:
            ran.add(i)
        return i

    with PriorityExecutor(2) as ex:
        futures = submit_in_rounds(
            ex, work, n, lambda i: {"expires": rng.uniform(1e-6, 1e-3)}, rounds=100
        )
    completed = cancelled = 0
    for i, future in enumerate(futures):
        assert future.done()
        if future.cancelled():
            cancelled += 1
            assert i not in ran, f"task {i} ran although its future was cancelled"
        else:
            completed += 1
            assert future.result() == i
            assert i in ran
    assert len(ran) == completed
    # Both outcomes happen, so the race was really run.
    assert completed > 0
    assert cancelled > 0
    fields = stats_fields(ex)
    assert fields["completed"] == completed
    assert fields["expired"] == cancelled
    assert fields["cancelled"] == 0
    assert fields["failed"] == 0
    assert fields["scheduled"] == fields["ready"] == fields["running"] == 0


@pytest.mark.timeout(30)
def test_stats_under_deadlines_racing_starts_never_negative_and_add_up() -> None:
    n = 3000
    rng = random.Random(99)
    ran: set[int] = set()
    ran_lock = threading.Lock()
    problems: list[str] = []
    stop = threading.Event()
    polls = [0]

    def work(i: int) -> int:
        with ran_lock:
            ran.add(i)
        if i % 7 == 0:
            raise ValueError(i)
        return i

    def poll(ex: PriorityExecutor) -> None:
        last_total = 0
        while not stop.is_set():
            fields = stats_fields(ex)
            polls[0] += 1
            negative = {k: v for k, v in fields.items() if v < 0}
            if negative:
                problems.append(f"negative fields: {fields}")
            total = sum(fields.values())
            if total < last_total or total > n:
                problems.append(f"total {total} after {last_total}: {fields}")
            last_total = total

    with PriorityExecutor(2) as ex:
        pollers = [threading.Thread(target=poll, args=(ex,)) for _ in range(2)]
        for poller in pollers:
            poller.start()
        try:
            futures: list = []
            user_cancelled: set[int] = set()
            for _ in range(100):
                batch = []
                for _ in range(n // 100):
                    i = len(futures)
                    kwargs: dict = {"priority": rng.randrange(-2, 3)}
                    if i % 4:
                        kwargs["expires"] = rng.uniform(1e-6, 1e-3)
                    if i % 11 == 0:
                        kwargs["delay"] = rng.choice([0, 1e-4, 5e-4])
                        kwargs["expires"] = kwargs["delay"] + rng.uniform(1e-6, 1e-3)
                    future = ex.submit(work, i, **kwargs)
                    futures.append(future)
                    batch.append(future)
                for future in rng.sample(batch, 3):
                    if future.cancel():
                        user_cancelled.add(futures.index(future))
                _done, not_done = wait(batch, timeout=TIMEOUT)
                assert not not_done, "a future was neither run nor cancelled"
        finally:
            stop.set()
            for poller in pollers:
                poller.join(TIMEOUT)
    assert polls[0] > 0
    assert problems == []

    results = {"completed": 0, "failed": 0, "cancelled": 0}
    for i, future in enumerate(futures):
        if future.cancelled():
            results["cancelled"] += 1
            assert i not in ran
        elif future.exception() is not None:
            results["failed"] += 1
            assert i in ran
        else:
            results["completed"] += 1
            assert i in ran
    fields = stats_fields(ex)
    assert sum(fields.values()) == n
    assert fields["scheduled"] == fields["ready"] == fields["running"] == 0
    assert fields["completed"] == results["completed"]
    assert fields["failed"] == results["failed"]
    assert fields["cancelled"] + fields["expired"] == results["cancelled"]
    # Futures the user never cancelled can only have been cancelled by their deadline.
    cancelled_by_deadline_only = sum(
        1 for i, f in enumerate(futures) if f.cancelled() and i not in user_cancelled
    )
    assert fields["expired"] >= cancelled_by_deadline_only
    assert fields["cancelled"] <= len(user_cancelled)
    assert fields["expired"] > 0
    assert fields["completed"] > 0


@pytest.mark.timeout(30)
def test_real_time_deadline_cancels_within_milliseconds_while_workers_busy() -> None:
    release = threading.Event()
    with PriorityExecutor(1) as ex:
        started = threading.Event()

        def busy() -> None:
            started.set()
            release.wait(TIMEOUT)

        ex.submit(busy)
        assert started.wait(TIMEOUT)
        submitted = time.monotonic()
        late = ex.submit(lambda: None, expires=0.05)
        try:
            assert next(as_completed([late], timeout=5)) is late
            elapsed = time.monotonic() - submitted
            assert late.cancelled()
            assert 0.05 <= elapsed < 1.0
        finally:
            release.set()


# -- bad input ---------------------------------------------------------------------------


def _seconds(value: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=value)


@pytest.mark.parametrize(
    "make_kwargs",
    [
        lambda now: {"expires": 0},
        lambda now: {"expires": 0.0},
        lambda now: {"expires": _seconds(0)},
        lambda now: {"expires": -1},
        lambda now: {"expires": _seconds(-1)},
        lambda now: {"expires": float("nan")},
        lambda now: {"expires": float("inf")},
        lambda now: {"expires": 1, "delay": 2},
        lambda now: {"expires": 2, "delay": 2},
        lambda now: {"expires": _seconds(1), "delay": _seconds(1)},
        lambda now: {"expires": now - _seconds(5)},
        lambda now: {"expires": now, "delay": 1},
        lambda now: {"expires": now + _seconds(5), "run_at": now + _seconds(10)},
        lambda now: {"expires": now + _seconds(10), "run_at": now + _seconds(10)},
    ],
    ids=[
        "zero",
        "zero-float",
        "zero-timedelta",
        "negative",
        "negative-timedelta",
        "nan",
        "inf",
        "before-delay",
        "equal-to-delay",
        "equal-to-delay-timedelta",
        "past-datetime",
        "datetime-before-delay",
        "datetime-before-run_at",
        "datetime-equal-to-run_at",
    ],
)
def test_deadline_not_after_due_time_is_value_error(make_kwargs) -> None:
    clock = ManualClock()
    kwargs = make_kwargs(datetime.datetime.now())
    ran = threading.Event()
    with PriorityExecutor(1, clock=clock) as ex:
        before = stats_fields(ex)
        with pytest.raises(ValueError, match="expires"):
            ex.submit(ran.set, **kwargs)
        assert stats_fields(ex) == before
        clock.advance(1000)
        assert ex.submit(lambda: "still works").result(timeout=TIMEOUT) == "still works"
    assert not ran.is_set()
    assert sum(stats_fields(ex).values()) == 1


@pytest.mark.parametrize("expires", ["1", b"1", [1], True, object(), datetime.date.today()])
def test_deadline_of_wrong_type_is_type_error(expires) -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        with pytest.raises(TypeError, match="expires"):
            ex.submit(print, expires=expires)
        assert sum(stats_fields(ex).values()) == 0
        assert ex.submit(lambda: 1, expires=1).result(timeout=TIMEOUT) == 1


def test_expires_is_not_passed_to_the_callee() -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock) as ex:
        future = ex.submit(lambda **kw: kw, expires=5, other=1)
        assert future.result(timeout=TIMEOUT) == {"other": 1}
