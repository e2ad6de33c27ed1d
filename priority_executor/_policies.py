"""Ordering policies: which due task a free worker takes first.

A policy turns a task into a sort key once, when the task becomes due; workers always take
the smallest key, ties going to the earlier submission. Because a key never changes while
the task waits, a policy whose order depends on waiting time must express it as a static
key (see ``Aging``).
"""

from __future__ import annotations

import enum
import math
from typing import Callable, Protocol

SortKey = tuple[float, ...]


class Priority(enum.IntEnum):
    """Named priorities. Any int is a priority; higher runs first."""

    LOW = -10
    NORMAL = 0
    HIGH = 10


class TaskInfo(Protocol):
    """What a policy may read of a task. Times are seconds on the executor's clock."""

    @property
    def priority(self) -> int: ...

    @property
    def due(self) -> float: ...

    @property
    def deadline(self) -> float | None: ...

    @property
    def seq(self) -> int: ...


class Policy(Protocol):
    """Anything with ``sort_key(task) -> tuple`` is a policy.

    The key is computed once, when the task becomes due: in ``submit()``'s thread for a task
    due at once (an ``Exception`` fails that task; ``KeyboardInterrupt`` and ``SystemExit``
    propagate from ``submit()``, which then queues nothing), else under the executor's
    internal lock (anything raised fails that task). It must be quick, must not depend on
    the current time, and must not call back into the executor. It must be a tuple of real
    numbers (ints or floats, no NaN), so that any two keys compare.
    """

    def sort_key(self, task: TaskInfo) -> SortKey: ...


class PriorityFirst:
    """Higher priority first; then earlier due time; then submission order (the default)."""

    def sort_key(self, task: TaskInfo) -> SortKey:
        return (-task.priority, task.due)

    def __repr__(self) -> str:
        return "PriorityFirst()"


class Fifo:
    """Submission order only, as ``ThreadPoolExecutor``; priorities are ignored."""

    def sort_key(self, task: TaskInfo) -> SortKey:
        return ()

    def __repr__(self) -> str:
        return "Fifo()"


class EarliestDeadlineFirst:
    """Earliest ``expires`` deadline first; tasks without one after them, by due time."""

    def sort_key(self, task: TaskInfo) -> SortKey:
        deadline = task.deadline
        return (math.inf if deadline is None else deadline, task.due)

    def __repr__(self) -> str:
        return "EarliestDeadlineFirst()"


class Aging:
    """Priority grows by ``rate`` per second a task has waited since it became due.

    The effective priority ``priority + rate * (now - due)`` orders tasks exactly as the
    static ``priority - rate * due`` does at every instant, so no task is ever re-sorted.
    With ``rate=0`` this is ``PriorityFirst``.
    """

    def __init__(self, rate: float) -> None:
        if isinstance(rate, bool) or not isinstance(rate, (int, float)):
            raise TypeError(f"rate must be a number, not {type(rate).__name__}")
        if not (math.isfinite(rate) and rate >= 0):
            raise ValueError(f"rate must be finite and >= 0, got {rate!r}")
        self.rate = float(rate)

    def sort_key(self, task: TaskInfo) -> SortKey:
        return (self.rate * task.due - task.priority, task.due)

    def __repr__(self) -> str:
        return f"Aging(rate={self.rate!r})"


_BUILTIN = (PriorityFirst, Fifo, EarliestDeadlineFirst, Aging)


def key_function(policy: Policy) -> Callable[[TaskInfo], SortKey]:
    """The key function the scheduler calls: checked, unless the policy is one of ours.

    The scheduler puts a key's items before the task's ``seq`` in a heap entry. A custom
    key becomes one item, so that keys of different lengths still compare as tuples; and
    it is checked here, because a key that does not compare with the others would break the
    heap for every task, while a bad key fails only the task it was made for.
    """
    sort_key = getattr(policy, "sort_key", None)
    if not callable(sort_key):
        raise TypeError(f"policy must have a sort_key(task) method, got {policy!r}")
    if type(policy) in _BUILTIN:
        return sort_key  # type: ignore[no-any-return]

    def checked_key(task: TaskInfo) -> SortKey:
        key = sort_key(task)
        if not isinstance(key, tuple) or not all(_is_real(item) for item in key):
            raise TypeError(
                f"{policy!r}.sort_key() must return a tuple of ints and floats, got {key!r}"
            )
        return (tuple(key),)  # type: ignore[return-value]

    return checked_key


def _is_real(item: object) -> bool:
    return isinstance(item, (int, float)) and item == item  # NaN never equals itself
