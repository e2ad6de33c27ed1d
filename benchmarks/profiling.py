"""``--profile``: measure 1 for PE under cProfile, every thread included, top functions by tottime.

The executor's work is split between the submitting thread and the workers. Up to Python
3.11, cProfile only sees the thread that enables it: so every thread started meanwhile gets
a profiler of its own (through ``threading.setprofile``) and the statistics of all of them
are merged. From 3.12, cProfile is built on ``sys.monitoring``, which sees every thread and
allows one profiler at a time: one is enough.
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import threading
from types import FrameType
from typing import Any, TextIO

from benchmarks.config import Sizes
from benchmarks.measures.throughput import WORKER_COUNTS, tasks_per_second, workers_label
from benchmarks.pools import PRIORITY_EXECUTOR

TOP = 25
SEES_EVERY_THREAD = sys.version_info >= (3, 12)


class ThreadProfiles:
    """Profiles the current thread and every thread started while the block runs."""

    def __init__(self) -> None:
        self.profiles: list[cProfile.Profile] = []

    def __enter__(self) -> ThreadProfiles:
        if not SEES_EVERY_THREAD:
            threading.setprofile(self._profile_new_thread)
        self._start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if not SEES_EVERY_THREAD:
            threading.setprofile(None)
        self.profiles[0].disable()

    def stats(self, stream: TextIO) -> pstats.Stats:
        """The merged statistics of every thread."""
        return pstats.Stats(*self.profiles, stream=stream)

    def _profile_new_thread(self, frame: FrameType, event: str, arg: Any) -> None:
        self._start()  # the profiler replaces this hook for the rest of the thread's life

    def _start(self) -> None:
        profile = cProfile.Profile()
        self.profiles.append(profile)
        profile.enable()


def profile_throughput(sizes: Sizes, stream: TextIO = sys.stdout) -> None:
    """Run PE's no-op throughput once per worker count and print where the time goes."""
    for workers in WORKER_COUNTS:
        with ThreadProfiles() as profiles:
            figures = tasks_per_second(PRIORITY_EXECUTOR, workers, sizes.throughput_tasks, None)
        rate = figures[workers_label(workers)]
        print(
            f"\n=== PE, {workers_label(workers)}, {sizes.throughput_tasks:,} no-op tasks: "
            f"{rate:,.0f} tasks/s under the profiler, {len(profiles.profiles)} threads ===",
            file=stream,
        )
        profiles.stats(stream).sort_stats("tottime").print_stats(TOP)
