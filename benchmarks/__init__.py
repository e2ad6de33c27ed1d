"""Benchmarks of ``priority_executor`` against the executors and schedulers it replaces.

Run ``python -m benchmarks`` from the repository root (``--quick`` for a run under a minute,
``--help`` for the rest). Every measure runs its contenders side by side in one process, with
interleaved repetitions (A, B, C, A, B, C, ...) so that the machine's drift hits all of them
alike, and reports medians: the numbers are meant to be read as ratios between contenders.

Modules, one idea each:

- ``config``: how much work a full and a ``--quick`` run do.
- ``pools`` and ``schedulers``: the contenders (anchors) for immediate and delayed work.
- ``busywork``: the CPU-bound task, which other processes import by name.
- ``runner``: interleaved repetitions, progress lines, soft failure, memory and GC helpers.
- ``measures``: the twenty-seven measures, each with its target (if it has one).
- ``results``, ``report`` and ``plot``: the figures, the table, the JSON and the PNG.
- ``profiling``: the no-op throughput measure under cProfile, to tune the hot path.
"""
