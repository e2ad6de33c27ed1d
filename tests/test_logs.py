"""Logs a pipeline can read (issue 46): every line of the ``priority_executor`` logger
carries its facts as ``extra=`` keys, named ``priority_executor_<field>``; a calendar run
skipped past its misfire grace is a WARNING line."""

from __future__ import annotations

import datetime
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import TIMEOUT, Boom, run_script

from priority_executor import PriorityExecutor, Retry
from priority_executor.testing import ManualClock

PREFIX = "priority_executor_"
UTC = datetime.timezone.utc


def utc(*fields: int) -> datetime.datetime:
    return datetime.datetime(*fields, tzinfo=UTC)  # type: ignore[misc]


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    """The record's own fields, without the prefix."""
    return {
        name[len(PREFIX) :]: value
        for name, value in vars(record).items()
        if name.startswith(PREFIX)
    }


def lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "priority_executor"]


class EveryFiveMinutes:
    """A calendar schedule with a misfire grace of a minute, in UTC."""

    misfire_grace = 60

    def next_after(self, moment: datetime.datetime) -> datetime.datetime:
        floor = moment.replace(minute=moment.minute - moment.minute % 5, second=0, microsecond=0)
        return floor + datetime.timedelta(minutes=5)


def nightly() -> None:
    pass


def flaky() -> None:
    raise Boom("503")


# -- every line, its fields ----------------------------------------------------------------


def test_a_retry_line_carries_task_lane_attempt_and_wait(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock()
    with caplog.at_level(logging.INFO), PriorityExecutor(1, clock=clock) as ex:
        future = ex.lane("api", retry=Retry(2, backoff=0.5)).submit(flaky)
        clock.settle()
        clock.advance(0.5)
        with pytest.raises(Boom):
            future.result(TIMEOUT)
    (record,) = lines(caplog)
    assert record.levelno == logging.WARNING
    assert fields_of(record) == {
        "task": "flaky",
        "lane": "api",
        "attempt": 1,
        "attempts": 2,
        "wait": 0.5,
        "error": "Boom",
    }


def test_an_expiry_line_carries_its_deadline(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock(wall=utc(2026, 1, 1, 12))
    with caplog.at_level(logging.DEBUG), PriorityExecutor(1, clock=clock) as ex:
        future = ex.lane("batch").submit(nightly, delay=1, expires=2)
        clock.advance(2)
        assert future.cancelled()
    (record,) = [r for r in lines(caplog) if "expired" in r.getMessage()]
    assert record.levelno == logging.DEBUG
    fields = fields_of(record)
    assert fields.keys() == {"task", "lane", "deadline"}
    assert (fields["task"], fields["lane"]) == ("nightly", "batch")
    assert datetime.datetime.fromisoformat(fields["deadline"]) == utc(2026, 1, 1, 12, 0, 2)


def test_a_failed_run_of_a_series_that_goes_on_carries_its_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock()
    with caplog.at_level(logging.INFO), PriorityExecutor(1, clock=clock) as ex:
        series = ex.lane("health", survive_failures=True).submit_recurring(flaky, interval=60)
        clock.settle()
        series.cancel()
    (record,) = lines(caplog)
    assert record.levelno == logging.ERROR
    assert record.getMessage() == "Recurring task flaky in lane 'health' raised; its series goes on"
    assert fields_of(record) == {"task": "flaky", "lane": "health", "error": "Boom"}


def test_a_series_that_ends_on_a_failure_says_so_with_its_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO), PriorityExecutor(1) as ex:
        series = ex.lane().submit_recurring(flaky, interval=60)  # an unnamed lane
        with pytest.raises(Boom):
            series.result(TIMEOUT)
    (record,) = lines(caplog)
    assert record.getMessage() == "Recurring task flaky in a lane raised; its series ends"
    assert fields_of(record) == {"task": "flaky", "lane": None, "error": "Boom"}


class FailsLater:
    """A schedule that gives its first slot, then fails."""

    def __init__(self) -> None:
        self.asked = 0

    def next_after(self, moment: datetime.datetime) -> datetime.datetime:
        self.asked += 1
        if self.asked > 2:
            raise OSError("calendar service down")
        return moment + datetime.timedelta(hours=1)


def test_a_schedule_that_fails_carries_its_error(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock(wall=utc(2026, 1, 1))
    with caplog.at_level(logging.INFO), PriorityExecutor(1, clock=clock) as ex:
        series = ex.submit_recurring(nightly, interval=FailsLater())
        clock.advance(3600)
        with pytest.raises(OSError):
            series.result(TIMEOUT)
    (record,) = lines(caplog)
    assert record.getMessage() == "The schedule of recurring task nightly raised; its series ends"
    assert fields_of(record) == {"task": "nightly", "lane": None, "error": "OSError"}


# -- a skipped calendar run ------------------------------------------------------------------


def test_a_skipped_calendar_run_is_a_warning_with_its_slot_and_lateness(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock(wall=utc(2026, 1, 1, 9, 1))
    with caplog.at_level(logging.WARNING), PriorityExecutor(1, clock=clock) as ex:
        series = ex.lane("reports").submit_recurring(nightly, interval=EveryFiveMinutes())
        clock.step_wall(datetime.timedelta(minutes=30, seconds=30))  # 09:31:30, suspended
        clock.settle()
        # Counted, and by then logged: whoever sees the count finds the line.
        assert ex.stats().skipped == 1
        (record,) = lines(caplog)
        series.cancel()
    assert record.levelno == logging.WARNING
    assert record.getMessage() == (
        "Recurring task nightly in lane 'reports' skipped its run of 2026-01-01 09:30:00+00:00:"
        " 90 s late, past its misfire grace of 60 s"
    )
    assert fields_of(record) == {
        "task": "nightly",
        "lane": "reports",
        "slot": "2026-01-01T09:30:00+00:00",
        "late": 90.0,
        "grace": 60.0,
    }


def test_a_skipped_run_is_seen_with_no_logging_set_up() -> None:
    # logging's last-resort handler prints WARNING and above to stderr: the owner of a
    # nightly job that did not run is told, though nothing configured logging.
    result = run_script(
        """
        import datetime
        from priority_executor import Cron, PriorityExecutor
        from priority_executor.testing import ManualClock

        start = datetime.datetime(2026, 1, 1, 1, 59, tzinfo=datetime.timezone.utc)
        clock = ManualClock(wall=start)
        with PriorityExecutor(1, clock=clock) as ex:
            def nightly():
                pass
            ex.submit_recurring(
                nightly, interval=Cron("0 2 * * *", tz="UTC", misfire_grace=3600)
            )
            clock.step_wall(datetime.timedelta(hours=3))  # suspended across 02:00
            clock.settle()
            say(ex.stats().skipped)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1"]
    assert "Recurring task nightly skipped its run of 2026-01-01 02:00:00+00:00" in result.stderr


# -- what a pipeline does with them ----------------------------------------------------------


@pytest.fixture
def record_factory_with_task_and_lane() -> Iterator[None]:
    """An application's record factory that adds fields named ``task`` and ``lane``."""
    original = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = original(*args, **kwargs)
        record.task = "the application's"
        record.lane = "the application's"
        return record

    logging.setLogRecordFactory(factory)
    yield
    logging.setLogRecordFactory(original)


def test_fields_clash_with_no_field_of_the_application(
    caplog: pytest.LogCaptureFixture, record_factory_with_task_and_lane: None
) -> None:
    clock = ManualClock()
    with caplog.at_level(logging.INFO), PriorityExecutor(1, clock=clock) as ex:
        future = ex.lane("api", retry=Retry(2, backoff=1)).submit(flaky)
        clock.settle()
        clock.advance(1)
        with pytest.raises(Boom):
            future.result(TIMEOUT)
    (record,) = lines(caplog)
    assert record.task == "the application's"  # type: ignore[attr-defined]
    assert fields_of(record)["task"] == "flaky"


def test_every_field_is_json(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock(wall=utc(2026, 1, 1, 9, 1))
    with caplog.at_level(logging.DEBUG), PriorityExecutor(1, clock=clock) as ex:
        ex.submit(nightly, delay=1, expires=2)
        retried = ex.lane("api", retry=Retry(2, backoff=1)).submit(flaky)
        series = ex.submit_recurring(nightly, interval=EveryFiveMinutes())
        clock.settle()
        clock.step_wall(datetime.timedelta(minutes=30, seconds=30))
        clock.settle()
        clock.advance(2)  # past the deadline at once, and the retry's backoff
        with pytest.raises(Boom):
            retried.result(TIMEOUT)
        series.cancel()
    records = lines(caplog)
    assert len(records) == 3  # expired, retried, skipped
    for record in records:
        fields = fields_of(record)
        assert {"task", "lane"} <= fields.keys()
        assert json.loads(json.dumps(fields)) == fields
