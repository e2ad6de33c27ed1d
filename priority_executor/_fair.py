"""Fair share: among due tasks of the same rank, workers go to the backlogged lanes in
proportion to their weights (stride scheduling).

Once any lane has a weight, the ready heap gives way to this: each *share* (a lane, and one
for the tasks without a lane) keeps its due tasks in a heap of its own, by the policy's key,
and has a *pass*, which grows by ``1 / weight`` each time one of its tasks starts. A worker
takes the best task of the share whose best task has the best *rank* (the first item of the
policy's key: ``-priority`` for ``PriorityFirst``), the smallest pass breaking ties. So
priority comes first, then the shares, each served as often as its weight says, then the
policy within a share.

The choice is made as a worker takes a task, not as a task is queued: a weight changed acts
on the next start, and a share that becomes backlogged joins at the smallest pass of those
that are, less one of its own steps (no credit for the time it was idle, no debt): its
first task starts next, however many tasks the others hold. Each start costs O(log shares):
a share is placed in two heaps, by ``(rank, pass)`` and by pass; an entry whose share moved
since is stale, and skipped where it surfaces.
"""

from __future__ import annotations

import itertools
from heapq import heapify, heappop, heappush
from typing import TYPE_CHECKING, Any

from ._task import READY

if TYPE_CHECKING:
    from ._task import Task


class Share:
    """The due tasks of one lane, or of the tasks without one, and how much it was served."""

    __slots__ = ("entries", "pass_", "placed", "weight")

    def __init__(self, weight: float) -> None:
        self.entries: list[tuple[Any, ...]] = []  # a heap of ready-heap entries
        self.weight = weight
        self.pass_ = 0.0
        self.placed = -1  # the stamp of its live entries in Fair's heaps; -1: not backlogged


def rank(entry: tuple[Any, ...]) -> Any:
    """The part of a task's key that fair share never overrides: the policy key's first
    item (``-priority`` for ``PriorityFirst``); a key with none (``Fifo``) ranks all alike."""
    return entry[0] if len(entry) > 2 else 0


class Fair:
    """The ready tasks, in shares: ``push`` as the ready heap's push, ``pop`` the next task
    to take, then ``took`` once it is claimed (or nothing, if its lane throttled it)."""

    __slots__ = ("_stamp", "by_pass", "order", "root", "serving", "size", "vtime")

    def __init__(self) -> None:
        self.root = Share(1.0)  # the tasks without a lane: one share, of weight 1
        self.order: list[tuple[Any, ...]] = []  # (rank, pass, stamp, share)
        self.by_pass: list[tuple[Any, ...]] = []  # (pass, stamp, share): the backlogged ones
        self._stamp = itertools.count().__next__
        self.vtime = 0.0  # the smallest pass of a backlogged share, as last seen
        # The share whose task pop() returned, out of the heaps until took() (or the next
        # pop(), if its lane throttled the task) places it again.
        self.serving: Share | None = None
        self.size = 0  # entries held, live or dead

    def __bool__(self) -> bool:
        return bool(self.order) or self.serving is not None

    def share_of(self, task: Task) -> Share:
        ext = task.ext
        lane = None if ext is None else ext.lane
        if lane is None:
            return self.root
        share: Share | None = lane.share  # type: ignore[attr-defined]
        if share is None:
            lane.share = share = Share(lane.weight or 1.0)  # type: ignore[attr-defined]
        return share

    def push(self, entry: tuple[Any, ...]) -> None:
        share = self.share_of(entry[-1])
        entries = share.entries
        heappush(entries, entry)
        self.size += 1
        if entries[0] is entry and share is not self.serving:
            if share.placed < 0:
                # Backlogged again: as if its last task had started with the least served
                # share's, whatever it was owed: its next task starts next, then it is level.
                share.pass_ = max(share.pass_, self._vtime() - 1.0 / share.weight)
            self._place(share)

    def pop(self) -> tuple[Any, ...] | None:
        """The entry of the next task to take, out of its share; None if none is live."""
        self._settle()
        order = self.order
        while order:
            first, _, stamp, share = heappop(order)
            if share.placed != stamp:
                continue  # moved since
            entries = share.entries
            while entries and entries[0][-1].state != READY:
                heappop(entries)  # claimed where it stood
                self.size -= 1
            if not entries:
                share.placed = -1
                continue
            if rank(entries[0]) != first:
                self._place(share)  # its best went: the others rank below
                continue
            self.size -= 1
            self.serving = share
            entry: tuple[Any, ...] = heappop(entries)
            return entry
        return None

    def took(self, started: bool) -> None:
        """The task pop() returned was claimed: its share is charged a start if it started."""
        share = self.serving
        if share is not None:
            if started:
                share.pass_ += 1.0 / share.weight
            self._settle()

    def reweigh(self, share: Share, weight: float) -> None:
        """A lane's weight changed: it acts on its next start. What the share is owed or
        owes (its pass beyond the least served) is scaled to the new weight."""
        vtime = self._vtime()
        if share.placed >= 0 and share.pass_ > vtime:
            share.pass_ = vtime + (share.pass_ - vtime) * share.weight / weight
        share.weight = weight
        if share.placed >= 0 and share is not self.serving:
            self._place(share)

    def _settle(self) -> None:
        share = self.serving
        if share is not None:
            self.serving = None
            if share.entries:
                self._place(share)
            else:
                share.placed = -1

    def _place(self, share: Share) -> None:
        stamp = self._stamp()
        share.placed = stamp
        heappush(self.order, (rank(share.entries[0]), share.pass_, stamp, share))
        by_pass = self.by_pass
        heappush(by_pass, (share.pass_, stamp, share))
        # A share's older places surface first (its pass only grows): dropped there, they
        # keep the heap as small as the backlogged shares.
        while by_pass[0][2].placed != by_pass[0][1]:
            heappop(by_pass)

    def _vtime(self) -> float:
        by_pass = self.by_pass
        while by_pass and by_pass[0][2].placed != by_pass[0][1]:
            heappop(by_pass)
        if by_pass:
            self.vtime = max(self.vtime, by_pass[0][0])
        return self.vtime

    def shares(self) -> list[Share]:
        """The shares that hold entries."""
        found = {id(entry[-1]): entry[-1] for entry in self.order if entry[-1].placed == entry[2]}
        if self.serving is not None:
            found[id(self.serving)] = self.serving
        return [share for share in found.values() if share.entries]

    def entries(self) -> list[tuple[Any, ...]]:
        return [entry for share in self.shares() for entry in share.entries]

    def compact(self) -> None:
        """Drop the entries of tasks claimed where they stood (see Scheduler.discarded)."""
        for share in self.shares():
            share.entries[:] = [e for e in share.entries if e[-1].state == READY]
            heapify(share.entries)
            if share is not self.serving:
                if share.entries:
                    self._place(share)
                else:
                    share.placed = -1
        self.size = sum(len(share.entries) for share in self.shares())
        self.order[:] = [e for e in self.order if e[-1].placed == e[2]]
        heapify(self.order)

    def preview(self, live: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """``live`` entries in the order the workers would take them, were none throttled
        (see ``_control.waiting``)."""
        by_share: dict[int, tuple[Share, list[tuple[Any, ...]]]] = {}
        for entry in live:
            share = self.share_of(entry[-1])
            by_share.setdefault(id(share), (share, []))[1].append(entry)
        vtime = self._vtime()
        heap = []
        for key, (share, entries) in by_share.items():
            entries.sort(reverse=True)  # popped from the end, best first
            start = share.pass_ if share.placed >= 0 else max(share.pass_, vtime)
            heap.append((rank(entries[-1]), start, key, share, entries))
        heapify(heap)
        ordered = []
        while heap:
            _, pass_, key, share, entries = heappop(heap)
            ordered.append(entries.pop())
            if entries:
                heappush(heap, (rank(entries[-1]), pass_ + 1.0 / share.weight, key, share, entries))
        return ordered
