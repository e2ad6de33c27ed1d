"""The final table on stdout, and the JSON file with every figure and the run's circumstances."""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import shlex
import statistics
import sys
from collections.abc import Sequence
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks.config import Sizes
from benchmarks.measures import Measure
from benchmarks.results import Measurement, Row

Result = tuple[Measure, Measurement]

HEADER = ("measure", "PE", "TPE", "other anchors", "ratio", "target", "met?")
VERDICTS = {True: "yes", False: "NO", None: "n/a"}
"""How ``Row.met`` reads; a row without a target reads "-" instead."""
PACKAGES = ("priority_executor", "APScheduler", "matplotlib", "distributed")


def table(results: Sequence[Result]) -> str:
    """One table of every measure's rows, aligned, followed by the measures' notes."""
    lines: list[tuple[str, ...]] = [HEADER]
    lines += [_cells(measure, row) for measure, found in results for row in measure.judge(found)]
    widths = [max(len(line[column]) for line in lines) for column in range(len(HEADER))]
    rendered = [" | ".join(map(str.ljust, line, widths)).rstrip() for line in lines]
    rendered.insert(1, "-+-".join("-" * width for width in widths))
    notes = [f"  {measure.number}. {note}" for measure, found in results for note in found.notes]
    return "\n".join([*rendered, "", "notes:", *notes])


def write_json(path: Path, results: Sequence[Result], meta: dict[str, Any]) -> None:
    """Every repetition's figure and the medians, by measure, variant and series, with ``meta``."""
    document = {"meta": meta, "measures": [_measure_json(*result) for result in results]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def environment(sizes: Sizes, *, quick: bool, started: datetime, seconds: float) -> dict[str, Any]:
    """What the figures depend on besides the code: interpreter, machine, date, command, sizes."""
    return {
        "python": sys.version,
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "date": started.isoformat(timespec="seconds"),
        "duration_s": round(seconds, 1),
        "command": shlex.join(getattr(sys, "orig_argv", sys.argv)),
        "mode": "quick" if quick else "full",
        "sizes": dataclasses.asdict(sizes),
        "packages": {name: _version(name) for name in PACKAGES},
    }


def _cells(measure: Measure, row: Row) -> tuple[str, ...]:
    label = f"{measure.number}. {measure.title}" + (f", {row.measure}" if row.measure else "")
    verdict = VERDICTS[row.met] if row.target != "-" else "-"
    return (label, row.pe, row.tpe, row.others, row.ratio, row.target, verdict)


def _measure_json(measure: Measure, found: Measurement) -> dict[str, Any]:
    return {
        "number": measure.number,
        "key": measure.key,
        "title": measure.title,
        "unit": found.unit,
        "parameters": found.parameters,
        "notes": found.notes,
        "samples": {
            variant: {
                name: {"raw": values, "median": statistics.median(values)}
                for name, values in series.items()
            }
            for variant, series in found.samples.items()
        },
        "rows": [dataclasses.asdict(row) for row in measure.judge(found)],
    }


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None
