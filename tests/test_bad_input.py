"""Bad arguments raise at submit(), name the argument, and leave the executor as it was."""

from __future__ import annotations

import datetime
import itertools
import math
import os
import threading
from typing import Any, Callable

import pytest
from helpers import TIMEOUT

from priority_executor import Priority, PriorityExecutor
from priority_executor.testing import ManualClock

_unique = itertools.count()

NOW = datetime.datetime.now()
Call = Callable[[PriorityExecutor], object]

BAD_SUBMITS: list[tuple[str, Call, type[Exception], str]] = [
    ("fn-int", lambda ex: ex.submit(3), TypeError, "fn"),
    ("fn-none", lambda ex: ex.submit(None), TypeError, "fn"),
    ("fn-str", lambda ex: ex.submit("print"), TypeError, "fn"),
    ("priority-str", lambda ex: ex.submit(int, priority="1"), TypeError, "priority"),
    ("priority-float", lambda ex: ex.submit(int, priority=1.5), TypeError, "priority"),
    ("priority-true", lambda ex: ex.submit(int, priority=True), TypeError, "priority"),
    ("priority-false", lambda ex: ex.submit(int, priority=False), TypeError, "priority"),
    ("priority-delayed", lambda ex: ex.submit(int, priority=2.0, delay=1), TypeError, "priority"),
    ("delay-negative", lambda ex: ex.submit(int, delay=-1), ValueError, "delay"),
    ("delay-tiny-negative", lambda ex: ex.submit(int, delay=-1e-9), ValueError, "delay"),
    ("delay-nan", lambda ex: ex.submit(int, delay=math.nan), ValueError, "delay"),
    ("delay-inf", lambda ex: ex.submit(int, delay=math.inf), ValueError, "delay"),
    ("delay-minus-inf", lambda ex: ex.submit(int, delay=-math.inf), ValueError, "delay"),
    (
        "delay-negative-timedelta",
        lambda ex: ex.submit(int, delay=datetime.timedelta(seconds=-1)),
        ValueError,
        "delay",
    ),
    ("delay-str", lambda ex: ex.submit(int, delay="1"), TypeError, "delay"),
    ("delay-list", lambda ex: ex.submit(int, delay=[1]), TypeError, "delay"),
    ("delay-datetime", lambda ex: ex.submit(int, delay=NOW), TypeError, "delay"),
    (
        "delay-and-run_at",
        lambda ex: ex.submit(int, delay=1, run_at=NOW),
        ValueError,
        "delay",
    ),
    (
        "delay-zero-and-run_at",
        lambda ex: ex.submit(int, delay=0, run_at=NOW + datetime.timedelta(hours=1)),
        ValueError,
        "run_at",
    ),
    ("run_at-str", lambda ex: ex.submit(int, run_at="2030-01-01T00:00:00"), TypeError, "run_at"),
    ("run_at-number", lambda ex: ex.submit(int, run_at=1e10), TypeError, "run_at"),
    ("run_at-date", lambda ex: ex.submit(int, run_at=NOW.date()), TypeError, "run_at"),
    (
        "run_at-timedelta",
        lambda ex: ex.submit(int, run_at=datetime.timedelta(seconds=5)),
        TypeError,
        "run_at",
    ),
    ("map-priority", lambda ex: ex.map(int, [1, 2], priority="high"), TypeError, "priority"),
    ("map-fn", lambda ex: ex.map(5, [1, 2]), TypeError, "fn"),
    ("recurring-fn", lambda ex: ex.submit_recurring(5, interval=1), TypeError, "fn"),
    (
        "recurring-interval-0",
        lambda ex: ex.submit_recurring(int, interval=0),
        ValueError,
        "interval",
    ),
    (
        "recurring-interval-negative",
        lambda ex: ex.submit_recurring(int, interval=-1),
        ValueError,
        "interval",
    ),
    (
        "recurring-interval-nan",
        lambda ex: ex.submit_recurring(int, interval=math.nan),
        ValueError,
        "interval",
    ),
    (
        "recurring-interval-str",
        lambda ex: ex.submit_recurring(int, interval="1"),
        TypeError,
        "interval",
    ),
    (
        "recurring-priority",
        lambda ex: ex.submit_recurring(int, interval=1, priority=True),
        TypeError,
        "priority",
    ),
    (
        "recurring-delay",
        lambda ex: ex.submit_recurring(int, interval=1, delay=-1),
        ValueError,
        "delay",
    ),
]


def threads_named(prefix: str) -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t.name.startswith(prefix))


@pytest.mark.parametrize(
    ("call", "error", "argument"),
    [case[1:] for case in BAD_SUBMITS],
    ids=[case[0] for case in BAD_SUBMITS],
)
def test_bad_argument_raises_names_it_and_changes_nothing(
    call: Call, error: type[Exception], argument: str
) -> None:
    clock = ManualClock()
    prefix = f"bad{os.getpid()}x{next(_unique)}"
    order: list[str] = []
    ex = PriorityExecutor(1, thread_name_prefix=prefix, clock=clock)
    try:
        earlier_now = ex.submit(order.append, "earlier-now")
        earlier_now.result(timeout=TIMEOUT)
        earlier_delayed = ex.submit(order.append, "earlier-delayed", delay=5)
        before = ex.stats()
        threads_before = threads_named(prefix)

        with pytest.raises(error) as info:
            call(ex)
        assert argument in str(info.value)

        assert ex.stats() == before
        assert threads_named(prefix) == threads_before
        later_delayed = ex.submit(order.append, "later-delayed", delay=5)
        later_now = ex.submit(order.append, "later-now")
        later_now.result(timeout=TIMEOUT)
        clock.advance(5)
        earlier_delayed.result(timeout=TIMEOUT)
        later_delayed.result(timeout=TIMEOUT)
    finally:
        clock.advance(10)
        ex.shutdown(wait=True)
    assert order == ["earlier-now", "later-now", "earlier-delayed", "later-delayed"]
    stats = ex.stats()
    assert (stats.completed, stats.failed, stats.cancelled, stats.scheduled) == (4, 0, 0, 0)


def test_bad_input_on_a_fresh_executor_starts_no_thread() -> None:
    prefix = f"fresh{os.getpid()}x{next(_unique)}"
    with PriorityExecutor(2, thread_name_prefix=prefix) as ex:
        for _, call, error, _ in BAD_SUBMITS:
            with pytest.raises(error):
                call(ex)
        assert threads_named(prefix) == []
        assert ex.stats() == PriorityExecutor(1).stats()  # all zero
        assert ex.submit(int, 1).result(timeout=TIMEOUT) == 1
        assert ex.submit(int, 2, delay=0.001).result(timeout=TIMEOUT) == 2


def test_bad_input_with_a_busy_queue_keeps_the_order() -> None:
    started, release = threading.Event(), threading.Event()

    def blocker() -> None:
        started.set()
        assert release.wait(TIMEOUT)

    order: list[int] = []
    with PriorityExecutor(1) as ex:
        try:
            ex.submit(blocker)
            assert started.wait(TIMEOUT)
            futures = []
            for i in range(10):
                futures.append(ex.submit(order.append, i))
                with pytest.raises(TypeError):
                    ex.submit(order.append, -i, priority=str(i))
                with pytest.raises(ValueError):
                    ex.submit(order.append, -i, delay=-i - 1)
            assert ex.stats().ready == 10
        finally:
            release.set()
        for future in futures:
            future.result(timeout=TIMEOUT)
    assert order == list(range(10))


def test_valid_edge_values_are_accepted() -> None:
    """The other side of the line: these must not raise."""
    clock = ManualClock()
    ok: list[Any] = [
        {"priority": 0},
        {"priority": -(10**30)},
        {"priority": Priority.LOW},
        {"delay": 0},
        {"delay": 0.0},
        {"delay": datetime.timedelta(0)},
        {"delay": 10**9},
        {"run_at": datetime.datetime(1970, 1, 2)},
        {"run_at": datetime.datetime(2999, 1, 1, tzinfo=datetime.timezone.utc)},
    ]
    with PriorityExecutor(1, clock=clock) as ex:
        futures = [ex.submit(int, **kwargs) for kwargs in ok]
        for i in (0, 1, 2, 3, 4, 5, 7):
            assert futures[i].result(timeout=TIMEOUT) == 0
        assert not futures[6].done()
        assert not futures[8].done()
        futures[6].cancel()
        futures[8].cancel()
