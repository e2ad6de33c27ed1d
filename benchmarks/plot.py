"""One PNG of every measure: a subplot each, the contenders' medians as bars side by side.

The dots over each bar are the single repetitions, so the spread shows next to the median.
Raises ImportError when matplotlib is not installed; the caller skips the plot then.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.measures import Measure
from benchmarks.results import Measurement
from benchmarks.runner import unique

COLUMNS = 3
COLORS = {
    "PE": "tab:blue",
    "TPE": "tab:orange",
    "floor": "tab:gray",
    "sched+pool": "tab:green",
    "APScheduler": "tab:purple",
    "Timer": "tab:brown",
    "PE threads": "tab:cyan",
    "PE process": "navy",
    "PE Dask": "tab:pink",
    "PPE": "tab:red",
    "PE no lanes": "tab:cyan",
    "PE alone": "tab:cyan",
    "PE resubmit": "tab:cyan",
    "PE submit": "tab:cyan",
    "PE unbounded": "tab:cyan",
    "PE interval": "tab:cyan",
    "PE cooperative": "tab:cyan",
}
LOG_SCALE_SPREAD = 30
"""Use a log scale when the largest median exceeds the smallest this many times."""


def draw(results: Sequence[tuple[Measure, Measurement]], path: Path) -> None:
    """Draw every measure into one PNG at ``path`` (matplotlib's Agg backend, no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = min(COLUMNS, len(results))
    rows = math.ceil(len(results) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(6 * columns, 4.2 * rows), squeeze=False)
    for ax, (measure, found) in zip(axes.flat, results):
        _draw_measure(ax, measure, found)
    for ax in axes.flat[len(results) :]:
        ax.set_visible(False)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _draw_measure(ax: Any, measure: Measure, found: Measurement) -> None:
    ax.set_title(f"{measure.number}. {measure.title}", fontsize=10)
    variants = list(found.samples)
    if not variants:
        ax.text(0.5, 0.5, "no figures (see notes)", ha="center", va="center")
        ax.set_axis_off()
        return
    names = unique(name for variant in variants for name in found.samples[variant])
    width = 0.8 / len(names)
    for index, name in enumerate(names):
        offset = (index - (len(names) - 1) / 2) * width
        for position, variant in enumerate(variants):
            values = found.samples[variant].get(name)
            if not values:
                continue
            x = position + offset
            median = statistics.median(values)
            ax.bar(x, median, width, color=COLORS.get(name, "tab:olive"), label=name)
            ax.plot([x] * len(values), values, "k.", markersize=3)
    ax.set_xticks(range(len(variants)), variants)
    ax.set_ylabel(found.unit)
    medians = [v for variant in variants for v in found.medians(variant).values()]
    if min(medians) > 0 and max(medians) > LOG_SCALE_SPREAD * min(medians):
        ax.set_yscale("log")
    handles, labels = ax.get_legend_handles_labels()
    by_label = dict(zip(labels, handles))
    ax.legend(by_label.values(), by_label.keys(), fontsize=8)
