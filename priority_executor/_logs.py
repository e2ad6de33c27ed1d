"""The package's own log lines: its logger, and the fields each line carries.

A line says in words what happened, for people; the same facts go in the record as
``extra=`` keys, for pipelines (JSON formatters, structlog, OpenTelemetry's log handler),
which read them without parsing the words. Every key is named ``priority_executor_<field>``:
``logging`` raises ``KeyError`` for an ``extra`` key that the record has already, and a
record factory of the application's may well add a ``task`` or a ``lane`` of its own.

Each line is emitted with no lock held: from a worker, outside the scheduler's lock, or
as one of the ``Effects`` that a locked section leaves to do.
"""

from __future__ import annotations

import logging
from typing import Protocol

from ._arguments import callable_name

LOGGER = logging.getLogger("priority_executor")
PREFIX = "priority_executor_"


class Named(Protocol):
    """A lane, as a log line names it."""

    @property
    def name(self) -> str | None: ...


def fields(fn: object, lane: Named | None, **more: object) -> dict[str, object]:
    """The ``extra`` of a line about the task whose callable is ``fn``: its ``task`` (the
    callable's name, as the line says it) and ``lane`` (its lane's name; None for no lane
    or an unnamed one), then ``more``, each key with the prefix."""
    extra: dict[str, object] = {
        PREFIX + "task": callable_name(fn),
        PREFIX + "lane": None if lane is None else lane.name,
    }
    for name, value in more.items():
        extra[PREFIX + name] = value
    return extra


def in_lane(lane: Named | None) -> str:
    """How a line says where the task ran: `` in lane 'api'``, `` in a lane``, or nothing."""
    if lane is None:
        return ""
    return f" in lane {lane.name!r}" if lane.name else " in a lane"


def error_name(exc: BaseException) -> str:
    """The ``error`` field of a line about a failure: the exception's class, as named."""
    return type(exc).__qualname__
