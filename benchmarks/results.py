"""What a measure found (raw figures by variant and series) and the table rows that judge it."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Callable

Samples = dict[str, dict[str, list[float]]]
"""variant (``"4 workers"``, ``"p99"``) -> series (``"PE"``, ``"TPE"``) -> figure per repetition."""

PE = "PE"
TPE = "TPE"
"""The two series that have a column of their own in the table; every other one is an anchor."""
BASELINE = "PE@"
"""How the series of PE at an earlier revision begin (``PE@e54e111``, from ``--baseline``)."""
TOLERANCE = 0.05
"""How much worse than at a baseline revision PE may be for its row to read "yes"."""


@dataclass
class Measurement:
    """The raw figures of one measure, in one unit, with how they were obtained.

    ``parameters`` are the sizes the measure ran with, by name, as the JSON records them.
    """

    unit: str
    samples: Samples = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    parameters: Mapping[str, float] = field(default_factory=dict)

    def medians(self, variant: str) -> dict[str, float]:
        """The median over repetitions of every series of ``variant``."""
        series = self.samples.get(variant, {})
        return {name: statistics.median(values) for name, values in series.items()}

    def format(self, value: float | None) -> str:
        """``value`` in this measurement's unit, for the table."""
        return format_value(value, self.unit)


@dataclass(frozen=True)
class Row:
    """One line of the final table; ``met`` is None when a figure it needs is missing."""

    measure: str
    pe: str
    tpe: str
    others: str
    ratio: str
    target: str
    met: bool | None


Verdict = Callable[[Mapping[str, float]], bool]
"""Decides from the medians by series whether a target is met; a KeyError means "unknown"."""


def anchor_row(
    measurement: Measurement,
    variant: str,
    *,
    label: str,
    baseline: str | None,
    target: str = "",
    verdict: Verdict | None = None,
) -> Row:
    """The usual row: PE, TPE and the other anchors side by side, PE's ratio to ``baseline``.

    ``baseline`` None leaves the ratio out (a measure with no anchor to compare with).
    """
    medians = measurement.medians(variant)
    others = ", ".join(
        f"{name} {measurement.format(value)}"
        for name, value in medians.items()
        if name not in (PE, TPE)
    )
    pe = medians.get(PE)
    base = medians.get(baseline) if baseline else None
    if baseline is None:
        ratio = "-"
    elif pe is not None and base:
        ratio = f"{pe / base:.2f}x {baseline}"
    else:
        ratio = "n/a"
    return Row(
        measure=label,
        pe=measurement.format(pe),
        tpe=measurement.format(medians.get(TPE)),
        others=others or "-",
        ratio=ratio,
        target=target or "-",
        met=judge(verdict, medians),
    )


def baseline_rows(
    measurement: Measurement, variant: str, *, label: str, higher_is_better: bool
) -> list[Row]:
    """A row per baseline revision of PE in ``variant``: PE's ratio to it, and its own to TPE.

    The target is what a baseline is there to check: PE no more than TOLERANCE worse than it.
    """
    medians = measurement.medians(variant)
    pe, tpe = medians.get(PE), medians.get(TPE)
    rows = []
    for name, old in medians.items():
        if not name.startswith(BASELINE):
            continue
        if higher_is_better:
            target = f"PE >= {1 - TOLERANCE:.2f}x {name}"
            met = None if pe is None else pe >= (1 - TOLERANCE) * old
        else:
            target = f"PE <= {1 + TOLERANCE:.2f}x {name}"
            met = None if pe is None else pe <= (1 + TOLERANCE) * old
        versus_tpe = f" = {old / tpe:.2f}x {TPE}" if tpe else ""
        rows.append(
            Row(
                measure=f"{label}, PE vs {name}",
                pe=measurement.format(pe),
                tpe=measurement.format(tpe),
                others=f"{name} {measurement.format(old)}{versus_tpe}",
                ratio=f"{pe / old:.2f}x {name}" if pe is not None and old else "n/a",
                target=target,
                met=met,
            )
        )
    return rows


def with_series(measurement: Measurement, names: Mapping[str, str]) -> Measurement:
    """A view of ``measurement`` with only the series in ``names``, renamed to their values."""
    samples = {
        variant: {names[name]: values for name, values in series.items() if name in names}
        for variant, series in measurement.samples.items()
    }
    return Measurement(measurement.unit, samples, measurement.notes, measurement.parameters)


def judge(verdict: Verdict | None, medians: Mapping[str, float]) -> bool | None:
    """Apply ``verdict``; None when there is none or a figure it needs is missing."""
    if verdict is None:
        return None
    try:
        return verdict(medians)
    except KeyError:
        return None


def percentile(values: Sequence[float], percent: float) -> float:
    """The ``percent``-th percentile of ``values``, interpolating between closest ranks."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * percent / 100
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def format_value(value: float | None, unit: str) -> str:
    """A figure with its unit, three significant digits or so; "n/a" when missing."""
    if value is None:
        return "n/a"
    if unit == "tasks/s":
        return f"{value / 1000:,.1f}k/s"
    if unit == "bytes":
        return format_bytes(value)
    return f"{format_number(value)} {unit}"


def format_number(value: float) -> str:
    """``1,234`` or ``45.2`` or ``0.00213``: enough digits to compare, no more."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def format_bytes(value: float) -> str:
    """``812 B``, ``48.2 KiB``, ``1.21 MiB``."""
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(value) >= size:
            return f"{value / size:.3g} {unit}"
    return f"{value:.0f} B"
