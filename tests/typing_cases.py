# mypy: enable-error-code="deprecated"
"""Calls that type checkers must accept, with the types they infer, and calls they must reject.

Checked, never run: ``mypy tests/typing_cases.py`` and ``pyright``, both strict as
configured in pyproject.toml (CI runs both). Each rejected call carries one ignore comment
per checker, naming the error it expects; both checkers report an ignore comment that is
not needed (mypy: ``warn_unused_ignores``, part of strict; pyright:
``reportUnnecessaryTypeIgnoreComment``, with mypy's ``type: ignore`` comments left to mypy),
so a call that stops being an error fails the check, as does a failed ``assert_type``.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Literal, Optional, TypeVar

from typing_extensions import assert_type

from priority_executor import (
    CancelToken,
    Cron,
    DependencyFailed,
    Event,
    ExecutorStats,
    Fifo,
    Lane,
    Priority,
    PriorityExecutor,
    Retry,
    Smooth,
    Subscription,
    TaskTimeoutError,
    Timings,
    current,
    record_metrics,
    record_spans,
    stop,
    submit_graph,
    timings,
)
from priority_executor.events import Finished, Submitted, Throttled, TimedOut
from priority_executor.testing import ManualClock

T = TypeVar("T")


def f(x: int) -> int:
    return x


def g(x: int, *, label: str) -> str:
    return label * x


def h() -> None:
    pass


def add(x: int, y: float) -> float:
    return x + y


def between(low: int, x: float, high: int) -> bool:
    return low <= x <= high


class BusinessDays:
    def next_after(self, moment: datetime, /) -> datetime | None:
        return moment + timedelta(days=1)


def accepted(ex: PriorityExecutor, clock: ManualClock) -> None:
    # As ThreadPoolExecutor.submit: the callee's arguments, positional or by keyword.
    assert_type(ex.submit(f, 1), Future[int])
    assert_type(ex.submit(f, x=1), Future[int])
    assert_type(ex.submit(g, 1, label="a"), Future[str])
    assert_type(ex.submit(h), Future[None])
    # Scheduling keywords, with positional arguments for the callee.
    assert_type(ex.submit(f, 1, priority=Priority.HIGH), Future[int])
    assert_type(ex.submit(f, 1, priority=-3, delay=1), Future[int])
    assert_type(ex.submit(f, 1, delay=1.5, expires=10), Future[int])
    assert_type(ex.submit(f, 1, delay=timedelta(seconds=1)), Future[int])
    assert_type(ex.submit(f, 1, run_at=datetime(2030, 1, 1)), Future[int])
    assert_type(ex.submit(f, 1, expires=timedelta(seconds=1)), Future[int])
    assert_type(ex.submit(f, 1, expires=datetime(2030, 1, 1)), Future[int])
    assert_type(ex.submit(h, priority=1), Future[None])
    # Callee keywords with scheduling keywords: through functools.partial.
    assert_type(ex.submit(functools.partial(g, label="a"), 1, priority=1), Future[str])

    assert_type(ex.submit_recurring(f, 1, interval=60), Future[None])
    assert_type(
        ex.submit_recurring(
            h, interval=timedelta(minutes=1), fixed_rate=True, priority=Priority.LOW, delay=5
        ),
        Future[None],
    )
    assert_type(ex.submit_recurring(h, interval=1, run_at=datetime(2030, 1, 1)), Future[None])
    assert_type(ex.submit_recurring(functools.partial(g, label="a"), 1, interval=1), Future[None])
    # A calendar schedule: a Cron, or any object with next_after().
    assert_type(ex.submit_recurring(h, interval=Cron("0 2 * * *", tz="UTC")), Future[None])
    assert_type(ex.submit_recurring(f, 1, interval=BusinessDays()), Future[None])

    assert_type(ex.map(f, [1, 2]), Iterator[int])
    assert_type(ex.map(f, range(3), timeout=5, priority=Priority.HIGH), Iterator[int])
    assert_type(ex.map(add, [1], [2.5]), Iterator[float])
    assert_type(ex.map(between, [1], [2.5], [3]), Iterator[bool])
    assert_type(ex.map(f, range(3), buffersize=2), Iterator[int])

    clock.advance(1.5)
    clock.advance(timedelta(seconds=1))
    clock.advance_to(datetime(2030, 1, 1, tzinfo=timezone.utc))
    clock.step_wall(-3600)
    assert_type(ex.waiting()[0].runs_at, Optional[datetime])

    # A lane has the executor's surface; its calls are typed the same way.
    lane = ex.lane("api", max_starts=10, per=timedelta(seconds=1), cooldown=0.5, priority=1)
    assert_type(lane, Lane)
    assert_type(lane.name, "str | None")
    assert_type(lane.submit(f, 1), Future[int])
    assert_type(lane.submit(f, x=1), Future[int])
    assert_type(lane.submit(f, 1, priority=None, delay=1, expires=5), Future[int])
    assert_type(lane.submit_recurring(h, interval=1), Future[None])
    assert_type(lane.map(f, [1, 2], priority=Priority.HIGH), Iterator[int])
    assert_type(lane.stats(), ExecutorStats)
    with ex.lane(max_running=2) as anonymous:
        assert_type(anonymous, Lane)
    bounded = ex.lane("bounded", max_waiting=10, waiting_timeout=0)
    assert_type(bounded.max_waiting, "int | None")
    assert_type(bounded.waiting_timeout, "float | None")
    assert_type(ex.waiting()[0].held_by, Optional[Literal["max_running", "max_starts", "cooldown"]])
    assert_type(ex.waiting()[0].starts_in, "float | None")
    assert_type(ex.waiting()[0].held_in, "str | None")
    # Fair share: weights, lanes inside lanes, several rates, limits changed at run time.
    hosts = ex.lane("hosts", rates=[(10, 1.0), (1000, timedelta(hours=1))], weight=2)
    host = ex.lane("host-a", parent=hosts, max_running=2, weight=0.5)
    assert_type(host.parent, "Lane | None")
    assert_type(hosts.rates, "tuple[tuple[int, float] | Smooth, ...]")
    assert_type(hosts.weight, "float | None")
    host.configure(max_running=None, rates=[(5, 1.0)], cooldown=timedelta(seconds=1), weight=3)
    host.configure(max_starts=10, per=2)
    host.configure(time_limit=timedelta(seconds=5))
    host.configure(time_limit=None)
    host.configure(time_limit="5s")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    host.configure(weight="heavy")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    ex.lane(parent="hosts")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


def wrapped(ex: PriorityExecutor, lane: Lane, kw: dict[str, Any], nums: list[int]) -> None:
    # Code that wraps an executor, as it is written for ThreadPoolExecutor: it passes on
    # what it was given, typed Any, and gets the callee's result type.
    def run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
        return ex.submit(fn, *args, **kwargs)

    def run_in_lane(fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
        return lane.submit(fn, *args, **kwargs)

    def every_minute(fn: Callable[..., object], *args: Any, **kwargs: Any) -> Future[None]:
        return ex.submit_recurring(fn, *args, interval=60, **kwargs)

    def map_all(fn: Callable[..., T], *iterables: Iterable[Any], **kwargs: Any) -> Iterator[T]:
        return ex.map(fn, *iterables, **kwargs)

    assert_type(run(f, 1), Future[int])
    assert_type(run_in_lane(g, 1, label="a"), Future[str])
    assert_type(every_minute(h), Future[None])
    assert_type(map_all(f, [1]), Iterator[int])
    assert_type(ex.submit(add, **kw), Future[float])
    assert_type(lane.submit(add, **kw), Future[float])
    assert_type(ex.submit(f, *nums), Future[int])
    # Wherever a ThreadPoolExecutor is expected.
    pool: ThreadPoolExecutor = ex
    assert_type(pool.submit(f, 1), Future[int])


def constructed() -> None:
    with PriorityExecutor(4, "name", policy=Fifo(), clock=ManualClock()) as ex:
        assert_type(ex, PriorityExecutor)
    PriorityExecutor(backend="process")
    PriorityExecutor(backend=ProcessPoolExecutor())
    PriorityExecutor(max_waiting=100)
    PriorityExecutor(max_waiting=100, waiting_timeout=0.5)
    PriorityExecutor(max_waiting=100, waiting_timeout=timedelta(seconds=1))
    PriorityExecutor(inherit_context=False)


def limited(ex: PriorityExecutor, lane: Lane, future: Future[int]) -> None:
    # Run-time limits: per executor, lane and call; the token inside a task.
    PriorityExecutor(time_limit=5)
    PriorityExecutor(time_limit=timedelta(seconds=5))
    ex.lane("slow", time_limit=30.0)
    assert_type(ex.options(time_limit=1).submit(f, 1), Future[int])
    assert_type(lane.options(time_limit=timedelta(seconds=1)).submit(g, 1, label="a"), Future[str])
    assert_type(ex.options(time_limit=1).submit_recurring(h, interval=1), Future[None])
    token = current()
    assert_type(token, CancelToken)
    assert_type(token.cancelled, bool)
    assert_type(token.sleep(0.1), bool)
    assert_type(token.deadline, "float | None")
    assert_type(token.time_left(), "float | None")
    assert_type(token.reason, "BaseException | None")
    token.on_cancel(h)
    token.raise_if_cancelled()
    assert_type(stop(future), bool)
    assert_type(TaskTimeoutError("f", 1.0).limit, float)
    assert_type(lane.time_limit, "float | None")
    ex.terminate_workers()
    ex.kill_workers()
    assert_type(Retry(3, on=TaskTimeoutError, budget=timedelta(seconds=30)).budget, "float | None")
    ex.options(time_limit="5")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    ex.options(5)  # type: ignore[call-arg, arg-type]  # pyright: ignore[reportCallIssue]
    ex.submit(f, 1, time_limit=5)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]


def rescheduled(ex: PriorityExecutor, future: Future[int]) -> None:
    assert_type(ex.reschedule(future, priority=Priority.HIGH), bool)
    assert_type(ex.reschedule(future, delay=timedelta(seconds=5), expires=30.0), bool)
    assert_type(ex.reschedule(future, run_at=datetime(2030, 1, 1)), bool)


def parse(node: str, inputs: dict[str, int]) -> int:
    return len(node) + sum(inputs.values())


def dependent(ex: PriorityExecutor, lane: Lane, up: Future[int], ups: list[Future[str]]) -> None:
    # Tasks that wait for futures: one, or an iterable of them; the callee typed as ever.
    assert_type(ex.options(after=up).submit(f, 1), Future[int])
    assert_type(ex.options(after=ups, after_any=up).submit(f, 1, priority=2), Future[int])
    assert_type(lane.options(after_any=ups).submit_recurring(h, interval=1), Future[None])
    assert_type(ex.options(after=(up,)).map(f, [1]), Iterator[int])
    assert_type(submit_graph(ex, {"b": ["a"]}, parse), dict[str, Future[int]])
    assert_type(submit_graph(lane, {1: [2]}, lambda node, inputs: node), dict[int, Future[int]])
    failed = DependencyFailed("parse", up, "failed")
    assert_type(failed.upstream, Future[Any])
    assert_type(failed.reason, Literal["failed", "cancelled", "expired"])
    assert_type(ex.stats().blocked, int)
    assert_type(ex.waiting()[0].after, tuple[Future[Any], ...])


def rejected(ex: PriorityExecutor, nums: list[int]) -> None:
    ex.options(after=1)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    ex.options(after_any=[1])  # type: ignore[list-item]  # pyright: ignore[reportArgumentType]
    ex.options(before=[])  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    ex.options(after=[]).submit(f, "a")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType, reportCallIssue]
    submit_graph(ex, {"b": ["a"]}, f)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    DependencyFailed("parse", 1, "failed")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    DependencyFailed("parse", Future(), "broke")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    ex.lane("api").submit(f, "a")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType, reportCallIssue]
    ex.lane(max_running=1.5)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    # The examples: each is an error for ThreadPoolExecutor.submit too.
    ex.submit(f, "a")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType, reportCallIssue]
    ex.submit(f)  # type: ignore[arg-type, call-arg]  # pyright: ignore[reportCallIssue]
    ex.submit(f, 1, 2)  # type: ignore[arg-type, call-arg]  # pyright: ignore[reportCallIssue]
    ex.submit(g, 1, label=3)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    ex.submit(g, 1, labl="x")  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    # The same with a scheduling keyword.
    ex.submit(f, "a", priority=1)  # type: ignore[arg-type, call-arg]  # pyright: ignore[reportCallIssue]
    ex.submit(f, priority=1)  # type: ignore[arg-type, call-arg]  # pyright: ignore[reportCallIssue]
    ex.submit(f, 1, 2, delay=1)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    # A callee keyword beside a scheduling keyword: use functools.partial.
    ex.submit(g, 1, label="a", priority=1)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    # *args from a list beside a scheduling keyword: the TypeVarTuple form cannot tell its
    # length, and accepting it would accept wrong positional types too.
    ex.submit(f, *nums, priority=1)  # type: ignore[arg-type]  # pyright: ignore[reportCallIssue]
    # Scheduling keywords take what the runtime takes, and no more. A wrong one is reported
    # against the ParamSpec form, as an unexpected keyword (see _submitting.py).
    ex.submit(f, 1, priority="high")  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    ex.submit(f, 1, priority=1.5)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    ex.submit(f, 1, delay="1")  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    ex.submit(f, 1, delay=datetime(2030, 1, 1))  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    ex.submit(f, 1, run_at=5)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    ex.submit(f, 1, run_at=timedelta(seconds=5))  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    ex.submit(f, 1, expires="soon")  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]

    ex.submit_recurring(f, interval=1)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    ex.submit_recurring(f, "a", interval=1)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    ex.submit_recurring(f, 1)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    # No keyword for the callee, reserved expires included: each is a wrong argument type.
    ex.submit_recurring(f, 1, interval=1, expires=5)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    ex.submit_recurring(g, 1, interval=1, label="a")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    ex.submit_recurring(f, 1, interval=None)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    ex.submit_recurring(f, 1, interval="0 2 * * *")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    Cron("0 2 * * *", tz=1)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    ex.submit_recurring(f, 1, interval=1, priority="high")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    ex.submit_recurring(f, 1, interval=1, delay="1")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    ex.submit_recurring(f, 1, interval=1, run_at=5)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]

    ex.map(f, ["a"])  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    ex.map(f, [1], [2])  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    ex.map(f, [1], priority="high")  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType]
    ex.map(f, [1], buffersize=2.5)  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType]

    PriorityExecutor("4")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    PriorityExecutor(max_waiting=1.5)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    PriorityExecutor(max_waiting=1, waiting_timeout="1")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    ex.lane(max_waiting=1, waiting_timeout="1")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    ex.reschedule(ex.submit(h), run_at=5)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    ex.reschedule(ex.submit(h), 1)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    PriorityExecutor(policy=Fifo)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    PriorityExecutor(backend="thread")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    PriorityExecutor(inherit_context=None)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    ManualClock().advance("1")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


def smooth_rates(ex: PriorityExecutor) -> None:
    lane = ex.lane("api", rates=[Smooth(10, 1.0, burst=2), (100, 60.0)])
    lane.configure(rates=[Smooth(5)])
    Smooth(1.5)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    PriorityExecutor(fair_share="time")
    PriorityExecutor(fair_share="workers")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


async def awaited(ex: PriorityExecutor, lane: Lane) -> None:
    # Awaitable submits: typed as submit() and map(), with an asyncio future.
    assert_type(ex.asubmit(f, 1), asyncio.Future[int])
    assert_type(await ex.asubmit(f, 1), int)
    assert_type(await ex.asubmit(g, 1, label="a"), str)
    assert_type(await ex.asubmit(f, 1, priority=Priority.HIGH, delay=1, expires=5), int)
    assert_type(await lane.asubmit(h), None)
    assert_type(await ex.options().asubmit(functools.partial(g, label="a"), 1, priority=1), str)
    assert_type(ex.amap(f, [1, 2]), AsyncIterator[int])
    assert_type(lane.amap(add, [1], [2.5], buffersize=2, priority=1), AsyncIterator[float])
    assert_type([x async for x in lane.options().amap(between, [1], [2.5], [3])], list[bool])

    await ex.asubmit(f, "a")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType, reportCallIssue]
    await ex.asubmit(g, 1, label="a", priority=1)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    await lane.asubmit(f, 1, priority="high")  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    ex.amap(f, ["a"])  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    ex.amap(f, [1], buffersize=2.5)  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType]


def events_and_timings(ex: PriorityExecutor) -> None:
    def on_event(event: Event) -> None:
        if isinstance(event, Throttled):
            assert_type(event.limit, Optional[Literal["max_running", "max_starts", "cooldown"]])
        if isinstance(event, Finished):
            assert_type(event.outcome, Literal["completed", "failed", "cancelled"])
        if isinstance(event, TimedOut):
            assert_type(event.limit, float)
        if isinstance(event, Submitted):
            assert_type(event.recurring, bool)

    subscription = ex.subscribe(on_event)
    assert_type(subscription, Subscription)
    with ex.subscribe(print, lane=ex.lane("api")):
        pass
    subscription.close()
    future = ex.options(timings=True).submit(f, 1)
    found = timings(future)
    assert_type(found, Optional[Timings])
    if found is not None:
        assert_type(found.queue, float)
        assert_type(found.started, Optional[float])
    assert_type(record_metrics(ex, max_lanes=5), Subscription)
    assert_type(record_spans(ex), Subscription)
    assert_type(found.blocked if found is not None else 0.0, float)

    ex.subscribe(f)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    ex.subscribe(on_event, lane="api")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    ex.options(timings="yes")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    record_metrics(ex, max_lanes="5")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    record_spans(ex, max_lanes=5)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
