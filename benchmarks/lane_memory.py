"""Memory of named lanes made with options, which an executor keeps until their shutdown:
``python benchmarks/lane_memory.py [count]`` (default 10,000) prints the bytes per lane, as
tracemalloc counts them, for an idle lane and for one that has run a task."""

from __future__ import annotations

import gc
import sys
import tracemalloc

from priority_executor import PriorityExecutor


def bytes_per_lane(count: int, *, used: bool) -> float:
    with PriorityExecutor(2) as ex:
        ex.lane("warm-up", max_running=1, max_starts=10, per=1.0).submit(int).result()
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for i in range(count):
            lane = ex.lane(f"customer-{i}", max_running=1, max_starts=10, per=1.0)
            if used:
                lane.submit(int).result()
        del lane
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        assert len(ex.lanes()) == count + 1
        return (after - before) / count


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    print(f"Python {sys.version.split()[0]}, {count:,} lanes made with options:")
    for used in (False, True):
        what = "after one task each" if used else "never used"
        print(f"  {what:<20} {bytes_per_lane(count, used=used):6.0f} bytes per lane")


if __name__ == "__main__":
    main()
