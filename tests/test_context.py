"""A task runs in the ``contextvars`` context of the code that submitted it (issue 46).

Every path a task can take: ``submit``, ``map``, lanes (held back by a limit too), delays,
deadlines, ``reschedule()``, retries, recurring and calendar series, a task's own
submits, asyncio's ``run_in_executor`` and ``to_thread``, backends. What a task sets there
reaches no other task; ``inherit_context=False`` gives ``ThreadPoolExecutor``'s behaviour.
Then the same with OpenTelemetry's real SDK and threading instrumentation: a task
submitted inside span B sees span B, wherever its worker thread started.
"""

from __future__ import annotations

import asyncio
import datetime
import gc
import weakref
from collections.abc import Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextvars import ContextVar, copy_context
from typing import Any, Callable

import pytest
import remote
from helpers import TIMEOUT, Boom, wait_until

from priority_executor import PriorityExecutor, Retry
from priority_executor.testing import ManualClock

REQUEST: ContextVar[str] = ContextVar("request", default="none")
UTC = datetime.timezone.utc


@pytest.fixture
def request_id() -> Iterator[str]:
    """The submitter's request: set in the test's context for the test only."""
    token = REQUEST.set("request-1")
    yield "request-1"
    REQUEST.reset(token)


def seen(*args: object) -> str:
    return REQUEST.get()


def seen_then_set(*args: object) -> str:
    """What the task sees; then it sets a value of its own, which must reach no one."""
    value = REQUEST.get()
    REQUEST.set("set by a task")
    return value


class Runs:
    """A task that records what each of its runs (or attempts) saw, sets a value of its
    own, and raises for the first ``failures`` calls."""

    def __init__(self, failures: int = 0) -> None:
        self.seen: list[str] = []
        self.failures = failures

    def __call__(self) -> str:
        self.seen.append(REQUEST.get())
        REQUEST.set(f"set by run {len(self.seen)}")
        if len(self.seen) <= self.failures:
            raise Boom
        return "done"


class EveryMinute:
    """A calendar schedule: each minute, on the minute."""

    def next_after(self, moment: datetime.datetime) -> datetime.datetime:
        return moment.replace(second=0, microsecond=0) + datetime.timedelta(minutes=1)


# -- the submitter's context, on every path -----------------------------------------------


def on_submit(ex: PriorityExecutor, clock: ManualClock) -> list[str]:
    return [ex.submit(seen_then_set).result(TIMEOUT), ex.submit(seen).result(TIMEOUT)]


def on_map(ex: PriorityExecutor, clock: ManualClock) -> list[str]:
    return list(ex.map(seen_then_set, range(4), timeout=TIMEOUT))


def on_map_with_a_buffer(ex: PriorityExecutor, clock: ManualClock) -> list[str]:
    # Refills are submitted as results are taken: here, in the same context.
    return list(ex.map(seen_then_set, range(6), timeout=TIMEOUT, buffersize=2))


def on_a_lane(ex: PriorityExecutor, clock: ManualClock) -> list[str]:
    lane = ex.lane("context", max_running=1)
    # The second waits, throttled, in the lane's own heap until the first ends.
    futures = [lane.submit(seen_then_set) for _ in range(3)]
    return [future.result(TIMEOUT) for future in futures]


def on_a_delay(ex: PriorityExecutor, clock: ManualClock) -> list[str]:
    future = ex.submit(seen_then_set, delay=5)
    clock.advance(5)
    return [future.result(TIMEOUT)]


def on_a_deadline(ex: PriorityExecutor, clock: ManualClock) -> list[str]:
    return [ex.submit(seen_then_set, expires=60).result(TIMEOUT)]


def on_a_reschedule(ex: PriorityExecutor, clock: ManualClock) -> list[str]:
    future = ex.submit(seen_then_set, delay=50)
    assert ex.reschedule(future, delay=1, priority=3)
    clock.advance(1)
    return [future.result(TIMEOUT)]


def on_a_lane_with_a_delay(ex: PriorityExecutor, clock: ManualClock) -> list[str]:
    future = ex.lane(max_running=1).submit(seen_then_set, delay=2)
    clock.advance(2)
    return [future.result(TIMEOUT)]


def on_retries(ex: PriorityExecutor, clock: ManualClock) -> list[str]:
    runs = Runs(failures=2)
    future = ex.lane(retry=Retry(3, backoff=1, factor=1)).submit(runs)
    for _ in range(2):
        clock.settle()
        clock.advance(1)
    assert future.result(TIMEOUT) == "done"
    return runs.seen  # each attempt saw the submitter's value, not the last attempt's


def on_a_series(ex: PriorityExecutor, clock: ManualClock) -> list[str]:
    runs = Runs()
    series = ex.submit_recurring(runs, interval=10)
    for _ in range(2):
        clock.settle()
        clock.advance(10)
    clock.settle()
    series.cancel()
    return runs.seen


def on_a_calendar(ex: PriorityExecutor, clock: ManualClock) -> list[str]:
    runs = Runs()
    series = ex.submit_recurring(runs, interval=EveryMinute())
    for minute in (1, 2, 3):
        clock.advance_to(datetime.datetime(2026, 1, 1, 9, minute, tzinfo=UTC))
        clock.settle()
    series.cancel()
    return runs.seen


def on_a_tasks_own_submit(ex: PriorityExecutor, clock: ManualClock) -> list[str]:
    def outer() -> list[str]:
        # What a task sets is the context of what it submits.
        mine = REQUEST.get() + ", then its task's"
        REQUEST.set(mine)
        inner = ex.submit(seen)
        return [mine, inner.result(TIMEOUT)]

    first, second = ex.submit(outer).result(TIMEOUT)
    assert first == second
    return [first.split(",")[0]]


PATHS: dict[str, Callable[[PriorityExecutor, ManualClock], list[str]]] = {
    "submit": on_submit,
    "map": on_map,
    "map-buffersize": on_map_with_a_buffer,
    "lane-throttled": on_a_lane,
    "delay": on_a_delay,
    "deadline": on_a_deadline,
    "reschedule": on_a_reschedule,
    "lane-delay": on_a_lane_with_a_delay,
    "retry": on_retries,
    "recurring": on_a_series,
    "calendar": on_a_calendar,
    "task-submits": on_a_tasks_own_submit,
}


@pytest.mark.parametrize("path", PATHS.values(), ids=PATHS.keys())
def test_a_task_sees_its_submitters_context_on_every_path(
    path: Callable[[PriorityExecutor, ManualClock], list[str]], request_id: str
) -> None:
    clock = ManualClock(wall=datetime.datetime(2026, 1, 1, 9, 0, 30, tzinfo=UTC))
    with PriorityExecutor(max_workers=2, clock=clock) as ex:
        values = path(ex, clock)
    assert values
    assert set(values) == {request_id}
    assert REQUEST.get() == request_id  # nothing a task set came back to the submitter


def test_a_task_runs_in_the_context_as_it_was_at_submit() -> None:
    clock = ManualClock()

    def submit_then_change() -> Future[str]:
        REQUEST.set("at submit")
        future = ex.submit(seen, delay=1)
        REQUEST.set("changed after submit")
        return future

    with PriorityExecutor(max_workers=1, clock=clock) as ex:
        future = copy_context().run(submit_then_change)
        clock.advance(1)
        assert future.result(TIMEOUT) == "at submit"


def test_what_a_task_sets_reaches_no_other_task_on_the_same_worker(request_id: str) -> None:
    with PriorityExecutor(max_workers=1) as ex:
        values = [ex.submit(seen_then_set).result(TIMEOUT) for _ in range(3)]
    assert values == [request_id] * 3


def test_asyncio_run_in_executor_and_to_thread_see_the_coroutines_context() -> None:
    async def main() -> tuple[str, str, str]:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(PriorityExecutor(max_workers=2))
        REQUEST.set("coroutine")
        # to_thread() runs its call in a copy of its own: inside the task's, no harm done.
        through_to_thread = await asyncio.to_thread(seen_then_set)
        through_run_in_executor = await loop.run_in_executor(None, seen_then_set)
        return through_to_thread, through_run_in_executor, REQUEST.get()

    assert asyncio.run(main()) == ("coroutine", "coroutine", "coroutine")


class ContextCarrier(ThreadPoolExecutor):
    """A backend that carries its submitter's context, as OpenTelemetry's instrumented
    ThreadPoolExecutor does."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        return super().submit(copy_context().run, fn, *args, **kwargs)


def test_a_backend_gets_the_task_in_its_context_if_it_carries_context(request_id: str) -> None:
    with ContextCarrier(2) as backend, PriorityExecutor(2, backend=backend) as ex:
        assert ex.submit(seen_then_set).result(TIMEOUT) == request_id
        runs = Runs(failures=1)
        assert ex.lane(retry=Retry(2, backoff=0)).submit(runs).result(TIMEOUT) == "done"
        assert runs.seen == [request_id, request_id]
    assert REQUEST.get() == request_id


def test_a_process_pool_runs_the_call_in_the_childs_own_context() -> None:
    token = remote.REQUEST.set("in the parent")
    try:
        with PriorityExecutor(1, backend="process") as ex:
            assert ex.submit(remote.request).result(TIMEOUT) == "none"
    finally:
        remote.REQUEST.reset(token)


class Payload:
    """A request-scoped value that a weak reference can watch."""


def submit_with_a_payload(submit: Callable[[], Future[Any]]) -> tuple[Future[Any], Any]:
    """Submit in a context of its own that holds a payload: only the task's copy keeps it."""

    def inside() -> tuple[Future[Any], Any]:
        payload = Payload()
        HELD.set(payload)
        return submit(), weakref.ref(payload)

    return copy_context().run(inside)


HELD: ContextVar[Payload | None] = ContextVar("held", default=None)


@pytest.mark.parametrize("how", ["ran", "cancelled", "series-cancelled"])
def test_a_finished_future_does_not_keep_its_tasks_context(how: str) -> None:
    clock = ManualClock()
    ex = PriorityExecutor(max_workers=1, clock=clock)
    gc.disable()  # only reference counting may free it
    try:
        if how == "ran":
            future, ref = submit_with_a_payload(lambda: ex.submit(seen))
            future.result(TIMEOUT)
        elif how == "cancelled":
            future, ref = submit_with_a_payload(lambda: ex.submit(seen, delay=10))
            assert future.cancel()
        else:
            future, ref = submit_with_a_payload(lambda: ex.submit_recurring(seen, interval=1))
            clock.settle()
            assert future.cancel()
        wait_until(lambda: ref() is None, what="the task's context to be let go of")
        assert future.done()  # the future is still held: it does not hold the context
    finally:
        gc.enable()
        ex.shutdown(wait=True, cancel_futures=True)


# -- inherit_context=False: ThreadPoolExecutor's behaviour ---------------------------------


@pytest.mark.parametrize(
    "make",
    [lambda: ThreadPoolExecutor(1), lambda: PriorityExecutor(1, inherit_context=False)],
    ids=["ThreadPoolExecutor", "inherit_context=False"],
)
def test_switched_off_tasks_run_in_the_worker_threads_context(make: Callable[[], Executor]) -> None:
    def body() -> list[str]:
        with make() as ex:
            ex.submit(int).result(TIMEOUT)  # its worker starts before the value is set
            REQUEST.set("submitter")
            # The worker's context: not the submitter's value; and what a task sets there
            # stays for the next task of that thread.
            return [ex.submit(seen_then_set).result(TIMEOUT), ex.submit(seen).result(TIMEOUT)]

    assert copy_context().run(body) == ["none", "set by a task"]


@pytest.mark.parametrize("value", [1, None, "yes"])
def test_inherit_context_takes_a_bool_only(value: object) -> None:
    with pytest.raises(TypeError, match="inherit_context must be a bool"):
        PriorityExecutor(inherit_context=value)  # type: ignore[arg-type]


# -- OpenTelemetry: the real SDK, with the threading instrumentation on ----------------------


@pytest.fixture
def tracing() -> Iterator[tuple[Any, Any]]:
    """A tracer of the real SDK, spans exported in memory, threads instrumented."""
    sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
    export = pytest.importorskip("opentelemetry.sdk.trace.export")
    in_memory = pytest.importorskip("opentelemetry.sdk.trace.export.in_memory_span_exporter")
    threading_instrumentation = pytest.importorskip("opentelemetry.instrumentation.threading")
    exporter = in_memory.InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(export.SimpleSpanProcessor(exporter))
    instrumentor = threading_instrumentation.ThreadingInstrumentor()
    instrumentor.instrument()
    try:
        yield provider.get_tracer("test_context"), exporter
    finally:
        instrumentor.uninstrument()
        provider.shutdown()


def current_span_name() -> str:
    from opentelemetry import trace

    return trace.get_current_span().name  # type: ignore[attr-defined, no-any-return]


OTEL_PATHS: dict[str, Callable[[Executor, ManualClock, Callable[[], str]], list[str]]] = {
    "submit": lambda ex, clock, fn: [ex.submit(fn).result(TIMEOUT)],
    "map": lambda ex, clock, fn: list(ex.map(lambda _: fn(), range(3), timeout=TIMEOUT)),
    "lane": lambda ex, clock, fn: [
        ex.lane("traced", max_running=1).submit(fn).result(TIMEOUT)  # type: ignore[attr-defined]
    ],
    "delay": lambda ex, clock, fn: on_a_delay_of(ex, clock, fn),
}


def on_a_delay_of(ex: Executor, clock: ManualClock, fn: Callable[[], str]) -> list[str]:
    future = ex.submit(fn, delay=5)  # type: ignore[call-arg]
    clock.advance(5)
    return [future.result(TIMEOUT)]


@pytest.mark.parametrize("path", OTEL_PATHS.values(), ids=OTEL_PATHS.keys())
def test_a_task_submitted_inside_span_b_sees_span_b(
    path: Callable[[Executor, ManualClock, Callable[[], str]], list[str]],
    tracing: tuple[Any, Any],
) -> None:
    tracer, exporter = tracing

    def traced_task() -> str:
        with tracer.start_as_current_span("task"):
            pass
        return current_span_name()

    clock = ManualClock()
    with tracer.start_as_current_span("A"):
        ex = PriorityExecutor(max_workers=1, clock=clock)
        ex.submit(int).result(TIMEOUT)  # its one worker thread starts inside span A
    try:
        with tracer.start_as_current_span("B") as b:
            names = path(ex, clock, traced_task)
    finally:
        ex.shutdown()
    assert set(names) == {"B"}
    tasks = [span for span in exporter.get_finished_spans() if span.name == "task"]
    assert tasks
    assert all(span.parent.span_id == b.get_span_context().span_id for span in tasks)


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        # The worker thread's span: what the issue saw before tasks inherited context.
        (lambda backend: PriorityExecutor(1, inherit_context=False), "A"),
        (lambda backend: backend, "B"),  # its submit() is the instrumented one
        (lambda backend: PriorityExecutor(1, backend=backend), "B"),  # the same, behind
    ],
    ids=["inherit_context=False", "ThreadPoolExecutor", "backend"],
)
def test_which_span_a_task_sees_elsewhere(
    make: Callable[[Executor], Executor], expected: str, tracing: tuple[Any, Any]
) -> None:
    tracer, _exporter = tracing
    with ThreadPoolExecutor(1) as backend:
        with tracer.start_as_current_span("A"):
            ex = make(backend)
            ex.submit(int).result(TIMEOUT)  # worker threads start inside span A
        with ex, tracer.start_as_current_span("B"):
            assert ex.submit(current_span_name).result(TIMEOUT) == expected
