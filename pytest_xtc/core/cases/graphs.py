"""Graphs in XTC's own YAML serialization (``Graph.to_dict``), built without importing XTC.

A graph dict has ``inputs`` (``uid`` and ``expr.type`` with ``shape`` and ``dtype``),
``nodes`` (``name``, ``uid``, ``expr.op.name``, ``expr.op.attrs``, ``expr.args``) and
``outputs`` (``uid``). We add an optional ``name`` to each input so that placements and
messages can say ``A`` instead of ``%0``; XTC's own dumps have none, and get ``in0``...
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pytest_xtc import ops
from pytest_xtc.ops.builder import GraphDict, Operand
from pytest_xtc.ops.spec import Attrs, Op


def inputs(graph: GraphDict) -> list[Operand]:
    """The graph's inputs, named ``in0``... where the dump has no names."""
    return [
        Operand(
            entry.get("name") or f"in{i}",
            entry["uid"],
            tuple(entry["expr"]["type"]["shape"]),
            entry["expr"]["type"]["dtype"],
        )
        for i, entry in enumerate(graph["inputs"])
    ]


@dataclass(frozen=True)
class Node:
    """A graph node checked against the op registry, with its attributes normalized."""

    name: str  # the node's name, or its uid where the dump has none
    uid: str
    op: Op
    attrs: Attrs
    args: tuple[str, ...]


class GraphError(ValueError):
    """A graph the suite cannot take; the message names the node and what is wrong."""


def nodes(graph: GraphDict) -> list[Node]:
    """The graph's nodes in order, each op and attribute checked by the op registry."""
    shapes = {o.uid: o.shape for o in inputs(graph)}
    found = []
    for node in graph["nodes"]:
        uid = str(node["uid"])
        expr = node["expr"]
        name = node.get("name") or uid
        try:
            op = ops.get(str(expr["op"]["name"]))
            missing = [str(a) for a in expr["args"] if a not in shapes]
            if missing:
                raise GraphError(f"operands {', '.join(missing)} are not defined before it")
            args = tuple(str(a) for a in expr["args"])
            arg_shapes = [shapes[a] for a in args]
            attrs = op.normalize(expr["op"].get("attrs"), arg_shapes)
            shapes[uid] = op.shape(arg_shapes, attrs)
        except ValueError as exc:
            raise GraphError(f"node {name!r}: {exc}") from None
        found.append(Node(name, uid, op, attrs, args))
    return found


def operands(graph: GraphDict) -> dict[str, Operand]:
    """Every operand of the graph by uid: inputs, then each node's result."""
    known = {o.uid: o for o in inputs(graph)}
    for node in nodes(graph):
        args = [known[uid] for uid in node.args]
        shape = node.op.shape([a.shape for a in args], node.attrs)
        known[node.uid] = Operand(node.name, node.uid, shape, args[0].dtype)
    return known


def outputs(graph: GraphDict) -> list[Operand]:
    known = operands(graph)
    return [known[o["uid"]] for o in graph["outputs"]]


def op_names(graph: GraphDict) -> tuple[str, ...]:
    return tuple(node["expr"]["op"]["name"] for node in graph["nodes"])


def canonical(graph: GraphDict) -> str:
    """``graph`` as text, equal for equal graphs (keys sorted)."""
    return json.dumps(graph, sort_keys=True, default=str)
