"""What a case's schedule does to the outermost loop of the node it schedules, for
selectors (``scheduled_ops``, ``lead_trips``). No XTC, no pytest."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_xtc.core.cases import graphs
from pytest_xtc.core.cases.case import Case


def scheduled_node(case: Case, found: Sequence[graphs.Node]) -> graphs.Node:
    """The node of ``found`` (the graph's, not empty) the schedule's main steps schedule:
    the one it names, else XTC's default, the last."""
    return next((n for n in found if case.schedule.node in (n.name, n.uid)), found[-1])


def lead_loop(case: Case, known: Mapping[str, graphs.Operand]) -> tuple[str, int]:
    """The op of the node the schedule's main steps schedule (XTC's default: the last)
    and the iterations of its outermost loop over its result's leading dimension after
    the first tile the schedule gives that loop. The outermost loop: the op's first
    declared loop, else (an op declaring none, e.g. relu and its one loop) the loop of
    the first tile."""
    found = graphs.nodes(case.graph)
    if not found:
        return "", 0
    schedule = case.schedule
    node = scheduled_node(case, found)
    shape = known[node.uid].shape
    loop = node.op.loops[0] if node.op.loops else None
    spec = schedule.descript.spec if schedule.descript is not None else None
    tiles: list[tuple[str, Any]] = []
    if isinstance(spec, Mapping):  # a description first: "i#16" tiles loop i by 16
        tiles += [(str(k).split("#")[0], str(k).split("#")[-1]) for k in spec if "#" in str(k)]
    tiles += [(str(args[0]), next(iter(args[1].values()))) for primitive, args in schedule.steps
              if primitive == "tile" and len(args) > 1 and isinstance(args[1], Mapping)
              and args[1]]
    sizes = [int(t) for d, t in tiles if (loop is None or d == loop) and str(t).isdigit()]
    lead = shape[0] if shape else 1
    return node.op.name, math.ceil(lead / sizes[0]) if sizes and sizes[0] > 0 else lead
