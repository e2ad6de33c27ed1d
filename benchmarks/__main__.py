"""``python -m benchmarks``: run the measures, print the table, write the JSON and the PNG."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from contextlib import ExitStack
from datetime import datetime, timezone
from pathlib import Path

from benchmarks import plot, report
from benchmarks.baseline import compared
from benchmarks.config import FULL, QUICK
from benchmarks.measures import MEASURES, groups, perform_all, select
from benchmarks.profiling import profile_throughput

HERE = Path(__file__).resolve().parent
# The figures the README and docs/performance.md quote: only a full run replaces them.
COMMITTED_JSON = HERE / "results.json"
COMMITTED_PLOT = HERE / "results.png"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line; see ``--help``."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Benchmark PriorityExecutor against ThreadPoolExecutor, a bare handoff "
        "floor, sched + pool, threading.Timer and APScheduler.",
    )
    parser.add_argument(
        "--quick", action="store_true", help="smaller sizes, still 5 repetitions (under a minute)"
    )
    parser.add_argument(
        "--only",
        type=lambda text: [name.strip() for name in text.split(",") if name.strip()],
        default=[],
        metavar="NAME[,NAME]",
        help="run these measures only: "
        + ", ".join(f"{m.key} ({m.number})" for m in MEASURES)
        + "; or a group of them: "
        + ", ".join(groups()),
    )
    parser.add_argument(
        "--json",
        type=Path,
        help="where to write every figure (default for a full run: "
        f"benchmarks/{COMMITTED_JSON.name}; a --quick or --only run writes none unless given)",
    )
    parser.add_argument(
        "--plot",
        type=Path,
        help="where to draw the figures (default for a full run: "
        f"benchmarks/{COMMITTED_PLOT.name}; a --quick or --only run draws none unless given)",
    )
    parser.add_argument(
        "--baseline",
        action="append",
        default=[],
        metavar="REV",
        help="also measure priority_executor as it was at git revision REV, as the contender "
        "PE@REV, interleaved with the others in measures 1-3 and 11 (the others skip it); "
        "repeatable",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="instead: run measure 1 for PE under cProfile, print the top 25 by tottime",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the selected measures; the exit status is 0 whether or not the targets are met."""
    args = parse_args(argv)
    sizes = QUICK if args.quick else FULL
    if args.profile:
        profile_throughput(sizes)
        return 0
    try:
        measures = select(args.only)
    except ValueError as exc:
        print(f"python -m benchmarks: {exc}", file=sys.stderr)
        return 2
    with ExitStack() as stack:
        baselines = {}
        for rev in dict.fromkeys(args.baseline):
            try:
                baselines[rev] = stack.enter_context(compared(rev))
            except ValueError as exc:
                print(f"python -m benchmarks: --baseline {rev}: {exc}", file=sys.stderr)
                return 2
        started, clock = datetime.now(timezone.utc), time.perf_counter()
        results = perform_all(measures, sizes)
        seconds = time.perf_counter() - clock
    print(report.table(results))
    full_run = not args.quick and not args.only
    json_path = args.json or (COMMITTED_JSON if full_run else None)
    plot_path = args.plot or (COMMITTED_PLOT if full_run else None)
    if json_path is None:
        print(f"{seconds:.0f} s; no figures written (--json PATH writes them)", file=sys.stderr)
    else:
        meta = report.environment(sizes, quick=args.quick, started=started, seconds=seconds)
        if baselines:
            meta["baselines"] = {f"PE@{rev}": commit for rev, commit in baselines.items()}
        report.write_json(json_path, results, meta)
        print(f"{seconds:.0f} s; figures written to {json_path}", file=sys.stderr)
    if plot_path is not None:
        try:
            plot.draw(results, plot_path)
        except ImportError as exc:
            print(f"plot skipped, matplotlib is missing: {exc}", file=sys.stderr)
        else:
            print(f"plot drawn to {plot_path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
