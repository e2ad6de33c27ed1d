"""Ordering policies: Fifo, EarliestDeadlineFirst, Aging, custom and broken ones (issue 3).

Every ordering test uses one worker, kept busy by a blocked task while the others are
queued on a ``ManualClock``; when it is released, the order in which the queued tasks run
is the order the policy gave them.
"""

from __future__ import annotations

import collections
import datetime
import math
import threading
from concurrent.futures import Future, wait
from typing import ClassVar

import pytest
from helpers import Boom, blocked_worker, wait_until
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from priority_executor import (
    Aging,
    EarliestDeadlineFirst,
    Fifo,
    Priority,
    PriorityExecutor,
    PriorityFirst,
)
from priority_executor.testing import ManualClock

TIMEOUT = 5.0
LOW, NORMAL, HIGH = Priority.LOW, Priority.NORMAL, Priority.HIGH


class Recorder:
    """Runs tasks named by the test and records the order in which they ran."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, name: str) -> str:
        with self._lock:
            self.order.append(name)
        return name


def run_order(policy, queue_tasks, *, advance: float = 0.0) -> list[str]:
    """Queue tasks behind a blocked single worker, advance the clock, release the worker.

    ``queue_tasks(ex, clock, record)`` submits the tasks; it may move the clock itself.
    Returns the names in the order the tasks ran.
    """
    clock = ManualClock()
    record = Recorder()
    with PriorityExecutor(1, clock=clock, policy=policy) as ex:
        with blocked_worker(ex, priority=0, timeout=TIMEOUT) as (_, busy):
            futures = queue_tasks(ex, clock, record)
            clock.advance(advance)
        busy.result(timeout=TIMEOUT)
        _done, not_done = wait(futures, timeout=TIMEOUT)
        assert not not_done
        for future in futures:
            future.result()
    return record.order


# -- PriorityFirst, the default, for contrast --------------------------------------------


def mixed_priorities(ex, clock, record):
    return [
        ex.submit(record, "low", priority=LOW),
        ex.submit(record, "high-1", priority=HIGH),
        ex.submit(record, "normal", priority=NORMAL),
        ex.submit(record, "high-2", priority=HIGH),
        ex.submit(record, "plain"),
    ]


def test_priority_first_is_the_default_order() -> None:
    order = run_order(PriorityFirst(), mixed_priorities)
    assert order == ["high-1", "high-2", "normal", "plain", "low"]


# -- Fifo --------------------------------------------------------------------------------


def test_fifo_ignores_priority() -> None:
    order = run_order(Fifo(), mixed_priorities)
    assert order == ["low", "high-1", "normal", "high-2", "plain"]
    assert order != run_order(PriorityFirst(), mixed_priorities)


def test_fifo_orders_by_submission_not_by_due_time() -> None:
    def queue(ex, clock, record):
        return [
            ex.submit(record, "submitted first, due at 5", delay=5),
            ex.submit(record, "submitted second, due at 0", priority=HIGH),
            ex.submit(record, "submitted third, due at 1", delay=1, priority=HIGH),
        ]

    assert run_order(Fifo(), queue, advance=10) == [
        "submitted first, due at 5",
        "submitted second, due at 0",
        "submitted third, due at 1",
    ]
    assert run_order(PriorityFirst(), queue, advance=10) == [
        "submitted second, due at 0",
        "submitted third, due at 1",
        "submitted first, due at 5",
    ]


# -- EarliestDeadlineFirst ---------------------------------------------------------------


def deadlines_and_not(ex, clock, record):
    return [
        ex.submit(record, "no deadline, due 3, HIGH", delay=3, priority=HIGH),
        ex.submit(record, "no deadline, due 0, LOW", priority=LOW),
        ex.submit(record, "deadline 50, LOW", expires=50, priority=LOW),
        ex.submit(record, "deadline 20, due 1", expires=20, delay=1),
        ex.submit(record, "no deadline, due 2", delay=2),
        ex.submit(record, "deadline 30, HIGH", expires=datetime.timedelta(seconds=30)),
    ]


def test_earliest_deadline_first() -> None:
    order = run_order(EarliestDeadlineFirst(), deadlines_and_not, advance=5)
    assert order == [
        "deadline 20, due 1",
        "deadline 30, HIGH",
        "deadline 50, LOW",
        "no deadline, due 0, LOW",
        "no deadline, due 2",
        "no deadline, due 3, HIGH",
    ]
    assert order != run_order(PriorityFirst(), deadlines_and_not, advance=5)


def test_earliest_deadline_first_keeps_the_past_due_time_of_run_at() -> None:
    def queue(ex, clock, record):
        clock.advance(100)
        past = datetime.datetime.now() - datetime.timedelta(seconds=50)
        return [
            ex.submit(record, "due now"),
            ex.submit(record, "due in the past", run_at=past),
            ex.submit(record, "deadline", expires=1),
        ]

    order = run_order(EarliestDeadlineFirst(), queue)
    assert order == ["deadline", "due in the past", "due now"]


# -- Aging -------------------------------------------------------------------------------


def old_low_and_new_high(ex, clock, record):
    futures = [ex.submit(record, "LOW, due at 0", priority=LOW)]
    futures.append(ex.submit(record, "HIGH, due at 100", priority=HIGH, delay=100))
    return futures


def test_aging_lets_a_long_waiting_low_task_beat_a_newer_high_one() -> None:
    # At t = 100: LOW has waited 100 s, effective -10 + 1 * 100 = 90 > HIGH's 10.
    assert run_order(Aging(1), old_low_and_new_high, advance=100) == [
        "LOW, due at 0",
        "HIGH, due at 100",
    ]
    assert run_order(PriorityFirst(), old_low_and_new_high, advance=100) == [
        "HIGH, due at 100",
        "LOW, due at 0",
    ]


def test_aging_with_a_small_rate_keeps_priority_order() -> None:
    # At t = 100: LOW's effective priority is -10 + 0.1 * 100 = 0 < HIGH's 10.
    assert run_order(Aging(0.1), old_low_and_new_high, advance=100) == [
        "HIGH, due at 100",
        "LOW, due at 0",
    ]


def test_aging_order_does_not_depend_on_when_the_worker_is_freed() -> None:
    # Linear aging: the order at t = 100 and at t = 1000 is the same.
    for advance in (100, 1000):
        assert run_order(Aging(1), old_low_and_new_high, advance=advance)[0] == "LOW, due at 0"


task_specs = st.lists(
    st.tuples(st.integers(-3, 3), st.sampled_from([None, 0, 1, 2, 3])),
    min_size=1,
    max_size=8,
)


def queue_specs(specs):
    def queue(ex, clock, record):
        futures = []
        for i, (priority, delay) in enumerate(specs):
            kwargs = {} if delay is None else {"delay": delay}
            futures.append(ex.submit(record, str(i), priority=priority, **kwargs))
        return futures

    return queue


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(task_specs)
def test_aging_zero_equals_priority_first(specs) -> None:
    queue = queue_specs(specs)
    assert run_order(Aging(0), queue, advance=5) == run_order(PriorityFirst(), queue, advance=5)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(task_specs, st.sampled_from([0.5, 1, 2, 3]))
def test_aging_orders_by_effective_priority_when_the_worker_is_free(specs, rate) -> None:
    now = 5
    order = run_order(Aging(rate), queue_specs(specs), advance=now)

    def effective(item):
        i, (priority, delay) = item
        due = delay or 0
        return (-(priority + rate * (now - due)), due, i)

    expected = [str(i) for i, _ in sorted(enumerate(specs), key=effective)]
    assert order == expected


@pytest.mark.parametrize("rate", [-1, -0.001, float("nan"), float("inf"), -float("inf")])
def test_aging_rejects_bad_rates(rate) -> None:
    with pytest.raises(ValueError, match="rate"):
        Aging(rate)


@pytest.mark.parametrize("rate", ["x", "1", None, True, [1], 1j])
def test_aging_rejects_rates_of_the_wrong_type(rate) -> None:
    with pytest.raises(TypeError, match="rate"):
        Aging(rate)


@pytest.mark.parametrize("rate", [0, 0.0, 1, 2.5, 1e-9])
def test_aging_accepts_finite_non_negative_rates(rate) -> None:
    with PriorityExecutor(1, policy=Aging(rate)) as ex:
        assert ex.submit(lambda: 42).result(timeout=TIMEOUT) == 42


# -- custom policies ---------------------------------------------------------------------


class LowestPriorityFirst:
    def sort_key(self, task):
        return (task.priority, task.seq)


def test_custom_policy_orders_tasks() -> None:
    order = run_order(LowestPriorityFirst(), mixed_priorities)
    assert order == ["low", "normal", "plain", "high-1", "high-2"]


def test_custom_policy_sees_read_only_task_information() -> None:
    seen: list[dict] = []
    write_errors: list[str] = []

    class Inspecting:
        def sort_key(self, task):
            seen.append(
                {
                    "priority": task.priority,
                    "due": task.due,
                    "deadline": task.deadline,
                    "seq": task.seq,
                }
            )
            for name in ("priority", "due", "deadline", "seq"):
                try:
                    setattr(task, name, 0)
                except AttributeError:
                    write_errors.append(name)
            return (-task.priority, task.due)

    clock = ManualClock(start=10)
    with PriorityExecutor(1, clock=clock, policy=Inspecting()) as ex:
        first = ex.submit(lambda: "a", priority=3)
        assert first.result(timeout=TIMEOUT) == "a"
        second = ex.submit(lambda: "b", priority=Priority.LOW, delay=2, expires=5)
        clock.advance(2)
        assert second.result(timeout=TIMEOUT) == "b"
    assert len(seen) == 2
    assert seen[0]["priority"] == 3
    assert seen[0]["due"] == 10
    assert seen[0]["deadline"] is None
    assert seen[1]["priority"] == -10
    assert seen[1]["due"] == 12
    assert seen[1]["deadline"] == 15
    assert seen[0]["seq"] < seen[1]["seq"]
    assert write_errors == ["priority", "due", "deadline", "seq"] * 2


def test_custom_policy_keys_are_computed_when_due() -> None:
    computed_at: list[tuple[int, float]] = []
    clock = ManualClock()

    class Recording:
        def sort_key(self, task):
            computed_at.append((task.priority, clock.now()))
            return (task.seq,)

    with PriorityExecutor(1, clock=clock, policy=Recording()) as ex:
        later = ex.submit(lambda: None, priority=1, delay=3)
        clock.advance(1)
        assert computed_at == []
        clock.advance(2)
        later.result(timeout=TIMEOUT)
    assert computed_at == [(1, 3)]


def test_custom_policy_with_named_tuple_keys() -> None:
    Key = collections.namedtuple("Key", ["rank", "due"])

    class NamedKeys:
        def sort_key(self, task):
            return Key(-task.priority, task.due)

    assert run_order(NamedKeys(), mixed_priorities) == run_order(PriorityFirst(), mixed_priorities)


def test_custom_policy_with_keys_of_different_lengths() -> None:
    """Keys are compared as tuples: ``(0,) < (0, 0) < (0, 1) < (1,)``."""

    class Ragged:
        keys: ClassVar[dict[int, tuple[int, ...]]] = {1: (0, 1), 2: (0,), 3: (1,), 4: (0, 0)}

        def sort_key(self, task):
            return self.keys.get(task.priority, (-1,))  # (-1,): the blocker

    def queue(ex, clock, record):
        return [ex.submit(record, str(p), priority=p) for p in (1, 2, 3, 4)]

    assert run_order(Ragged(), queue) == ["2", "4", "1", "3"]


def test_custom_policy_with_a_key_that_extends_an_equal_shorter_one() -> None:
    """``(0,)`` and ``(0, 2)`` are ordinary, comparable tuple keys; queuing both must
    neither misorder them nor break the worker that takes them."""

    class Ragged:
        def sort_key(self, task):
            return {1: (0,), 2: (0, 2)}.get(task.priority, (-1,))

    def queue(ex, clock, record):
        return [
            ex.submit(record, "one", priority=1),
            ex.submit(record, "two", priority=1),
            ex.submit(record, "three", priority=2),
        ]

    assert run_order(Ragged(), queue) == ["one", "two", "three"]


@pytest.mark.parametrize("policy", [object(), "fifo", 42, None])
def test_policy_without_sort_key_is_type_error(policy) -> None:
    with pytest.raises(TypeError):
        PriorityExecutor(1, policy=policy)


def test_policy_with_non_callable_sort_key_is_type_error() -> None:
    class NotCallable:
        sort_key = (1, 2)

    with pytest.raises(TypeError):
        PriorityExecutor(1, policy=NotCallable())


# -- broken policies ---------------------------------------------------------------------


POISON = 666


class Raising:
    def sort_key(self, task):
        if task.priority == POISON:
            raise Boom("no key for you")
        return (-task.priority, task.due)


def test_raising_policy_fails_a_due_task_at_submit_and_others_run() -> None:
    clock = ManualClock()
    with PriorityExecutor(2, clock=clock, policy=Raising()) as ex:
        before = ex.submit(lambda: "before")
        bad = ex.submit(lambda: "never", priority=POISON)
        assert bad.done()
        assert isinstance(bad.exception(timeout=0), Boom)
        after = ex.submit(lambda: "after")
        assert before.result(timeout=TIMEOUT) == "before"
        assert after.result(timeout=TIMEOUT) == "after"
    stats = ex.stats()
    assert (stats.completed, stats.failed, stats.scheduled, stats.ready) == (2, 1, 0, 0)


def test_raising_policy_fails_a_delayed_task_at_promotion_and_others_run() -> None:
    clock = ManualClock()
    ran = threading.Event()
    with PriorityExecutor(1, clock=clock, policy=Raising()) as ex:
        first = ex.submit(lambda: "first", delay=1)
        bad = ex.submit(ran.set, priority=POISON, delay=1)
        last = ex.submit(lambda: "last", delay=1, priority=-1)
        assert not bad.done()
        clock.advance(1)
        assert bad.done()
        assert isinstance(bad.exception(timeout=0), Boom)
        assert first.result(timeout=TIMEOUT) == "first"
        assert last.result(timeout=TIMEOUT) == "last"
        # The executor keeps working, for due and delayed tasks alike.
        assert ex.submit(lambda: 1).result(timeout=TIMEOUT) == 1
        later = ex.submit(lambda: 2, delay=5)
        clock.advance(5)
        assert later.result(timeout=TIMEOUT) == 2
    assert not ran.is_set()
    assert ex.stats().failed == 1
    assert ex.stats().completed == 4


@pytest.mark.parametrize("delay", [None, 1])
def test_raising_policy_on_a_task_with_a_deadline(delay) -> None:
    clock = ManualClock()
    with PriorityExecutor(1, clock=clock, policy=Raising()) as ex:
        bad = ex.submit(lambda: None, priority=POISON, delay=delay, expires=2)
        clock.advance(1)
        assert isinstance(bad.exception(timeout=0), Boom)
        clock.advance(5)  # its deadline passes: it stays failed, and is not counted again
        assert isinstance(bad.exception(timeout=0), Boom)
        assert ex.submit(lambda: "ok", expires=1).result(timeout=TIMEOUT) == "ok"
    stats = ex.stats()
    assert (stats.completed, stats.failed, stats.expired, stats.cancelled) == (1, 1, 0, 0)


def test_raising_policy_with_real_time_promoter() -> None:
    with PriorityExecutor(1, policy=Raising()) as ex:
        bad = ex.submit(lambda: None, priority=POISON, delay=0.01)
        good = ex.submit(lambda: "good", delay=0.02)
        assert isinstance(bad.exception(timeout=TIMEOUT), Boom)
        assert good.result(timeout=TIMEOUT) == "good"
        # The promoter survived: a later delayed task still runs.
        assert ex.submit(lambda: "later", delay=0.01).result(timeout=TIMEOUT) == "later"


def test_raising_policy_ends_a_recurring_series_with_the_error() -> None:
    clock = ManualClock()
    runs: list[float] = []
    with PriorityExecutor(1, clock=clock, policy=Raising()) as ex:
        series = ex.submit_recurring(lambda: runs.append(clock.now()), interval=1, priority=POISON)
        assert isinstance(series.exception(timeout=TIMEOUT), Boom)
        clock.advance(5)
        assert ex.submit(lambda: "ok").result(timeout=TIMEOUT) == "ok"
    assert runs == []


def test_policy_failing_at_a_later_run_of_a_series_ends_the_series() -> None:
    clock = ManualClock()
    runs: list[float] = []
    calls = [0]

    class FailsSecondTime:
        def sort_key(self, task):
            if task.priority == POISON:
                calls[0] += 1
                if calls[0] == 2:
                    raise Boom("second key")
            return (-task.priority, task.due)

    with PriorityExecutor(1, clock=clock, policy=FailsSecondTime()) as ex:
        series = ex.submit_recurring(lambda: runs.append(clock.now()), interval=1, priority=POISON)
        wait_until(lambda: ex.stats().completed >= 1, TIMEOUT)
        assert not series.done()
        clock.advance(1)
        assert isinstance(series.exception(timeout=TIMEOUT), Boom)
        clock.advance(5)
        assert ex.submit(lambda: "ok").result(timeout=TIMEOUT) == "ok"
    assert runs == [0]
    stats = ex.stats()
    assert (stats.completed, stats.failed, stats.scheduled, stats.ready) == (2, 1, 0, 0)


@pytest.mark.parametrize(
    "bad_key",
    [None, "a string", (1, None), (None,), ("a",), (1, "x"), 7],
    ids=repr,
)
@pytest.mark.parametrize("delayed", [False, True], ids=["due", "delayed"])
def test_unorderable_key_fails_only_that_task(bad_key, delayed: bool) -> None:
    class Unorderable:
        def sort_key(self, task):
            if task.priority == POISON:
                return bad_key
            return (-task.priority, task.seq)

    clock = ManualClock()
    record = Recorder()
    timing = {"delay": 1} if delayed else {}
    with PriorityExecutor(1, clock=clock, policy=Unorderable()) as ex:
        with blocked_worker(ex, priority=0, timeout=TIMEOUT):
            good = [ex.submit(record, f"good-{i}", priority=i, **timing) for i in range(3)]
            bad = ex.submit(record, "bad", priority=POISON, **timing)
            more = [ex.submit(record, f"more-{i}", priority=i, **timing) for i in range(3)]
            clock.advance(1)
            assert bad.done()
            assert isinstance(bad.exception(timeout=0), TypeError)
        for future in good + more:
            future.result(timeout=TIMEOUT)
    assert record.order == ["good-2", "more-2", "good-1", "more-1", "good-0", "more-0"]
    stats = ex.stats()
    assert (stats.completed, stats.failed) == (7, 1)


def test_builtin_policies_are_reusable_across_executors() -> None:
    for policy in (PriorityFirst(), Fifo(), EarliestDeadlineFirst(), Aging(1)):
        for _ in range(2):
            with PriorityExecutor(2, policy=policy) as ex:
                futures = [ex.submit(math.factorial, i, priority=i % 3) for i in range(20)]
                assert [f.result(timeout=TIMEOUT) for f in futures] == [
                    math.factorial(i) for i in range(20)
                ]


def test_future_type_is_real() -> None:
    with PriorityExecutor(1, policy=Fifo()) as ex:
        assert isinstance(ex.submit(int), Future)
