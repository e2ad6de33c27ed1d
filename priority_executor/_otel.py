"""OpenTelemetry metrics and spans of an executor, the ``otel`` extra: subscribers (see
``_events``) that record its events as counters and histograms, or as a span per run, in
the dispatcher thread, off the tasks' path; and an observable counter that reads
``stats()`` when a reader collects.

Names follow OpenTelemetry's conventions: dotted, lower case, a namespace of the package's
own (no convention names delayed or throttled work yet), durations in seconds as
histograms named ``*.duration``, counts of things in braces (``{task}``). A task's lane is
the ``lane`` attribute (absent for a task without one, or in a lane without a name); past
``max_lanes`` names, the others are ``"other"``: a series per lane name must not grow
without bound.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ._arguments import check_int
from ._events import (
    Due,
    Event,
    Expired,
    Finished,
    Rejected,
    RetryScheduled,
    Skipped,
    Started,
    Submitted,
    Subscription,
    TaskEvent,
    Throttled,
    TimedOut,
)
from ._executor import PriorityExecutor

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, Meter, MeterProvider, Observation
    from opentelemetry.trace import Span, SpanContext, Tracer, TracerProvider


_EXTRA = "pip install 'priority_executor[otel]'"
STATES = ("scheduled", "ready", "throttled", "running")


def record_metrics(
    executor: PriorityExecutor,
    *,
    meter_provider: MeterProvider | None = None,
    max_lanes: int = 20,
) -> Subscription:
    """Record ``executor``'s metrics with OpenTelemetry (``meter_provider``, default the
    global one), for the tasks submitted from now on, until the returned subscription is
    closed. ``max_lanes``: how many lane names get a series of their own."""
    _check_executor(executor)
    try:
        from opentelemetry import metrics
    except ImportError:
        raise ModuleNotFoundError(
            f"OpenTelemetry metrics need the otel extra: {_EXTRA}", name="opentelemetry"
        ) from None
    if check_int("max_lanes", max_lanes) < 0:
        raise ValueError(f"max_lanes must be at least 0, got {max_lanes}")
    provider = metrics.get_meter_provider() if meter_provider is None else meter_provider
    from . import __version__

    meter = provider.get_meter("priority_executor", __version__)
    recorder = _Recorder(meter, max_lanes)
    executor_ref = weakref.ref(executor)

    def observe(options: CallbackOptions) -> Iterator[Observation]:
        target = executor_ref()
        if target is not None:
            yield from _states(target.stats(), {}, metrics.Observation)
            lanes = target.lanes()
            for name in sorted(lanes)[:max_lanes]:
                yield from _states(lanes[name].stats(), {"lane": name}, metrics.Observation)

    meter.create_observable_up_down_counter(
        "priority_executor.tasks",
        callbacks=[observe],
        unit="{task}",
        description="Tasks not ended, by state (scheduled, ready, throttled, running);"
        " with a lane attribute, those of that lane",
    )
    return executor.subscribe(recorder)


def record_spans(
    executor: PriorityExecutor, *, tracer_provider: TracerProvider | None = None
) -> Subscription:
    """Record a span for each run of ``executor``'s tasks (an attempt of a retry, a run of
    a series) with OpenTelemetry (``tracer_provider``, default the global one), for the
    tasks submitted from now on, until the returned subscription is closed.

    A span starts as its run starts and ends as it ends, named after the task's callable,
    of kind ``INTERNAL``; its parent is the span that was current where the task was
    submitted (a series': where it was started), if any: so a trace shows the time a task
    waited as the gap between its submitter's span and its own. Its attributes:
    ``priority_executor.task.id``, ``priority_executor.priority``,
    ``priority_executor.attempt``, and ``priority_executor.lane`` for a task in a named lane.
    A run that failed (or timed out, or was cancelled while it ran) has the status
    ``ERROR``; a time limit reached is a span event ``"timed out"``."""
    _check_executor(executor)
    try:
        from opentelemetry import trace
    except ImportError:
        raise ModuleNotFoundError(
            f"OpenTelemetry spans need the otel extra: {_EXTRA}", name="opentelemetry"
        ) from None
    provider = trace.get_tracer_provider() if tracer_provider is None else tracer_provider
    from . import __version__

    return executor.subscribe(_Spans(provider.get_tracer("priority_executor", __version__)))


def _check_executor(executor: object) -> None:
    if not isinstance(executor, PriorityExecutor):
        raise TypeError(f"executor must be a PriorityExecutor, not {type(executor).__name__}")


class _Spans:
    """The subscriber of ``record_spans()``: holds, for each task in flight, its name and
    the span context it was submitted in, and its span while a run of it lasts; no more."""

    def __init__(self, tracer: Tracer) -> None:
        from opentelemetry import trace

        self._trace = trace
        self._tracer = tracer
        # Each task's name and submitter's span, and whether it is a series.
        self._tasks: dict[int, tuple[str, SpanContext | None, bool]] = {}
        self._running: dict[int, Span] = {}

    def __call__(self, event: Event) -> None:
        if not isinstance(event, TaskEvent):
            return
        task = event.task
        if isinstance(event, Submitted):
            parent = None
            if event.context is not None:
                span = event.context.run(self._trace.get_current_span)
                if span.get_span_context().is_valid:
                    parent = span.get_span_context()
            self._tasks[task] = (event.name, parent, event.recurring)
        elif isinstance(event, Started):
            known = self._tasks.get(task)
            if known is None:
                return  # submitted before this subscriber
            name, parent, _ = known
            attributes: dict[str, str | int] = {
                "priority_executor.task.id": task,
                "priority_executor.priority": event.priority,
                "priority_executor.attempt": event.attempt,
            }
            if event.lane is not None:
                attributes["priority_executor.lane"] = event.lane
            trace = self._trace
            context = (
                None
                if parent is None
                else trace.set_span_in_context(trace.NonRecordingSpan(parent))
            )
            self._running[task] = self._tracer.start_span(
                name,
                context=context,
                kind=trace.SpanKind.INTERNAL,
                attributes=attributes,
                start_time=_nanoseconds(event.wall),
            )
        elif isinstance(event, TimedOut):
            running = self._running.get(task)
            if running is not None:
                running.add_event(
                    "timed out",
                    {"priority_executor.time_limit": event.limit},
                    _nanoseconds(event.wall),
                )
        elif isinstance(event, RetryScheduled):
            self._end(event, event.error or "failed")
        elif isinstance(event, (Finished, Expired, Skipped, Rejected)):
            outcome = event.outcome if isinstance(event, Finished) else None
            self._end(event, None if outcome == "completed" else outcome)
            known = self._tasks.get(task)
            if known is not None and (not known[2] or outcome == "cancelled"):
                # A series' next run follows one that completed, failed or was skipped:
                # its entry is held until the series is cancelled (or the subscription
                # closed), one per series.
                del self._tasks[task]

    def _end(self, event: TaskEvent, error: str | None) -> None:
        span = self._running.pop(event.task, None)
        if span is None:
            return
        if error is not None:
            trace = self._trace
            span.set_status(trace.Status(trace.StatusCode.ERROR, error))
        span.end(_nanoseconds(event.wall))


def _nanoseconds(wall: float) -> int:
    return int(wall * 1e9)


def _states(stats: Any, lane: dict[str, str], make: Any) -> Iterable[Observation]:
    for state in STATES:
        yield make(getattr(stats, state), {"state": state, **lane})


class _Recorder:
    """The subscriber: counts and durations from events, with the lane as an attribute.
    Holds each task's due and start time until it starts and ends: no more than the
    tasks in flight."""

    def __init__(self, meter: Meter, max_lanes: int) -> None:
        self._max_lanes = max_lanes
        self._lanes: set[str] = set()
        self._due: dict[int, float] = {}
        self._started: dict[int, float] = {}
        self.finished = meter.create_counter(
            "priority_executor.tasks.finished",
            unit="{task}",
            description="Tasks (runs of a series) ended, by outcome: completed, failed,"
            " cancelled, expired, skipped",
        )
        self.rejected = meter.create_counter(
            "priority_executor.tasks.rejected",
            unit="{task}",
            description="Submits refused for want of room (max_waiting)",
        )
        self.throttled = meter.create_counter(
            "priority_executor.tasks.throttled",
            unit="{task}",
            description="Times a due task was held back by a lane's limit, by limit",
        )
        self.retries = meter.create_counter(
            "priority_executor.tasks.retries",
            unit="{task}",
            description="Retries scheduled",
        )
        self.wait = meter.create_histogram(
            "priority_executor.task.wait.duration",
            unit="s",
            description="From due to start: time waiting for a worker or a lane's room",
        )
        self.run = meter.create_histogram(
            "priority_executor.task.run.duration",
            unit="s",
            description="From start to end of a run (or of an attempt)",
        )

    def _attributes(self, event: Event) -> dict[str, str]:
        lane = event.lane
        if lane is None:
            return {}
        if lane not in self._lanes:
            if len(self._lanes) >= self._max_lanes:
                return {"lane": "other"}
            self._lanes.add(lane)
        return {"lane": lane}

    def __call__(self, event: Event) -> None:
        if not isinstance(event, TaskEvent):
            return
        task = event.task
        if isinstance(event, Due):
            self._due[task] = event.at
        elif isinstance(event, Started):
            self._started[task] = event.at
            due = self._due.pop(task, None)
            if due is not None:
                self.wait.record(event.at - due, self._attributes(event))
        elif isinstance(event, Throttled):
            attributes = self._attributes(event)
            if event.limit is not None:
                attributes["limit"] = event.limit
            self.throttled.add(1, attributes)
        elif isinstance(event, RetryScheduled):
            self._ran(event)
            self.retries.add(1, self._attributes(event))
        elif isinstance(event, Rejected):
            self.rejected.add(1, self._attributes(event))
        elif isinstance(event, (Finished, Expired, Skipped)):
            self._ran(event)
            self._due.pop(task, None)
            outcome = (
                event.outcome
                if isinstance(event, Finished)
                else "expired"
                if isinstance(event, Expired)
                else "skipped"
            )
            self.finished.add(1, {"outcome": outcome, **self._attributes(event)})

    def _ran(self, event: TaskEvent) -> None:
        started = self._started.pop(event.task, None)
        if started is not None:
            self.run.record(event.at - started, self._attributes(event))
