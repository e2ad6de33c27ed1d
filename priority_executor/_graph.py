"""Graphs: a ``graphlib`` graph of nodes and their predecessors, submitted whole as tasks
that wait for their predecessors' (see ``_dependencies``)."""

from __future__ import annotations

import functools
from collections.abc import Hashable, Iterable, Mapping
from concurrent.futures import Future
from graphlib import TopologicalSorter
from typing import Callable, TypeVar

from ._submitting import Executor, WithOptions

N = TypeVar("N", bound=Hashable)
T = TypeVar("T")


def submit_graph(
    executor: Executor,
    graph: Mapping[N, Iterable[N]],
    fn: Callable[[N, dict[N, T]], T],
) -> dict[N, Future[T]]:
    """Submit one task per node of ``graph``, a mapping of each node to its predecessors
    (as ``graphlib.TopologicalSorter`` takes it; a node named only as a predecessor is a
    node too), each after its predecessors' tasks: ``fn(node, inputs)``, ``inputs`` being
    the predecessors' results by node. Returns each node's future.

    A cycle raises ``graphlib.CycleError`` before anything is submitted. A predecessor that
    fails ends its successors with ``DependencyFailed``, transitively. Should a submit
    raise (a shutdown meanwhile), the tasks this call submitted are cancelled and the
    exception is raised: the graph runs whole or not at all."""
    if isinstance(executor, WithOptions):
        raise TypeError(
            "executor must be a PriorityExecutor or a Lane, not an options() view: the"
            " graph's tasks take their own after="
        )
    if not callable(fn):
        raise TypeError(f"fn must be a callable, not {type(fn).__name__}")
    if not isinstance(graph, Mapping):
        raise TypeError(
            f"graph must be a mapping of node to predecessors, not {type(graph).__name__}"
        )
    predecessors = {node: tuple(before) for node, before in graph.items()}
    order = tuple(TopologicalSorter(predecessors).static_order())  # CycleError: nothing submitted
    futures: dict[N, Future[T]] = {}
    try:
        for node in order:
            inputs = tuple((before, futures[before]) for before in predecessors.get(node, ()))
            after = [future for _, future in inputs]
            futures[node] = executor.options(after=after).submit(_node_call(fn, node, inputs))
    except BaseException:
        for future in futures.values():
            future.cancel()
        raise
    return futures


def _node_call(
    fn: Callable[[N, dict[N, T]], T], node: N, inputs: tuple[tuple[N, Future[T]], ...]
) -> Callable[[], T]:
    def call() -> T:
        # Every predecessor succeeded, else this never started: no result() waits.
        return fn(node, {before: future.result() for before, future in inputs})

    return functools.update_wrapper(call, fn)  # named as fn in logs and messages
