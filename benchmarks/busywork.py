"""The CPU-bound task of measure 10, in a module of its own.

Process-pool and Dask workers import the task by name, so it lives where importing it pulls
in nothing else: neither the harness nor the executor under test.
"""

from __future__ import annotations


def spin(loops: int) -> int:
    """Pure-Python arithmetic for ``loops`` iterations: it holds the GIL all along."""
    total = 0
    for i in range(loops):
        total += i * i % 7
    return total
