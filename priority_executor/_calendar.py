"""Calendar schedules: series whose runs fall at wall-clock times ("at 02:00 every night").

A schedule is any object with ``next_after(moment) -> datetime | None``; ``Cron`` is one,
a five-field cron expression in a time zone, evaluated by ``cronsim`` (the ``cron``
extra). A calendar series is a recurring task (see ``_recurring``) whose ``Calendar``
recurrence asks its schedule for the next slot. Its runs wait for their wall-clock time
(see ``_clock.WallTime``), so a step of the system clock moves them with it.

The schedule is user code: it is asked only outside the scheduler's lock, for the first
runs in ``submit_recurring()``, then one slot ahead by the worker whose run is over
(``Calendar.look_ahead``), and for the slots missed by the worker that starts a run
(``Calendar.begin``), which knows then which were.
"""

from __future__ import annotations

import datetime
import random
from typing import TYPE_CHECKING, Any, Callable, Protocol, runtime_checkable

from ._arguments import callable_name, seconds
from ._logs import LOGGER, Named, fields, in_lane

if TYPE_CHECKING:
    from collections.abc import Iterator

_UTC = datetime.timezone.utc
# The nicknames of crontab(5), as Vixie cron reads them (but @reboot: a process has no boot).
_NICKNAMES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_EXTRA = "pip install 'priority_executor[cron]'"


@runtime_checkable
class Schedule(Protocol):
    """When the runs of a calendar series fall: ``next_after(moment)`` returns the first
    slot strictly after ``moment`` (an aware datetime in UTC), as an aware datetime, or
    None when there is none (the series then ends, its future's result None).

    A schedule may also have ``jitter``, ``misfire_grace`` and ``coalesce`` attributes,
    read once by ``submit_recurring()``, as ``Cron`` takes them.
    """

    def next_after(self, moment: datetime.datetime, /) -> datetime.datetime | None: ...


class Cron:
    """A cron expression in a time zone: ``Cron("0 2 * * *", tz="Europe/Paris")``.

    ``expression``: five fields (minute, hour, day of month, month, day of week) with
    ``*``, ranges, lists, steps (``*/5``) and the names of days and months, or a nickname
    (``@daily``, ``@hourly``, ...), as Debian's cron reads them (``cronsim`` evaluates
    it). ``tz``: a zone name, a ``tzinfo``, or None for the machine's local time zone.

    Across DST, as Debian's cron: a run set in the hour the clocks skip (02:30 on the
    night 02:00 becomes 03:00) runs when it ends (03:00); a run set in the hour that
    happens twice runs once, the first time. A schedule finer than an hour (``*/15``,
    every minute) follows the clock through both.

    ``jitter`` (seconds or timedelta): each run starts at a random moment within that
    long after its slot, never before. ``misfire_grace``: a run that cannot start within
    that long after its slot (the process was suspended, every worker was busy) is
    skipped and counted (``stats().skipped``); None: it runs however late. ``coalesce``:
    missed slots are caught up by one run (True, the default) or by a run each.
    """

    __slots__ = ("_fields", "_zone", "coalesce", "expression", "jitter", "misfire_grace", "tz")

    def __init__(
        self,
        expression: str,
        tz: str | datetime.tzinfo | None = None,
        *,
        jitter: float | datetime.timedelta | None = None,
        misfire_grace: float | datetime.timedelta | None = None,
        coalesce: bool = True,
    ) -> None:
        if not isinstance(expression, str):
            raise TypeError(f"expression must be a str, not {type(expression).__name__}")
        self.expression = expression
        self._fields = _NICKNAMES.get(expression.strip(), expression)
        # Five, whatever cronsim takes: a sixth (seconds) field is read by some versions
        # only, and would mean another schedule on another Python.
        if len(self._fields.split()) != 5:
            raise ValueError(
                f"bad cron expression {expression!r}: five fields (minute hour day-of-month"
                f" month day-of-week) or one of {', '.join(_NICKNAMES)}"
            )
        self._zone = _zone(tz)
        self.tz = tz
        options = _options(jitter, misfire_grace, coalesce, "")
        self.jitter, self.misfire_grace, self.coalesce = options
        try:
            first = self.next_after(datetime.datetime.now(_UTC))
        except ValueError as exc:  # cronsim's error
            raise ValueError(f"bad cron expression {expression!r}: {exc}") from None
        if first is None:
            raise ValueError(f"cron expression {expression!r} matches no time in 50 years")

    def next_after(self, moment: datetime.datetime, /) -> datetime.datetime | None:
        for slot in _cronsim(self._fields, moment.astimezone(self._zone)):
            return slot
        return None  # none within 50 years (cronsim looks no further)

    @property
    def zone(self) -> datetime.tzinfo:
        """The time zone of its slots."""
        return self._zone

    def __repr__(self) -> str:
        # The zone as given; local time says which zone that is here.
        zone = repr(self.tz) if isinstance(self.tz, str) else repr(str(self._zone))
        if self.tz is None:
            zone = f"None (local time: {self._zone})"
        options = "".join(
            f", {name}={value!r}"
            for name, value, default in (
                ("jitter", self.jitter, 0.0),
                ("misfire_grace", self.misfire_grace, None),
                ("coalesce", self.coalesce, True),
            )
            if value != default
        )
        return f"Cron({self.expression!r}, tz={zone}{options})"


def _cronsim(expression: str, start: datetime.datetime) -> Iterator[datetime.datetime]:
    try:
        from cronsim import CronSim, CronSimError
    except ImportError:
        raise ModuleNotFoundError(
            f"Cron schedules need the cron extra: {_EXTRA}", name="cronsim"
        ) from None
    try:
        return CronSim(expression, start)
    except CronSimError as exc:
        raise ValueError(str(exc)) from None


def _zone(tz: object) -> datetime.tzinfo:
    if isinstance(tz, datetime.tzinfo):
        return tz
    if tz is None:
        try:
            import tzlocal
        except ImportError:
            raise ModuleNotFoundError(
                f"Cron schedules in local time need the cron extra: {_EXTRA}", name="tzlocal"
            ) from None
        return tzlocal.get_localzone()
    if not isinstance(tz, str):
        raise TypeError(f"tz must be a zone name, a tzinfo or None, not {type(tz).__name__}")
    import zoneinfo

    try:
        return zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"tz={tz!r} is no time zone this machine knows (an IANA name such as"
            " 'Europe/Paris'; on Windows, install the cron extra, which brings tzdata)"
        ) from None


def _options(
    jitter: object, misfire_grace: object, coalesce: object, of: str
) -> tuple[float, float | None, bool]:
    """Check a schedule's options; ``of``: how messages name their owner."""
    if not isinstance(coalesce, bool):
        raise TypeError(f"{of}coalesce must be a bool, not {type(coalesce).__name__}")
    return (
        0.0 if jitter is None else seconds(f"{of}jitter", jitter),
        None if misfire_grace is None else seconds(f"{of}misfire_grace", misfire_grace),
        coalesce,
    )


def options_of(schedule: object) -> tuple[float, float | None, bool]:
    """The options of a schedule given to ``submit_recurring()``, checked."""
    return _options(
        getattr(schedule, "jitter", None),
        getattr(schedule, "misfire_grace", None),
        getattr(schedule, "coalesce", True),
        "interval.",
    )


class Calendar:
    """When the runs of a calendar series are due: at its schedule's slots, as wall-clock
    times (``time.time()`` values), each plus its jitter.

    The schedule is asked one slot ahead, once a run is over (``look_ahead``): so a run on
    its way to start asks nothing, unless slots were missed (``begin``). Read and written
    by one thread at a time: the submitter, then the worker that runs the series (one run
    at a time), then the scheduler under its lock (``next_due``).
    """

    __slots__ = (
        "ahead",
        "coalesce",
        "grace",
        "jitter",
        "next_slot",
        "schedule",
        "slot",
        "wall_due",
    )

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        self.jitter, self.grace, self.coalesce = options_of(schedule)
        self.slot = 0.0  # the slot of the run that waits or runs
        self.wall_due = 0.0  # when it is due: its slot plus its jitter
        self.next_slot: float | None = None  # the slot after it: the next run's, if not missed
        self.ahead: float | None = None  # the slot after that (see look_ahead)

    def first(self, after: float) -> float:
        """Plan the first run, at the first slot after ``after``; return when it is due.
        Raises whatever the schedule raised, or ValueError if it has no slot."""
        slot = self._after(after)
        if slot is None:
            raise ValueError(f"the schedule {self.schedule!r} has no run after the first due time")
        self._plan(slot)
        self.next_slot = self._after(slot)
        return self.wall_due

    def begin(self, wall: float) -> bool:
        """A worker is about to start the run due at ``wall_due``, at ``wall``: return
        False if that is later than the misfire grace (the run is skipped). With
        ``coalesce``, this run stands for every slot that has passed by now: the next one
        is the first still to come."""
        while self.coalesce and self.next_slot is not None and self.next_slot <= wall:
            self.slot = self.next_slot
            self.next_slot = self._after(self.slot)
        return self.grace is None or self._late(wall) <= self.grace

    def skipped(self, fn: object, lane: Named | None, wall: float) -> None:
        """The run that ``begin`` refused at ``wall`` is skipped: say so, at WARNING. A
        scheduled job that does not run is what its owner needs to hear of, though the
        executor did as told: the default handler of ``logging`` shows WARNING and above,
        so the line is seen with no logging set up at all."""
        slot = datetime.datetime.fromtimestamp(self.slot, self.zone())
        late = self._late(wall)
        LOGGER.warning(
            "Recurring task %s%s skipped its run of %s: %.3g s late, past its misfire grace"
            " of %.3g s",
            callable_name(fn),
            in_lane(lane),
            slot,
            late,
            self.grace,
            extra=fields(fn, lane, slot=slot.isoformat(), late=late, grace=self.grace),
        )

    def _late(self, wall: float) -> float:
        """How late the run due at ``wall_due`` is, starting at ``wall``: after its slot
        and its jitter."""
        return wall - max(self.slot, self.wall_due)

    def look_ahead(self) -> None:
        """A run is over (made or skipped): ask the schedule for the slot after the next
        run's, here, outside the lock, rather than on the next run's way to start."""
        self.ahead = None if self.next_slot is None else self._after(self.next_slot)

    def next_due(self, now: float, place: Callable[[float], float]) -> float | None:
        """When the next run is due, on the executor's clock (``place`` puts a wall-clock
        time there); None when the schedule has no more."""
        if self.next_slot is None:
            return None
        self._plan(self.next_slot)
        self.next_slot = self.ahead
        return place(self.wall_due)

    def _plan(self, slot: float) -> None:
        self.slot = slot
        self.wall_due = slot + random.uniform(0.0, self.jitter) if self.jitter else slot

    def _after(self, wall: float) -> float | None:
        moment = datetime.datetime.fromtimestamp(wall, _UTC)
        slot: Any = self.schedule.next_after(moment)
        if slot is None:
            return None
        if not isinstance(slot, datetime.datetime) or slot.utcoffset() is None:
            raise TypeError(
                f"{self.schedule!r}.next_after() must return an aware datetime or None,"
                f" not {slot!r}"
            )
        if slot <= moment:
            raise ValueError(
                f"{self.schedule!r}.next_after({moment}) returned {slot}, which is not after it"
            )
        return slot.timestamp()

    def zone(self) -> datetime.tzinfo:
        """Where its times are shown: its schedule's zone, if it has one."""
        zone = getattr(self.schedule, "zone", None)
        return zone if isinstance(zone, datetime.tzinfo) else _UTC

    def __repr__(self) -> str:
        return f"<Calendar {self.schedule!r}>"
