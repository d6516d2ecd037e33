"""Twins: cases whose graphs differ in one thing a kernel cache might leave out of its key
(the ops' attributes, the dtype, the operands' shapes). No pytest.

A kernel cache keyed without that thing serves one twin the other's kernel: each twin
case is run right after its twin, in the same worker (``Case.twin``). Twins come in
disjoint pairs, the first of a pair never a twin itself: ordered so that the second
follows the first (:func:`adjacent`), the second runs in the first's own worker, kept for
it, and the check costs no run of its own; elsewhere the runner runs the twin first, its
verdict not this case's business. Every case of an attribute-only group is in a pair;
dtype-only and shape-only twins, of which the catalog has many, pair one case per family
each (its cheapest group). User case files may hold attribute-only twins: their ids are
told apart by the attributes that differ (:func:`distinguish`), never refused as
"defined twice".
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from math import prod
from typing import Any

from pytest_xtc.core.cases.graphs import canonical

#: A ``core.cases.case.Case`` (that module imports this one: typed loosely, no circle).
Case = Any

#: What a faulty cache may leave out of its key, in the order twins are given.
LEFT_OUT = ("attributes", "dtype", "shapes")


def _bare(graph: dict[str, Any], left_out: str) -> dict[str, Any]:
    """The graph without what ``left_out`` names (attribute values, dtypes, shapes: the
    attributes' names and everything else kept); ``graph`` untouched (shallow copies
    along the way, not a deep copy)."""
    if left_out == "attributes":
        nodes = []
        for node in graph.get("nodes", ()):
            expr = node["expr"]
            op = {**expr["op"], "attrs": sorted(expr["op"].get("attrs") or {})}
            nodes.append({**node, "expr": {**expr, "op": op}})
        return {**graph, "nodes": nodes}
    if left_out not in LEFT_OUT:
        raise ValueError(f"twins: {left_out!r} is not one of {', '.join(LEFT_OUT)}")
    dropped = "dtype" if left_out == "dtype" else "shape"
    inputs = [{**tensor, "expr": {**tensor["expr"], "type": {
        k: v for k, v in tensor["expr"]["type"].items() if k != dropped}}}
        for tensor in graph.get("inputs", ())]
    return {**graph, "inputs": inputs}


def structure(case: Case, left_out: str = "attributes") -> str:
    """What a kernel cache keyed without ``left_out`` (one of :data:`LEFT_OUT`) would see
    of ``case``: the graph without it, the dtype (unless left out) and the schedule."""
    dtype = None if left_out == "dtype" else case.dtype
    return json.dumps([_bare(case.graph, left_out), dtype, case.schedule.name,
                       repr(case.schedule)], sort_keys=True, default=str)


def _graph(case: Case) -> str:
    return canonical(case.graph)


def _cost(case: Case, dtypes: Sequence[str]) -> tuple[bool, int, int]:
    """Which twins are chosen first: random inputs, the earlier dtype (the catalog's first,
    float32, is the one every target runs), then the fewest input elements."""
    size = sum(prod(t["expr"]["type"].get("shape") or [1]) for t in case.graph.get("inputs", ()))
    return case.values != "random", dtypes.index(case.dtype), size


def _groups(cases: Sequence[Case], graphs: Sequence[str], left_out: str,
            among: Sequence[int]) -> list[list[int]]:
    """Indices (of ``among``) of cases that one key without ``left_out`` confuses: each
    group holds at least two different graphs (``graphs``: each case's, serialized)."""
    groups: dict[str, list[int]] = defaultdict(list)
    for n in among:
        groups[structure(cases[n], left_out)].append(n)
    return [members for members in groups.values()
            if len({graphs[n] for n in members}) > 1]


def pair(cases: Sequence[Case], also: Sequence[str] = ()) -> list[Case]:
    """``cases`` with twins set, in disjoint pairs: in each group of cases that differ
    only in attributes, each case in turn is the twin of the earliest one still alone
    with another graph, or else waits for one (one left over: the twin of the group's
    first); then, for each other thing ``also`` names (the catalog: dtype and shapes), in
    each family, one case in no pair yet gets a twin in no pair yet, differing only in it
    (from the group whose two first members cost least, :func:`_cost`)."""
    found = list(cases)
    graphs = [_graph(case) for case in cases]
    sources: set[int] = set()  # the first of a pair: run before its twin, never a twin
    first_of: dict[int, int] = {}

    def join(n: int, source: int) -> None:
        found[n] = replace(cases[n], twin=replace(cases[source], twin=None))
        sources.add(source)
        first_of[n] = source

    def turn(m: int) -> int:
        """Make twin ``m`` the first of its pair (its first, of no other pair, its twin)."""
        source = first_of.pop(m)
        if sum(f == source for f in first_of.values()):
            return source  # the first of other pairs too: left as it is
        found[m] = cases[m]
        sources.discard(source)
        join(source, m)
        return m

    for members in _groups(cases, graphs, "attributes", range(len(cases))):
        alone: list[int] = []
        for n in members:
            partner = next((m for m in alone if graphs[m] != graphs[n]), None)
            if partner is None:
                alone.append(n)
            else:
                alone.remove(partner)
                join(n, partner)
        for n in alone:  # a source if one has another graph, else a twin made a source
            others = [m for m in members if m != n and graphs[m] != graphs[n]]
            partner = next((m for m in others if found[m].twin is None and m not in alone),
                           None)
            if partner is None:
                partner = turn(others[0]) if others[0] in first_of else others[0]
            join(n, partner)
    families: dict[str, list[int]] = defaultdict(list)
    for n, case in enumerate(cases):
        families[case.op].append(n)
    dtypes = list(dict.fromkeys(case.dtype for case in cases))
    for kind in also:
        for members in families.values():
            free = [n for n in members if found[n].twin is None and n not in sources]
            groups = [sorted(g, key=lambda n: (_cost(cases[n], dtypes), n))
                      for g in _groups(cases, graphs, kind, free)]
            if groups:  # sorted: a group's second member costs the most of its first two
                first, *rest = min(groups, key=lambda g: (_cost(cases[g[1]], dtypes), g[0]))
                join(next(n for n in rest if graphs[n] != graphs[first]), first)
    return found


def adjacent(cases: Sequence[Case]) -> list[Case]:
    """``cases``, each twin moved right after its own twin where that one is among them
    and runs no twin first itself (one twin each): the twin then runs in the worker its
    twin's own run kept, instead of running its twin again first."""
    by_id = {case.id: case for case in cases}
    follower: dict[str, Case] = {}
    for case in cases:
        first = by_id.get(case.twin.id) if case.twin is not None else None
        if first is not None and first.twin is None and first.id not in follower:
            follower[first.id] = case
    moved = {id(case) for case in follower.values()}
    ordered: list[Case] = []
    for case in cases:
        if id(case) not in moved:
            ordered.append(case)
            if case.id in follower:
                ordered.append(follower[case.id])
    return ordered


def follows(case: Case, after: Case | None) -> bool:
    """Whether ``after``, the case that runs next on the same worker, is ``case``'s twin
    and can run in the worker ``case``'s own run keeps (``case`` runs no twin first)."""
    return (after is not None and after.twin is not None and case.twin is None
            and after.twin.id == case.id)


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
