"""Running repetitions: interleaving, progress lines, soft failure, and memory hygiene."""

from __future__ import annotations

import gc
import random
import sys
import time
import tracemalloc
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, wait
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable

from benchmarks.config import SEED
from benchmarks.results import Samples

TIMEOUT = 120.0
"""Seconds any single wait may take before the trial is declared hung and skipped."""


class Progress:
    """Writes ``[3/9] lateness: PE rep 2/5`` lines to stderr, so long runs show where they are."""

    def __init__(self, number: int, total: int, title: str) -> None:
        self._prefix = f"[{number}/{total}] {title}:"

    def __call__(self, message: str) -> None:
        print(self._prefix, message, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Trial:
    """One contender in one setting; each call of ``run`` is one repetition.

    ``run`` returns its figures by variant (such as ``{"p50": ..., "p99": ...}``); they are
    filed under ``series`` (such as ``"PE"``).
    """

    series: str
    label: str
    run: Callable[[], Mapping[str, float]]


def interleave(
    trials: Sequence[Trial], repetitions: int, progress: Progress
) -> tuple[Samples, list[str]]:
    """Run every trial ``repetitions`` times: each repetition runs every trial once, in an
    order of its own (shuffled, seeded: the same in every run), such as C, A, B, B, C, A.

    Interleaving spreads the machine's drift (other processes, CPU frequency) over all
    contenders instead of letting it favour whichever ran first. Shuffling spreads what
    one trial leaves to the next (threads winding down, memory to give back, the state
    of the collector): in a fixed order A, B, C, A, B, C, PriorityExecutor measured against
    a copy of itself (``--baseline HEAD``) read 0.84x with 1 worker and 1.19x with 4 in
    measure 1, and 1.01x and 1.00x once shuffled. A trial that raises is
    skipped from then on and none of its figures are kept; the returned notes say why.
    This is how a contender that is missing (``priority_executor`` not written yet,
    APScheduler not installed) or broken fails softly without hiding the others.
    """
    figures: list[list[Mapping[str, float]]] = [[] for _ in trials]
    failures: dict[int, str] = {}
    for repetition, order in enumerate(shuffled_orders(len(trials), repetitions), 1):
        for index in order:
            trial = trials[index]
            if index in failures:
                continue
            progress(f"{trial.label} rep {repetition}/{repetitions}")
            gc.collect()
            try:
                figures[index].append(trial.run())
            except Exception as exc:  # a contender under construction may fail in any way
                failures[index] = f"{trial.series} skipped: {type(exc).__name__}: {exc}"
                progress(f"{trial.label} failed: {type(exc).__name__}: {exc}")
    samples: Samples = {}
    for index, trial in enumerate(trials):
        if index in failures:
            continue
        for repetition_figures in figures[index]:
            for variant, value in repetition_figures.items():
                samples.setdefault(variant, {}).setdefault(trial.series, []).append(value)
    return samples, unique(failures.values())


def shuffled_orders(trials: int, repetitions: int) -> list[list[int]]:
    """The order of the trials in each repetition, seeded. Made before the first trial runs:
    the generator's state (2.5 KiB) is gone by then, and does not count in a measure of
    live memory (measure 8)."""
    rng = random.Random(SEED)
    return [rng.sample(range(trials), trials) for _ in range(repetitions)]


def unique(notes: Iterable[str]) -> list[str]:
    """The notes without repeats, in their first order."""
    return list(dict.fromkeys(notes))


def wait_all(futures: Iterable[Future[Any]]) -> None:
    """Wait until every future is done, the way users do; raise if that takes over TIMEOUT."""
    _, not_done = wait(list(futures), timeout=TIMEOUT)
    if not_done:
        raise TimeoutError(f"{len(not_done)} tasks still unfinished after {TIMEOUT:g} s")


def completion_rate(submit_all: Callable[[], Sequence[Future[Any]]]) -> float:
    """Tasks per second from the first submit of ``submit_all`` to the last of its tasks done."""
    start = time.perf_counter()
    futures = submit_all()
    wait_all(futures)
    return len(futures) / (time.perf_counter() - start)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while an untimed set-up creates many objects, then collect.

    Filling an executor with a million tasks triggers ever longer full collections that only
    lengthen the set-up; what is measured afterwards runs with the GC on, as users run.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
        gc.collect()


@contextmanager
def gc_frozen() -> Iterator[None]:
    """Keep everything alive now out of the cyclic GC's sight for the block (``gc.freeze``).

    A backlog of a million tasks, built once and kept, would make every full collection
    scan it again: in the collections between trials, and in any that fall into a timed part.
    """
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextmanager
def tracing_memory() -> Iterator[None]:
    """Trace Python allocations (tracemalloc) for the duration of the block."""
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


def live_bytes() -> int:
    """Bytes of live traced allocations after a full collection (tracemalloc's *current*)."""
    gc.collect()
    current, _peak = tracemalloc.get_traced_memory()
    return current
