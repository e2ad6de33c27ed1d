"""Lanes: limits per kind of work, on the executor's workers: the ``Lane`` a user holds, and
the checks of its options. What a lane allows is ``_limits``; who gets its room, and when,
is ``_lane_engine``.

A named lane made with options is kept by its executor until the lane's shutdown, so that
its limits hold whoever looks it up later; one made without options has nothing to lose,
and is found by name only while anything references it (see ``PriorityExecutor.lane``).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from concurrent.futures import Future
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Callable, cast

from ._arguments import check_int, check_priority, seconds
from ._gate import make_gate
from ._lane_control import close, configure, join, stats
from ._lane_engine import LaneState
from ._limits import Limits, Rate, Smooth
from ._retry import check_retry
from ._runtime import check_time_limit
from ._stats import ExecutorStats
from ._submitting import Executor
from ._waiting import WaitingTask

if TYPE_CHECKING:
    from ._calendar import Schedule
    from ._options import Options
    from ._retry import Retry
    from ._scheduler import Scheduler


def make_lane_state(
    name: str | None,
    priority: int | None,
    max_running: int | None,
    max_starts: int | None,
    per: float | timedelta | None,
    cooldown: float | timedelta | None,
    retry: Retry | None,
    survive_failures: bool,
    max_waiting: int | None,
    waiting_timeout: float | timedelta | None,
    rates: Rates | None = None,
    weight: float | None = None,
    parent: LaneState | None = None,
    time_limit: float | timedelta | None = None,
) -> LaneState:
    """The options of ``executor.lane()``, checked (``parent`` by the executor)."""
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str or None, not {type(name).__name__}")
    if priority is not None:
        check_priority(priority)
    check_max_running(max_running)
    windows = check_rates(max_starts, per, rates)
    check_retry(retry)
    pause = None if cooldown is None else seconds("cooldown", cooldown)
    if not isinstance(survive_failures, bool):
        raise TypeError(f"survive_failures must be a bool, not {type(survive_failures).__name__}")
    gate = make_gate(max_waiting, waiting_timeout)
    limit = check_time_limit(time_limit)
    state = LaneState(
        name,
        priority or 0,
        Limits(max_running, windows, pause),
        retry,
        survive_failures,
        gate,
        check_weight(weight),
        parent,
    )
    state.time_limit = limit
    return state


Rates = Sequence["tuple[int, float | timedelta] | Smooth"]  # as lane() takes them


def check_max_running(max_running: object) -> None:
    if max_running is not None and check_int("max_running", max_running) < 1:
        raise ValueError(f"max_running must be at least 1, not {max_running}")


def check_rates(max_starts: object, per: object, rates: object) -> tuple[Rate, ...]:
    """A lane's rates, as ``(max_starts, per)`` windows or ``Smooth`` rates: ``max_starts``
    per ``per`` seconds (default 1) is one window; ``rates`` any number. Not both."""
    if max_starts is not None and check_int("max_starts", max_starts) < 1:
        raise ValueError(f"max_starts must be at least 1, not {max_starts}")
    window = 1.0 if per is None else seconds("per", per, positive=True)
    if rates is not None and (max_starts is not None or per is not None):
        raise ValueError("give a lane's rates as max_starts and per, or as rates: not both")
    if max_starts is not None:
        return ((cast(int, max_starts), window),)  # an int: checked
    if per is not None:
        # Alone, a window limits nothing: the caller surely meant a rate.
        raise ValueError(f"per={per!r} is the window of max_starts: give max_starts too")
    if rates is None:
        return ()
    if not isinstance(rates, (list, tuple)):
        raise TypeError(
            f"rates must be a list of (max_starts, per) pairs or Smooth rates, not {rates!r}"
        )
    checked: list[Rate] = []
    for rate in cast("Sequence[object]", rates):
        if isinstance(rate, Smooth):
            checked.append(rate)  # checked as made
            continue
        if not isinstance(rate, (list, tuple)) or len(cast("Sequence[object]", rate)) != 2:
            raise TypeError(
                f"rates must be a list of (max_starts, per) pairs or Smooth rates, not {rates!r}"
            )
        limit, span = cast("tuple[object, object]", rate)
        if check_int("rates", limit) < 1:
            raise ValueError(f"rates: each max_starts must be at least 1, not {limit}")
        checked.append((cast(int, limit), seconds("rates: each per", span, positive=True)))
    return tuple(checked)


def check_weight(weight: object) -> float | None:
    if weight is None:
        return None
    if isinstance(weight, bool) or not isinstance(weight, (int, float)):
        raise TypeError(f"weight must be a number or None, not {type(weight).__name__}")
    if not (math.isfinite(weight) and weight > 0):
        raise ValueError(f"weight must be finite and > 0, not {weight!r}")
    return float(weight)


# What configure() leaves as it was.
class _Keep:
    def __repr__(self) -> str:
        return "KEEP"


KEEP: Any = _Keep()


def parent_state(core: Scheduler, parent: object, argument: str = "parent") -> LaneState | None:
    """The lane ``parent`` as ``lane(parent=...)`` takes it (or another call's ``argument``):
    None, or a lane of the executor of ``core`` that is not shut down."""
    if parent is None:
        return None
    if not isinstance(parent, Lane) or parent._scheduler is not core:
        raise TypeError(f"{argument} must be a lane of this executor or None, not {parent!r}")
    if parent.closed:
        raise ValueError(f"{argument} {parent!r} is shut down")
    return parent._state


class Lane(Executor):
    """A kind of work with limits of its own, on the workers of a ``PriorityExecutor``.

    ``submit``, ``submit_recurring`` and ``map`` work as the executor's; a task's own
    ``priority`` wins over the lane's. ``shutdown()`` closes the lane only.
    """

    def __init__(
        self,
        state: LaneState,
        scheduler: Scheduler,
        schedule: Callable[..., Future[Any]],
        schedule_recurring: Callable[..., Future[None]],
        forget: Callable[[LaneState], object],
        waiting: Callable[[LaneState], list[WaitingTask]],
        keep: Callable[[LaneState], object],
        parent: Lane | None,
        check_limit: Callable[[], object],
    ) -> None:
        self._state = state
        self._scheduler = scheduler
        self._schedule_in = schedule
        self._schedule_recurring_in = schedule_recurring
        self._forget = forget  # the executor's: a closed lane frees its name
        self._keep = keep  # the executor's: a named lane given limits keeps them
        self._waiting = waiting
        self._parent = parent
        self._check_limit = check_limit  # the executor's: refuses a limit it cannot enforce
        state.facade = weakref.ref(self)

    @property
    def name(self) -> str | None:
        return self._state.name

    @property
    def priority(self) -> int:
        """The default priority of its tasks."""
        return self._state.priority

    @property
    def max_running(self) -> int | None:
        return self._state.max_running

    @property
    def max_starts(self) -> int | None:
        """Of its first rate (see ``rates``)."""
        rates = self._state.rates
        if not rates:
            return None
        first = rates[0]
        return first[0] if isinstance(first, tuple) else first.limit

    @property
    def per(self) -> float:
        """The window of ``max_starts``, in seconds."""
        rates = self._state.rates
        if not rates:
            return 1.0
        first = rates[0]
        return first[1] if isinstance(first, tuple) else first.per

    @property
    def rates(self) -> tuple[tuple[int, float] | Smooth, ...]:
        """Its rates: ``(max_starts, per)`` pairs, each a sliding window, and ``Smooth``
        rates; every one holds."""
        return self._state.rates

    @property
    def weight(self) -> float | None:
        """Its share of the workers among the backlogged lanes; None: 1, as any lane's."""
        return self._state.weight

    @property
    def parent(self) -> Lane | None:
        """The lane it sits in, whose limits hold its tasks too."""
        return self._parent

    @property
    def cooldown(self) -> float | None:
        """In seconds, or None."""
        return self._state.cooldown

    @property
    def retry(self) -> Retry | None:
        """Its own retry policy, in place of the executor's; None: the executor's."""
        return self._state.retry

    @property
    def survive_failures(self) -> bool:
        """Whether its recurring series go on after a failed run."""
        return self._state.survive_failures

    @property
    def time_limit(self) -> float | None:
        """In seconds: how long each run of its tasks may take, in place of the
        executor's (a call's own wins); None: the executor's."""
        return self._state.time_limit

    @property
    def max_waiting(self) -> int | None:
        """At most this many of its tasks wait to start; a submit past it waits for room."""
        gate = self._state.gate
        return None if gate is None else gate.limit

    @property
    def waiting_timeout(self) -> float | None:
        """In seconds: how long a submit waits for room under ``max_waiting`` before it
        raises ``QueueFull`` (0: not at all); None: until there is room."""
        gate = self._state.gate
        return None if gate is None else gate.timeout

    @property
    def closed(self) -> bool:
        """Whether ``shutdown()`` closed it."""
        return self._state.closed

    def _schedule(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        priority: int | None,
        delay: float | timedelta | None,
        run_at: datetime | None,
        expires: float | timedelta | datetime | None,
        options: Options | None = None,
    ) -> Future[Any]:
        return self._schedule_in(
            fn, args, kwargs, priority, delay, run_at, expires, options, self._state
        )

    def _schedule_recurring(
        self,
        fn: Callable[..., object],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        interval: float | timedelta | Schedule,
        fixed_rate: bool,
        priority: int | None,
        delay: float | timedelta | None,
        run_at: datetime | None,
        options: Options | None = None,
    ) -> Future[None]:
        return self._schedule_recurring_in(
            fn, args, kwargs, interval, fixed_rate, priority, delay, run_at, options, self._state
        )

    def configure(
        self,
        *,
        max_running: int | None = KEEP,
        max_starts: int | None = KEEP,
        per: float | timedelta | None = KEEP,
        rates: Rates | None = KEEP,
        cooldown: float | timedelta | None = KEEP,
        weight: float | None = KEEP,
        time_limit: float | timedelta | None = KEEP,
    ) -> None:
        """Change the lane's limits or weight now; what is not given stays, None removes a
        limit (a weight of None is 1). Checked as ``lane()`` checks them: a bad one raises
        and changes nothing. A limit raised lets start at once what it now allows; one
        lowered stops new starts and cancels no running task. ``max_starts`` (with ``per``,
        default 1) sets one rate in place of all, ``rates`` every rate; ``max_starts=None``
        or ``rates=None`` removes them. ``time_limit`` holds for the tasks submitted after
        it (None: the enclosing lane's or the executor's); a task submitted before keeps
        the limit it was given, running or not."""
        changes: dict[str, Any] = {}
        if max_running is not KEEP:
            check_max_running(max_running)
            changes["max_running"] = max_running
        if max_starts is not KEEP or per is not KEEP or rates is not KEEP:
            changes["rates"] = check_rates(
                None if max_starts is KEEP else max_starts,
                None if per is KEEP else per,
                None if rates is KEEP else rates,
            )
        if cooldown is not KEEP:
            changes["cooldown"] = None if cooldown is None else seconds("cooldown", cooldown)
        if weight is not KEEP:
            changes["weight"] = check_weight(weight)
        if time_limit is not KEEP:
            changes["time_limit"] = limit = check_time_limit(time_limit)
            if limit is not None:
                self._check_limit()
        configure(self._state, self._scheduler, changes)
        self._keep(self._state)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Close this lane: its later submits raise ``RuntimeError``; its series are
        cancelled; with ``cancel_futures``, its tasks not yet started too. With ``wait``,
        return when its remaining tasks have finished (unless called from a task or a
        callback of the executor). Other lanes and the executor go on."""
        close(self._state, self._scheduler, cancel_futures)
        self._forget(self._state)
        if wait:
            join(self._state, self._scheduler)

    def stats(self) -> ExecutorStats:
        """A consistent snapshot of how many of this lane's tasks are in each state."""
        return stats(self._state, self._scheduler)

    def waiting(self) -> list[WaitingTask]:
        """``PriorityExecutor.waiting()`` for this lane's tasks."""
        return self._waiting(self._state)

    def __repr__(self) -> str:
        state = self._state
        options = state.settings()
        rates = state.rates
        del options["rates"], options["parent"]
        window = len(rates) == 1 and isinstance(rates[0], tuple)  # as max_starts and per
        if rates and not window:
            del options["max_starts"]
            options["rates"] = rates
        limits = "".join(
            f" {option}={value!r}"
            for option, value in options.items()
            if value is not None and value is not False and option not in ("priority", "per")
        )
        if state.priority:
            limits += f" priority={state.priority!r}"
        if window:
            limits += f" per={options['per']!r}"
        if state.parent is not None:
            limits += f" parent={state.parent.name!r}"
        return f"<Lane {state.name!r}{limits}>"
