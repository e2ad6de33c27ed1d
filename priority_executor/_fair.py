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
that are (the pass of the latest start of its rank), less one of its own steps: no credit
for the time it was idle, no debt, and its first task starts next, however many tasks the
others hold. Each start costs O(log shares): a share is placed in a heap by ``(rank,
pass)``; an entry whose share moved since is stale, and skipped where it surfaces.
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

    __slots__ = ("entries", "pass_", "placed", "step", "weight")

    def __init__(self, weight: float) -> None:
        self.entries: list[tuple[Any, ...]] = []  # a heap of ready-heap entries
        self.weight = weight
        self.step = 1.0 / weight  # what a start adds to its pass
        self.pass_ = 0.0
        self.placed = -1  # the stamp of its live entry in Fair's heap; -1: not backlogged


class Fair:
    """The ready tasks, in shares: ``push`` as the ready heap's push, ``pop`` the next task
    to take, then ``took`` once it is claimed (or nothing, if its lane throttled it)."""

    __slots__ = ("_stamp", "by_time", "order", "root", "serving", "size", "vtime", "vtimes")

    def __init__(self, by_time: bool = False) -> None:
        # Charged by busy time (``fair_share="time"``): a share's pass grows by a run's time
        # over its weight as the run ends, not by 1 / weight as it starts (see charge()).
        self.by_time = by_time
        self.root = Share(1.0)  # the tasks without a lane: one share, of weight 1
        self.order: list[tuple[Any, ...]] = []  # (rank, pass, stamp, share)
        self._stamp = itertools.count().__next__
        # Virtual time: the pass of the share whose task was taken latest, of any rank and
        # of each rank (the smallest pass of that rank's backlogged shares, then).
        self.vtime = 0.0
        self.vtimes: dict[Any, float] = {}
        # The share whose task pop() returned, out of the heap until took() (or the next
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
        share: Share | None = lane.share
        if share is None:
            lane.share = share = Share(lane.weight or 1.0)
        return share

    def standing(self, lane: Any, entry: tuple[Any, ...], steps: int) -> tuple[Any, ...]:
        """Where ``entry``, a throttled task of ``lane``, would stand were it given back,
        after ``steps`` more starts of the lane: (rank, pass, entry)."""
        share: Share = lane.share or self.share_of(entry[-1])
        rank = self.rank(entry)
        pass_ = share.pass_
        if share.placed < 0 and share is not self.serving:  # as push() would place it
            pass_ = max(pass_, self.vtimes.get(rank, self.vtime) - share.step)
        if self.by_time:
            return (rank, pass_, entry)  # what a start costs is known only as it ends
        return (rank, pass_ + steps * share.step, entry)

    @staticmethod
    def rank(entry: tuple[Any, ...]) -> Any:
        """The part of a task's key that fair share never overrides: the policy key's first
        item (-priority for PriorityFirst). An entry is (*key, seq, task): Fifo's key is
        empty, and all its tasks rank alike."""
        return entry[0] if len(entry) > 2 else 0

    def push(self, entry: tuple[Any, ...]) -> None:
        ext = entry[-1].ext
        lane = None if ext is None else ext.lane
        share = self.root if lane is None else (lane.share or self.share_of(entry[-1]))
        entries = share.entries
        heappush(entries, entry)
        self.size += 1
        if entries[0] is entry and share is not self.serving:
            if share.placed < 0:
                # Backlogged again: as if its last task had started just before the latest
                # of its rank, whatever it was owed: its next task starts next, then it is
                # level with the others.
                vtime = self.vtimes.get(self.rank(entry), self.vtime)
                share.pass_ = max(share.pass_, vtime - share.step)
            self._place(share)

    def pop(self) -> tuple[Any, ...] | None:
        """The entry of the next task to take, out of its share; None if none is live."""
        if self.serving is not None:
            self._settle()  # its task was throttled
        order = self.order
        while order:
            first, pass_, stamp, share = heappop(order)
            if share.placed != stamp:
                continue  # moved since
            entries = share.entries
            while entries and entries[0][-1].state != READY:
                heappop(entries)  # claimed where it stood
                self.size -= 1
            if not entries:
                share.placed = -1
                continue
            if self.rank(entries[0]) != first:
                self._place(share)  # its best went: the others rank below
                continue
            self.size -= 1
            self.serving = share
            self.vtime = pass_
            vtimes = self.vtimes
            if len(vtimes) > 64:
                vtimes.clear()  # ranks that are seldom equal (a deadline, aged priority)
            vtimes[first] = pass_
            entry: tuple[Any, ...] = heappop(entries)
            return entry
        return None

    def took(self, started: bool) -> None:
        """The task pop() returned was claimed: its share is charged a start if it started."""
        share = self.serving
        if share is not None:
            if started and not self.by_time:
                share.pass_ += share.step
            self._settle()

    def charge(self, share: Share, seconds: float, effects: object = None) -> None:
        """A run of ``share``'s ended after ``seconds`` (``by_time`` only): its pass grows by
        that time over its weight, and it is placed again by its new pass. Under the
        scheduler's lock, posted by the worker (see ``_workers``)."""
        share.pass_ += seconds / share.weight
        if share.placed >= 0 and share is not self.serving:
            self._place(share)

    def reweigh(self, share: Share, weight: float) -> None:
        """A lane's weight changed: it acts on its next start. What the share is owed or
        owes (its pass beyond the least served) is scaled to the new weight."""
        vtime = self.vtime
        if share.placed >= 0 and share.pass_ > vtime:
            share.pass_ = vtime + (share.pass_ - vtime) * share.weight / weight
        share.weight = weight
        share.step = 1.0 / weight
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
        first = self.rank(share.entries[0])
        heappush(self.order, (first, share.pass_, stamp, share))

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
        heap: list[tuple[Any, float, int, Share, list[tuple[Any, ...]]]] = []
        for entry in live:
            share = self.share_of(entry[-1])
            by_share.setdefault(id(share), (share, []))[1].append(entry)
        for key, (share, entries) in by_share.items():
            entries.sort(reverse=True)  # popped from the end, best first
            vtime = self.vtimes.get(self.rank(entries[-1]), self.vtime)
            start = share.pass_ if share.placed >= 0 else max(share.pass_, vtime - share.step)
            heap.append((self.rank(entries[-1]), start, key, share, entries))
        heapify(heap)
        ordered: list[tuple[Any, ...]] = []
        while heap:
            _, pass_, key, share, entries = heappop(heap)
            ordered.append(entries.pop())
            if entries:
                heappush(heap, (self.rank(entries[-1]), pass_ + share.step, key, share, entries))
        return ordered
