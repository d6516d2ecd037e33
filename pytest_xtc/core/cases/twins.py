"""Attribute-only twins: cases whose graphs differ only in their ops' attributes. No pytest.

A kernel cache keyed without attributes (the ops, the shapes, the schedule) serves one
twin the other's kernel: each twin case is run right after its twin, on the same worker
(``Case.twin``; the runner runs the twin first, its verdict not this case's business).
User case files may hold such twins: their ids are told apart by the attributes that
differ (:func:`distinguish`), never refused as "defined twice".
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

#: A ``core.cases.case.Case`` (that module imports this one: typed loosely, no circle).
Case = Any


def _bare(graph: dict[str, Any]) -> dict[str, Any]:
    """The graph with every attribute's value dropped (its name kept); ``graph`` untouched
    (shallow copies along the way to each op, not a deep copy)."""
    nodes = []
    for node in graph.get("nodes", ()):
        expr = node["expr"]
        op = {**expr["op"], "attrs": sorted(expr["op"].get("attrs") or {})}
        nodes.append({**node, "expr": {**expr, "op": op}})
    return {**graph, "nodes": nodes}


def structure(case: Case) -> str:
    """What a kernel cache keyed without attributes would see of ``case``."""
    return json.dumps([_bare(case.graph), case.dtype, case.schedule.name,
                       repr(case.schedule)], sort_keys=True, default=str)


def pair(cases: Sequence[Case]) -> list[Case]:
    """``cases`` with each twin case's ``twin`` set: in a group of cases of one structure
    and different graphs, each case's twin is the next one with another graph (a ring)."""
    groups: dict[str, list[int]] = defaultdict(list)
    for n, case in enumerate(cases):
        groups[structure(case)].append(n)
    found = list(cases)
    for members in groups.values():
        distinct = {json.dumps(cases[n].graph, sort_keys=True, default=str) for n in members}
        if len(distinct) < 2:
            continue
        for at, n in enumerate(members):
            ring = [cases[m] for m in members[at + 1 :] + members[:at]]
            other = next(c for c in ring if c.graph != cases[n].graph)
            found[n] = replace(cases[n], twin=replace(other, twin=None))
    return found


def _attributes(graph: dict[str, Any]) -> dict[str, Any]:
    """``node.attribute`` -> value, over the graph's nodes."""
    return {f"{node.get('name') or n}.{key}": value
            for n, node in enumerate(graph.get("nodes", ()))
            for key, value in sorted((node["expr"]["op"].get("attrs") or {}).items())}


def _shown(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return "".join(c for c in text if c not in '{}[]" ').replace(",", "_")


def distinguish(cases: Sequence[Case]) -> list[Case]:
    """``cases`` where two share an id and their graphs differ only in attributes: each
    such case's id carries the attributes that differ in its group (``-P.padding=1:0_1``,
    in its shape label); other cases as they were."""
    groups: dict[str, list[int]] = defaultdict(list)
    for n, case in enumerate(cases):
        groups[case.id].append(n)
    found = list(cases)
    for members in groups.values():
        if len(members) < 2:
            continue
        attrs = [_attributes(cases[n].graph) for n in members]
        keys = sorted(set().union(*attrs))
        differ = [k for k in keys if len({_shown(a.get(k)) for a in attrs}) > 1]
        if not differ or len({structure(cases[n]) for n in members}) > 1:
            continue  # the same graph twice, or graphs that differ in more: left to refuse
        for n, mine in zip(members, attrs, strict=True):
            tag = "-".join(f"{k}={_shown(mine.get(k))}" for k in differ)
            found[n] = replace(cases[n], shape=f"{cases[n].shape}-{tag}")
    return found
