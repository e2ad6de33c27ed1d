"""Calendar schedules: cron expressions in a time zone, runs at wall-clock times across DST
and clock steps, missed runs, jitter. On the test clock, whose wall time a test sets and
steps; one real-clock test."""

from __future__ import annotations

import datetime
import statistics
import sys
import threading
import time
from concurrent.futures import CancelledError
from zoneinfo import ZoneInfo

import pytest
from helpers import wait_until

from priority_executor import Cron, PriorityExecutor
from priority_executor.testing import ManualClock

UTC = datetime.timezone.utc
PARIS = ZoneInfo("Europe/Paris")
NEW_YORK = ZoneInfo("America/New_York")


def utc(*fields: int) -> datetime.datetime:
    return datetime.datetime(*fields, tzinfo=UTC)  # type: ignore[misc]


class Runs:
    """A job that notes the wall time of each of its runs, in ``zone``."""

    def __init__(self, clock: ManualClock, zone: datetime.tzinfo = UTC) -> None:
        self.clock = clock
        self.zone = zone
        self.times: list[datetime.datetime] = []

    def __call__(self) -> None:
        self.times.append(datetime.datetime.fromtimestamp(self.clock.wall(), self.zone))

    def shown(self) -> list[str]:
        return [f"{t:%m-%d %H:%M %Z}" for t in self.times]


# -- cron expressions --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        ("*/5 * * * *", utc(2026, 1, 1, 9, 2), [utc(2026, 1, 1, 9, 5), utc(2026, 1, 1, 9, 10)]),
        ("0 9 * * MON-FRI", utc(2026, 1, 2, 10), [utc(2026, 1, 5, 9), utc(2026, 1, 6, 9)]),
        ("15,45 8-9 * * *", utc(2026, 1, 1), [utc(2026, 1, 1, 8, 15), utc(2026, 1, 1, 8, 45)]),
        ("0 0 1 JAN,JUL *", utc(2026, 2, 1), [utc(2026, 7, 1), utc(2027, 1, 1)]),
        ("0 0 29 2 *", utc(2026, 1, 1), [utc(2028, 2, 29), utc(2032, 2, 29)]),
        ("0 12 31 * *", utc(2026, 4, 1), [utc(2026, 5, 31, 12), utc(2026, 7, 31, 12)]),
        # Both a day of month and a day of week: either matches, as cron reads it.
        ("0 0 13 * FRI", utc(2026, 2, 1), [utc(2026, 2, 6), utc(2026, 2, 13)]),
    ],
)
def test_a_cron_expression_gives_the_slots_cron_would(
    expression: str, after: datetime.datetime, expected: list[datetime.datetime]
) -> None:
    cron = Cron(expression, tz="UTC")
    slots = []
    moment = after
    for _ in expected:
        slot = cron.next_after(moment)
        assert slot is not None
        slots.append(slot)
        moment = slot
    assert slots == expected


def test_crons_nicknames_are_its_five_fields() -> None:
    daily = Cron("@daily", tz="UTC")
    assert daily.next_after(utc(2026, 1, 1, 12)) == utc(2026, 1, 2)
    assert repr(daily) == "Cron('@daily', tz='UTC')"
    assert Cron("@hourly", tz="UTC").next_after(utc(2026, 1, 1, 12, 5)) == utc(2026, 1, 1, 13)


def test_a_slot_is_strictly_after_the_moment_asked() -> None:
    cron = Cron("0 2 * * *", tz="UTC")
    assert cron.next_after(utc(2026, 1, 1, 2)) == utc(2026, 1, 2, 2)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "words"),
    [
        (("61 * * * *",), {}, ValueError, "bad cron expression '61 * * * *': Bad minute"),
        (("* * *",), {}, ValueError, "five fields"),
        (("0 0 2 * * *",), {}, ValueError, "five fields"),  # no seconds field
        (("@reboot",), {}, ValueError, "or one of @yearly"),
        (("* * */20 * 1L",), {}, ValueError, "matches no time in 50 years"),
        ((5,), {}, TypeError, "expression must be a str"),
        (("* * * * *",), {"tz": "Mars/Olympus"}, ValueError, "tz='Mars/Olympus'"),
        (("* * * * *",), {"tz": 2}, TypeError, "tz must be a zone name"),
        (("* * * * *",), {"jitter": -1}, ValueError, "jitter must be finite and >= 0"),
        (("* * * * *",), {"misfire_grace": "1m"}, TypeError, "misfire_grace must be"),
        (("* * * * *",), {"coalesce": 1}, TypeError, "coalesce must be a bool"),
    ],
)
def test_a_bad_schedule_is_refused_where_it_is_made(
    args: tuple[object, ...], kwargs: dict[str, object], error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words.replace("*", r"\*").replace("(", r"\(")):
        Cron(*args, **kwargs)  # type: ignore[arg-type]


def test_repr_shows_the_expression_the_zone_and_the_options() -> None:
    assert repr(Cron("0 2 * * *", tz="Europe/Paris")) == "Cron('0 2 * * *', tz='Europe/Paris')"
    assert (
        repr(Cron("*/5 * * * *", tz=UTC, jitter=30, coalesce=False))
        == "Cron('*/5 * * * *', tz='UTC', jitter=30.0, coalesce=False)"
    )
    assert repr(Cron("0 2 * * *")).startswith("Cron('0 2 * * *', tz=None (local time: ")


def test_without_the_cron_extra_the_error_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cronsim", None)
    with pytest.raises(ModuleNotFoundError, match=r"priority_executor\[cron\]"):
        Cron("0 2 * * *", tz="UTC")


def test_submit_recurring_says_how_to_pass_a_cron_expression() -> None:
    with PriorityExecutor(max_workers=1, clock=ManualClock()) as executor:
        with pytest.raises(TypeError, match=r"pass Cron\('0 2 \* \* \*'\)"):
            executor.submit_recurring(print, interval="0 2 * * *")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="not the class Cron itself"):
            executor.submit_recurring(print, interval=Cron)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="fixed_rate applies to an interval"):
            executor.submit_recurring(print, interval=Cron("0 2 * * *", tz=UTC), fixed_rate=True)
        assert executor.stats().scheduled == 0


# -- at 02:00 every night --------------------------------------------------------------------


def test_a_nightly_run_starts_at_its_wall_time_never_early() -> None:
    clock = ManualClock(wall=datetime.datetime(2026, 6, 1, 12, tzinfo=PARIS))
    runs = Runs(clock, PARIS)
    with PriorityExecutor(max_workers=2, clock=clock) as executor:
        series = executor.submit_recurring(runs, interval=Cron("0 2 * * *", tz="Europe/Paris"))
        (waiting,) = executor.waiting()
        assert waiting.runs_at == datetime.datetime(2026, 6, 2, 2, tzinfo=PARIS)
        assert waiting.runs_at.tzinfo == PARIS
        clock.advance_to(datetime.datetime(2026, 6, 2, 1, 59, 59, 999000, tzinfo=PARIS))
        clock.settle()
        assert runs.times == []
        clock.advance(0.001)
        clock.settle()
        for _ in range(3):
            clock.advance(datetime.timedelta(days=1))
            clock.settle()
        assert runs.shown() == [f"06-0{day} 02:00 CEST" for day in (2, 3, 4, 5)]
        series.cancel()


# -- DST -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("zone", "start", "expression", "expected"),
    [
        # Paris, 29 March 2026: 02:00 CET becomes 03:00 CEST. A 02:30 run that night runs
        # as the skipped hour ends, once; the next night at 02:30 again.
        (
            PARIS,
            utc(2026, 3, 28, 12),
            "30 2 * * *",
            ["03-29 03:00 CEST", "03-30 02:30 CEST", "03-31 02:30 CEST"],
        ),
        # New York, 8 March 2026: 02:00 EST becomes 03:00 EDT.
        (
            NEW_YORK,
            utc(2026, 3, 7, 12),
            "30 2 * * *",
            ["03-08 03:00 EDT", "03-09 02:30 EDT", "03-10 02:30 EDT"],
        ),
        # Paris, 25 October 2026: 03:00 CEST becomes 02:00 CET, so 02:30 happens twice:
        # the run is made once, the first time.
        (
            PARIS,
            utc(2026, 10, 24, 12),
            "30 2 * * *",
            ["10-25 02:30 CEST", "10-26 02:30 CET", "10-27 02:30 CET"],
        ),
        # New York, 1 November 2026: 01:30 happens twice.
        (
            NEW_YORK,
            utc(2026, 10, 31, 12),
            "30 1 * * *",
            ["11-01 01:30 EDT", "11-02 01:30 EST", "11-03 01:30 EST"],
        ),
    ],
)
def test_a_daily_run_across_dst_runs_once_a_night_never_early(
    zone: ZoneInfo, start: datetime.datetime, expression: str, expected: list[str]
) -> None:
    clock = ManualClock(wall=start)
    runs = Runs(clock, zone)
    with PriorityExecutor(max_workers=1, clock=clock) as executor:
        series = executor.submit_recurring(runs, interval=Cron(expression, tz=zone))
        # Minute by minute over three nights: a run early by a minute, or made twice,
        # shows.
        for _ in range(3 * 24 * 60):
            clock.advance(60)
            clock.settle()
        assert runs.shown() == expected
        series.cancel()


@pytest.mark.parametrize(
    ("zone", "start", "expected"),
    [
        # The hour the clocks skip has no half past: 01:30 CET, then 03:00 CEST on.
        (PARIS, utc(2026, 3, 29, 0, 10), ["01:30 CET", "03:00 CEST", "03:30 CEST"]),
        # The hour that happens twice has its half hours twice.
        (
            NEW_YORK,
            utc(2026, 11, 1, 5, 10),
            ["01:30 EDT", "01:00 EST", "01:30 EST", "02:00 EST"],
        ),
    ],
)
def test_a_run_every_half_hour_follows_the_clock_through_dst(
    zone: ZoneInfo, start: datetime.datetime, expected: list[str]
) -> None:
    clock = ManualClock(wall=start)
    runs = Runs(clock, zone)
    with PriorityExecutor(max_workers=1, clock=clock) as executor:
        series = executor.submit_recurring(runs, interval=Cron("*/30 * * * *", tz=zone))
        for _ in range(len(expected) * 30):
            clock.advance(60)
            clock.settle()
        assert [f"{t:%H:%M %Z}" for t in runs.times] == expected
        series.cancel()


# -- the system clock stepped --------------------------------------------------------------


def test_a_step_of_the_wall_clock_forward_makes_a_run_due_at_once() -> None:
    clock = ManualClock(wall=utc(2026, 1, 1, 1))
    runs = Runs(clock)
    with PriorityExecutor(max_workers=1, clock=clock) as executor:
        series = executor.submit_recurring(runs, interval=Cron("0 2 * * *", tz=UTC))
        clock.step_wall(datetime.timedelta(minutes=59, seconds=59))
        clock.settle()
        assert runs.times == []
        clock.step_wall(1)  # NTP: the wall clock shows 02:00 while no time passed
        clock.settle()
        assert runs.shown() == ["01-01 02:00 UTC"]
        series.cancel()


def test_a_step_of_the_wall_clock_back_neither_starts_a_run_early_nor_makes_it_twice() -> None:
    clock = ManualClock(wall=utc(2026, 1, 1, 1, 30))
    runs = Runs(clock)
    with PriorityExecutor(max_workers=1, clock=clock) as executor:
        series = executor.submit_recurring(runs, interval=Cron("0 2 * * *", tz=UTC))
        clock.step_wall(-3600)  # 00:30 again: the 02:00 run is 90 minutes away now
        clock.advance(datetime.timedelta(minutes=89))
        clock.settle()
        assert runs.times == []
        clock.advance(60)
        clock.settle()
        assert runs.shown() == ["01-01 02:00 UTC"]
        clock.step_wall(-1800)  # 01:30 again, after the 02:00 run: it is not made again
        clock.advance(datetime.timedelta(hours=2))
        clock.settle()
        assert runs.shown() == ["01-01 02:00 UTC"]
        assert executor.waiting()[0].runs_at == utc(2026, 1, 2, 2)
        series.cancel()


def test_run_at_is_a_wall_clock_time_that_a_step_moves() -> None:
    clock = ManualClock(wall=utc(2026, 1, 1, 12))
    with PriorityExecutor(max_workers=1, clock=clock) as executor:
        future = executor.submit(lambda: clock.wall(), run_at=utc(2026, 1, 1, 13))
        clock.step_wall(-600)
        clock.advance(3599)
        clock.settle()
        assert not future.done()  # the wall clock shows 12:49:59
        clock.advance_to(utc(2026, 1, 1, 13))
        assert future.result(timeout=10) == utc(2026, 1, 1, 13).timestamp()
        # And forward: a run_at reached by a step starts at once.
        later = executor.submit(lambda: clock.wall(), run_at=utc(2026, 1, 2))
        clock.step_wall(datetime.timedelta(hours=11))
        assert later.result(timeout=10) == utc(2026, 1, 2).timestamp()


def test_the_first_run_of_an_interval_series_at_run_at_waits_for_the_wall_clock() -> None:
    clock = ManualClock(wall=utc(2026, 1, 1, 12))
    runs = Runs(clock)
    with PriorityExecutor(max_workers=1, clock=clock) as executor:
        series = executor.submit_recurring(runs, interval=60, run_at=utc(2026, 1, 1, 13))
        clock.step_wall(datetime.timedelta(minutes=30))  # 12:30
        clock.advance_to(utc(2026, 1, 1, 13))  # 30 minutes of the executor's clock
        clock.settle()
        assert runs.shown() == ["01-01 13:00 UTC"]
        clock.advance(60)  # then every 60 s of the executor's clock
        clock.settle()
        assert runs.shown() == ["01-01 13:00 UTC", "01-01 13:01 UTC"]
        series.cancel()


# -- missed runs -----------------------------------------------------------------------------


def test_a_suspend_over_many_slots_gives_one_catch_up_run() -> None:
    clock = ManualClock(wall=utc(2026, 1, 1, 9, 1))
    runs = Runs(clock)
    with PriorityExecutor(max_workers=1, clock=clock) as executor:
        series = executor.submit_recurring(runs, interval=Cron("*/5 * * * *", tz=UTC))
        # A laptop asleep for an hour: the monotonic clock stands, the wall clock jumps.
        clock.step_wall(datetime.timedelta(hours=1))
        clock.settle()
        assert runs.shown() == ["01-01 10:01 UTC"]  # one run for the twelve slots
        for minute in (5, 10):
            clock.advance_to(utc(2026, 1, 1, 10, minute))
            clock.settle()
        assert runs.shown() == ["01-01 10:01 UTC", "01-01 10:05 UTC", "01-01 10:10 UTC"]
        assert executor.stats().skipped == 0
        series.cancel()


def test_without_coalesce_each_missed_slot_gets_its_run() -> None:
    clock = ManualClock(wall=utc(2026, 1, 1, 9, 1))
    slots = []

    def job() -> None:
        slots.append(clock.wall())

    with PriorityExecutor(max_workers=1, clock=clock) as executor:
        series = executor.submit_recurring(
            job, interval=Cron("*/5 * * * *", tz=UTC, coalesce=False)
        )
        clock.step_wall(datetime.timedelta(minutes=30))  # 09:31: six slots passed
        clock.settle()
        assert len(slots) == 6
        series.cancel()


def test_a_run_later_than_its_misfire_grace_is_skipped_and_counted() -> None:
    clock = ManualClock(wall=utc(2026, 1, 1, 9, 1))
    runs = Runs(clock)
    with PriorityExecutor(max_workers=1, clock=clock) as executor:
        series = executor.submit_recurring(
            runs, interval=Cron("*/5 * * * *", tz=UTC, misfire_grace=60)
        )
        clock.step_wall(datetime.timedelta(minutes=30, seconds=30))  # 09:31:30
        clock.settle()
        # The latest slot (09:30) passed 90 s ago: more than the grace. Skipped.
        assert runs.times == []
        assert executor.stats().skipped == 1
        clock.advance_to(utc(2026, 1, 1, 9, 35))
        clock.settle()
        assert runs.shown() == ["01-01 09:35 UTC"]
        # Within the grace, a missed slot runs late.
        clock.step_wall(datetime.timedelta(minutes=5, seconds=50))  # 09:40:50
        clock.settle()
        assert runs.shown() == ["01-01 09:35 UTC", "01-01 09:40 UTC"]
        assert executor.stats().skipped == 1
        series.cancel()


def test_a_run_that_waits_for_a_busy_pool_past_its_grace_is_skipped() -> None:
    clock = ManualClock(wall=utc(2026, 1, 1, 9, 59))
    runs = Runs(clock)
    release = threading.Event()
    with PriorityExecutor(max_workers=1, clock=clock) as executor:
        busy = executor.submit(release.wait, 30)
        series = executor.submit_recurring(
            runs, interval=Cron("0 * * * *", tz=UTC, misfire_grace=300)
        )
        clock.advance_to(utc(2026, 1, 1, 10, 6))  # the 10:00 run waits for the worker
        release.set()
        busy.result(timeout=10)
        clock.settle()
        assert runs.times == []
        assert executor.stats().skipped == 1
        clock.advance_to(utc(2026, 1, 1, 11))
        clock.settle()
        assert runs.shown() == ["01-01 11:00 UTC"]
        series.cancel()


# -- jitter ----------------------------------------------------------------------------------


def test_jitter_spreads_runs_within_its_window_never_before_the_slot() -> None:
    clock = ManualClock(wall=utc(2026, 1, 1, 9, 0, 59))
    starts: list[float] = []
    with PriorityExecutor(max_workers=4, clock=clock) as executor:
        every_minute = Cron("* * * * *", tz=UTC, jitter=20)
        series = [
            executor.submit_recurring(lambda: starts.append(clock.wall()), interval=every_minute)
            for _ in range(200)
        ]
        for _ in range(22):
            clock.advance(1)
            clock.settle()
        minute = utc(2026, 1, 1, 9, 1).timestamp()
        assert len(starts) == 200
        assert min(starts) >= minute
        assert max(starts) <= minute + 20
        # Spread: 200 runs fall on at least 15 of the 21 seconds.
        assert len({int(start - minute) for start in starts}) >= 15
        assert all(w.runs_at is not None for w in executor.waiting())
        for future in series:
            future.cancel()


# -- a schedule of one's own ------------------------------------------------------------------


class BusinessDays:
    """09:00 on weekdays in Paris, but for the listed holidays; ends at ``until``."""

    jitter = 0
    misfire_grace = None
    coalesce = True

    def __init__(self, holidays: set[datetime.date], until: datetime.date) -> None:
        self.holidays = holidays
        self.until = until

    def next_after(self, moment: datetime.datetime) -> datetime.datetime | None:
        local = moment.astimezone(PARIS)
        day = local.date()
        if local.time() >= datetime.time(9):
            day += datetime.timedelta(days=1)
        while day.weekday() >= 5 or day in self.holidays:
            day += datetime.timedelta(days=1)
        if day > self.until:
            return None
        return datetime.datetime.combine(day, datetime.time(9), PARIS)


def test_a_schedule_of_ones_own_runs_and_ends_the_series() -> None:
    clock = ManualClock(wall=datetime.datetime(2026, 12, 23, 12, tzinfo=PARIS))
    runs = Runs(clock, PARIS)
    schedule = BusinessDays({datetime.date(2026, 12, 25)}, until=datetime.date(2026, 12, 29))
    with PriorityExecutor(max_workers=1, clock=clock) as executor:
        series = executor.submit_recurring(runs, interval=schedule)
        for _ in range(7 * 24):
            clock.advance(3600)
            clock.settle()
        assert [f"{t:%a %d %H:%M}" for t in runs.times] == [
            "Thu 24 09:00",
            "Mon 28 09:00",
            "Tue 29 09:00",
        ]
        assert series.result(timeout=10) is None  # its schedule has no more runs
        assert executor.stats().scheduled == 0


class Broken:
    def __init__(self, answers: list[object]) -> None:
        self.answers = answers

    def next_after(self, moment: datetime.datetime) -> object:
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_a_schedule_that_fails_at_submit_queues_nothing() -> None:
    with PriorityExecutor(max_workers=1, clock=ManualClock()) as executor:
        with pytest.raises(KeyError):
            executor.submit_recurring(print, interval=Broken([KeyError("holidays")]))
        with pytest.raises(TypeError, match="must return an aware datetime"):
            executor.submit_recurring(
                print,
                interval=Broken([datetime.datetime(2030, 1, 1)]),  # naive
            )
        with pytest.raises(ValueError, match="has no run"):
            executor.submit_recurring(print, interval=Broken([None]))
        assert executor.stats().scheduled == 0
        assert executor.submit(int, 7).result(timeout=10) == 7


def test_a_schedule_that_fails_later_ends_its_series_with_the_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock(wall=utc(2026, 1, 1))
    down = RuntimeError("calendar service down")
    schedule = Broken([utc(2026, 1, 1, 1), utc(2026, 1, 1, 2), down])
    with PriorityExecutor(max_workers=1, clock=clock) as executor:
        series = executor.submit_recurring(print, "the run at 01:00", interval=schedule)
        clock.advance(3600)
        # Asked for the slot after 02:00 once the 01:00 run is over, the schedule fails.
        with pytest.raises(RuntimeError, match="calendar service down"):
            series.result(timeout=10)
        assert executor.stats().completed == 1
        assert executor.waiting() == []
    assert "The schedule of recurring task print raised; its series ends" in caplog.text


def test_a_calendar_series_cancelled_while_it_waits_stops() -> None:
    clock = ManualClock(wall=utc(2026, 1, 1))
    runs = Runs(clock)
    with PriorityExecutor(max_workers=1, clock=clock) as executor:
        series = executor.submit_recurring(runs, interval=Cron("0 * * * *", tz=UTC))
        clock.advance(3600)
        clock.settle()
        assert series.cancel()
        clock.advance(7200)
        clock.settle()
        assert len(runs.times) == 1
        with pytest.raises(CancelledError):
            series.result(timeout=10)
        assert executor.waiting() == []


def test_a_calendar_series_in_a_lane_obeys_its_limits() -> None:
    clock = ManualClock(wall=utc(2026, 1, 1, 8, 59))
    with PriorityExecutor(max_workers=4, clock=clock) as executor:
        reports = executor.lane("reports", max_running=1)
        gate = threading.Event()
        at_nine = Cron("0 9 * * *", tz=UTC)
        series = [reports.submit_recurring(gate.wait, 30, interval=at_nine) for _ in range(3)]
        clock.advance(60)
        # A worker starts the one run the lane has room for (the others are throttled).
        wait_until(lambda: reports.stats().running == 1, what="a run to start")
        assert reports.stats().throttled == 2
        gate.set()
        clock.settle()
        assert reports.stats().completed == 3
        for future in series:
            future.cancel()


def test_reschedule_moves_a_calendar_run_off_its_wall_time() -> None:
    clock = ManualClock(wall=utc(2026, 1, 1, 1))
    runs = Runs(clock)
    with PriorityExecutor(max_workers=1, clock=clock) as executor:
        series = executor.submit_recurring(runs, interval=Cron("0 2 * * *", tz=UTC))
        assert executor.reschedule(series, delay=60)
        clock.step_wall(-7200)  # moves the wall clock, not a delay
        clock.advance(60)
        clock.settle()
        assert runs.shown() == ["12-31 23:01 UTC"]
        # The series goes on at its slots: the next after the one that waited.
        assert executor.waiting()[0].runs_at == utc(2026, 1, 2, 2)
        series.cancel()


# -- real time -------------------------------------------------------------------------------


class EverySecond:
    """On the second: the schedule that cron's minute cannot give."""

    def next_after(self, moment: datetime.datetime) -> datetime.datetime:
        return moment.replace(microsecond=0) + datetime.timedelta(seconds=1)


@pytest.mark.timeout(30)
def test_every_second_on_the_second_starts_just_after_each_boundary() -> None:
    lateness: list[float] = []
    done = threading.Event()

    def tick() -> None:
        now = time.time()
        lateness.append(now - int(now))
        if len(lateness) == 3:
            done.set()

    with PriorityExecutor(max_workers=2) as executor:
        series = executor.submit_recurring(tick, interval=EverySecond())
        assert done.wait(15)
        series.cancel()
    # Never early: a run a hair before its second would show as nearly a whole second.
    assert all(late < 0.5 for late in lateness), lateness
    assert statistics.median(lateness) < 0.01, lateness  # a few milliseconds after it


def test_a_retry_of_a_run_at_task_waits_for_its_backoff_not_the_wall_time() -> None:
    from priority_executor import Retry

    clock = ManualClock(wall=utc(2026, 1, 1, 12))
    attempts: list[float] = []

    def flaky() -> str:
        attempts.append(clock.wall())
        if len(attempts) == 1:
            raise ConnectionError("once")
        return "ok"

    with PriorityExecutor(max_workers=1, clock=clock, retry=Retry(2, backoff=5)) as executor:
        future = executor.submit(flaky, run_at=utc(2026, 1, 1, 13))
        clock.advance_to(utc(2026, 1, 1, 13))
        clock.settle()
        clock.step_wall(-60)  # the retry waits 5 s of the executor's clock, whatever the wall
        clock.advance(5)
        assert future.result(timeout=10) == "ok"
        assert attempts[1] - attempts[0] == 5 - 60


def test_the_test_clock_refuses_bad_moves() -> None:
    clock = ManualClock(wall=utc(2026, 1, 1))
    with pytest.raises(ValueError, match="has passed"):
        clock.advance_to(utc(2025, 12, 31))
    with pytest.raises(TypeError, match="seconds must be a number"):
        clock.step_wall("1h")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="seconds must be finite"):
        clock.step_wall(float("nan"))
    with pytest.raises(TypeError, match="wall must be a datetime"):
        ManualClock(wall="2026-01-01")  # type: ignore[arg-type]
    clock.step_wall(-86400)  # back is allowed: so the system clock goes
    assert clock.wall() == utc(2025, 12, 31).timestamp()
    assert "wall=2025-12-31T00:00:00+00:00" in repr(clock)


class SteppedSystemClock:
    """``time.time()`` stepped as NTP or a resume from sleep steps it; monotonic time goes on."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.step = 0.0
        real = time.time
        monkeypatch.setattr(time, "time", lambda: real() + self.step)


@pytest.mark.timeout(30)
def test_a_step_of_the_system_clock_forward_is_seen_within_a_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    system = SteppedSystemClock(monkeypatch)
    with PriorityExecutor(max_workers=1) as executor:
        in_an_hour = datetime.datetime.now(UTC) + datetime.timedelta(hours=1)
        future = executor.submit(time.monotonic, run_at=in_an_hour)
        time.sleep(0.05)  # the promoter asleep, until the run_at an hour away as it knew it
        system.step = 3600
        stepped = time.monotonic()
        started = future.result(timeout=10)
    assert started - stepped < 2.0  # at most a second, and a generous margin


@pytest.mark.timeout(30)
def test_a_step_of_the_system_clock_back_delays_a_waiting_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    system = SteppedSystemClock(monkeypatch)
    with PriorityExecutor(max_workers=1) as executor:
        submitted = time.monotonic()
        future = executor.submit(
            time.monotonic, run_at=datetime.datetime.now(UTC) + datetime.timedelta(seconds=0.3)
        )
        system.step = -1.0
        started = future.result(timeout=10)
    assert started - submitted >= 1.3 - 0.01  # when the wall clock shows run_at again
