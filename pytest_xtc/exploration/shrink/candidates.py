"""Smaller candidates of a failing case, in the fixed order shrinking tries them: fewer
graph nodes, fewer schedule steps, smaller input dimensions (every shape re-derived
through the op registry; invalid graphs never tried, factors clamped to the new sizes),
smaller factors. No pytest."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from pytest_xtc.core.cases import graphs
from pytest_xtc.core.cases.case import Case, Schedule
from pytest_xtc.core.cases.graphs import GraphDict
from pytest_xtc.exploration.shrink.casefile import State
from pytest_xtc.exploration.shrink.steps import clamp_factors, drop_step, factor_candidates


def _valid(graph: GraphDict) -> bool:
    """The op registry takes the graph and every operand has a size above 0."""
    try:
        known = graphs.operands(graph)
    except Exception:
        return False
    return all(all(isinstance(d, int) and d > 0 for d in o.shape) for o in known.values())


def _with_input_dims(graph: GraphDict, changes: Mapping[tuple[int, int], int]) -> GraphDict:
    graph = copy.deepcopy(graph)
    for (i, axis), value in changes.items():
        graph["inputs"][i]["expr"]["type"]["shape"][axis] = value
    return graph


def shape_candidates(graph: GraphDict) -> Iterator[GraphDict]:
    """Smaller graphs: each input dimension halved, then decremented; alone, or with
    every input dimension of the same size (dimensions the shape rules tie together)."""
    dims = [(i, a, d) for i, o in enumerate(graphs.inputs(graph)) for a, d in enumerate(o.shape)]
    for i, axis, size in dims:
        for value in dict.fromkeys((size // 2, size - 1)):
            if value < 1 or value >= size:
                continue
            alone = _with_input_dims(graph, {(i, axis): value})
            if _valid(alone):
                yield alone
                continue
            tied = _with_input_dims(graph, {(j, b): value for j, b, d in dims if d == size})
            if _valid(tied):
                yield tied


def node_candidates(graph: GraphDict, schedule: Schedule) -> Iterator[tuple[GraphDict, Schedule]]:
    """Graphs of fewer nodes: an earlier node made the output (later nodes dropped), or a
    node that is not the output made an input of its shape (with what only fed it)."""
    nodes = graph["nodes"]
    if len(nodes) < 2:
        return
    known = graphs.operands(graph)
    for k in range(len(nodes) - 2, -1, -1):  # truncate after node k
        kept = copy.deepcopy(nodes[: k + 1])
        cut = _prune({**graph, "nodes": kept, "outputs": [{"uid": kept[-1]["uid"]}]})
        yield cut, _drop_node(schedule, {n.get("name") for n in nodes[k + 1:]})
    out_uids = {o["uid"] for o in graph["outputs"]}
    for node in nodes:  # make one node an input
        if node["uid"] in out_uids:
            continue
        operand = known[node["uid"]]
        entry = {"uid": node["uid"], "name": operand.name,
                 "expr": {"type": {"shape": list(operand.shape), "dtype": operand.dtype}}}
        rest = [copy.deepcopy(n) for n in nodes if n["uid"] != node["uid"]]
        cut = _prune({**graph, "inputs": [*copy.deepcopy(graph["inputs"]), entry],
                      "nodes": rest})
        yield cut, _drop_node(schedule, {node.get("name")})


def _prune(graph: GraphDict) -> GraphDict:
    """Drop the nodes and inputs nothing reaches the outputs through; inputs keep order."""
    needed = {o["uid"] for o in graph["outputs"]}
    for node in reversed(graph["nodes"]):
        if node["uid"] in needed:
            needed |= set(node["expr"]["args"])
    graph = dict(graph)
    graph["nodes"] = [n for n in graph["nodes"] if n["uid"] in needed]
    inputs = [i for i in graph["inputs"] if i["uid"] in needed]
    # Inputs come first in a graph dump: a node made an input moves before the nodes.
    graph["inputs"] = inputs
    return graph


def _drop_node(schedule: Schedule, gone: set[Any]) -> Schedule:
    return replace(schedule, node=None) if schedule.node in gone else schedule


def _dim_sizes(state: State, case: Case) -> dict[str, int]:
    """The scheduled node's dimensions and sizes, from XTC's backend ({} if unknown)."""
    try:
        from pytest_xtc.core.xtc import xtc_env

        probe = replace(case, graph=state.graph, schedule=state.schedule, placement=None)
        backend = xtc_env.import_mlir_backend().Backend(xtc_env.build_graph(probe))
        scheduler = xtc_env.new_scheduler(backend, probe)
        root = scheduler.get_loop_nest().root_node.root
        return {str(k): int(v) for k, v in dict(backend.nodes[root].dims).items()}
    except Exception:
        return {}


def candidates(state: State, case: Case) -> Iterator[State]:
    """Every smaller candidate of ``state``, in the fixed order tried."""
    for graph, schedule in node_candidates(state.graph, state.schedule):
        if _valid(graph):
            yield State(graph, schedule)
    steps = state.schedule.steps
    for index in range(len(steps) - 1, -1, -1):
        yield State(state.graph, replace(state.schedule, steps=drop_step(steps, index)))
    for graph in shape_candidates(state.graph):
        smaller = State(graph, state.schedule)
        clamped = clamp_factors(steps, _dim_sizes(smaller, case))
        if clamped is not None:
            yield State(graph, replace(state.schedule, steps=clamped))
    for fewer in factor_candidates(steps):
        yield State(state.graph, replace(state.schedule, steps=fewer))
