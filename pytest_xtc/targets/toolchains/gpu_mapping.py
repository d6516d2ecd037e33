"""What the nvgpu adapter adds to a case's schedule so that XTC makes a GPU kernel: one
``parallelize`` step on the scheduled node's outermost parallel loop of more than one
iteration (XTC maps parallelized loops to the GPU and folds one-iteration loops away)."""

from __future__ import annotations

import math
from typing import Any

from pytest_xtc.core.cases.case import Case
from pytest_xtc.core.xtc import xtc_env


class NoGpuKernel(RuntimeError):
    """The schedule leaves no loop that XTC could map to the GPU."""


def gpu_steps(graph: Any, backend: Any, case: Case) -> list[tuple[str, tuple[Any, ...]]]:
    """The ``parallelize`` step that gives the scheduled node a GPU kernel: on its outermost
    parallel loop of more than one iteration, unless the schedule already parallelizes one.

    XTC maps parallelized loops to the GPU; a one-iteration loop is folded away.
    """
    scheduler = xtc_env.new_scheduler(backend, case)
    xtc_env.apply_schedule(scheduler, case)
    nest = scheduler.get_loop_nest().root_node
    sizes: dict[str, int] = dict(backend.nodes[nest.root].dims)
    parallel = _parallel_dims(graph, nest.root, list(sizes))
    extents: dict[str, int] = {}  # loop -> its trip count
    owner: dict[str, str] = {}  # loop -> the dimension it iterates
    for dim, size in sizes.items():
        chain = [(dim, size), *nest.tiles.get(dim, {}).items()]
        spans = [size]
        for _, tile in chain[1:]:
            spans.append(min(tile, spans[-1]))
        for i, (loop, _) in enumerate(chain):
            owner[loop] = dim
            extents[loop] = math.ceil(spans[i] / spans[i + 1]) if i + 1 < len(spans) else spans[i]
    if any(extents.get(loop, 0) > 1 for loop in nest.parallelize):
        return []
    for loop in nest.interchange:
        if (owner.get(loop) in parallel and extents[loop] > 1 and loop not in nest.parallelize
                and loop not in nest.vectorize and loop not in nest.unroll):
            return [("parallelize", ([loop],))]
    trips = ", ".join(f"{loop}={extents.get(loop, 0)}" for loop in nest.interchange)
    raise NoGpuKernel(f"node {nest.root}: no parallel loop of more than one iteration "
                      f"(trip counts {trips}); XTC folds one-iteration loops, no GPU kernel")


def _parallel_dims(graph: Any, node_name: str, loop_dims: list[str]) -> set[str]:
    """The node's parallel loop dimensions, from the graph operation's kinds (matched by
    position: XTC's MLIR node may name them differently, e.g. i, j for pad's d0, d1)."""
    graph_node = next(n for n in graph.nodes.values() if n.name == node_name)
    operation = graph_node.operation
    op_dims = list(operation.dims)
    parallel = set(operation.dims_kind("P"))
    if len(op_dims) != len(loop_dims):
        return parallel & set(loop_dims)
    return {loop for loop, dim in zip(loop_dims, op_dims, strict=True) if dim in parallel}
