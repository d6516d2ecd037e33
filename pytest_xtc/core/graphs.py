"""Graphs in XTC's own YAML serialization (``Graph.to_dict``), built without importing XTC.

A graph dict has ``inputs`` (``uid`` and ``expr.type`` with ``shape`` and ``dtype``),
``nodes`` (``name``, ``uid``, ``expr.op.name``, ``expr.op.attrs``, ``expr.args``) and
``outputs`` (``uid``). We add an optional ``name`` to each input so that placements and
messages can say ``A`` instead of ``%0``; XTC's own dumps have none, and get ``in0``...
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

GraphDict = dict[str, Any]


@dataclass(frozen=True)
class Operand:
    """An input or a node's result: its name, uid, shape and dtype."""

    name: str
    uid: str
    shape: tuple[int, ...]
    dtype: str


class GraphBuilder:
    """Writes a graph dict node by node, inferring result shapes like XTC does."""

    def __init__(self, name: str) -> None:
        self.graph: GraphDict = {"name": name, "inputs": [], "nodes": [], "outputs": []}
        self._uid = 0

    def _next_uid(self) -> str:
        uid = f"%{self._uid}"
        self._uid += 1
        return uid

    def tensor(self, name: str, shape: Sequence[int], dtype: str) -> Operand:
        uid = self._next_uid()
        entry = {"uid": uid, "name": name, "expr": {"type": {"shape": list(shape), "dtype": dtype}}}
        self.graph["inputs"].append(entry)
        return Operand(name, uid, tuple(shape), dtype)

    def node(self, op: str, name: str, args: Sequence[Operand], **attrs: Any) -> Operand:
        uid = self._next_uid()
        expr = {"op": {"name": op, "attrs": attrs}, "args": [a.uid for a in args]}
        self.graph["nodes"].append({"name": name, "uid": uid, "expr": expr})
        shape = result_shape(op, [a.shape for a in args], attrs)
        return Operand(name, uid, shape, args[0].dtype)

    def output(self, *operands: Operand) -> GraphDict:
        self.graph["outputs"] = [{"uid": o.uid} for o in operands]
        return self.graph


def result_shape(
    op: str, shapes: Sequence[tuple[int, ...]], attrs: dict[str, Any]
) -> tuple[int, ...]:
    """Shape of an op's result, by XTC's rules (conv2d takes NHWC input, RSCF weights)."""
    first = shapes[0]
    if op == "matmul":
        return (first[0], shapes[1][1])
    if op == "conv2d":
        *lead, h, w, _ = first
        r, s, _, f = shapes[1]
        sh, sw = attrs.get("stride", (1, 1))
        return (*lead, (h - r) // sh + 1, (w - s) // sw + 1, f)
    if op in ("pad", "pad2d"):
        out = list(first)
        for axis, (before, after) in normalize_padding(attrs["padding"], len(first)).items():
            out[axis] += before + after
        return tuple(out)
    if op == "unpad":
        out = list(first)
        for axis, (before, after) in normalize_padding(attrs["padding"], len(first)).items():
            out[axis] -= before + after
        return tuple(out)
    if op == "transpose":
        return tuple(first[a] for a in attrs["axes"])
    if op == "reshape":
        shape = list(attrs["shape"])
        if -1 in shape:
            known = int(np.prod([d for d in shape if d != -1]))
            shape[shape.index(-1)] = int(np.prod(first)) // known
        return tuple(shape)
    return tuple(first)  # elementwise (relu)


def normalize_padding(padding: Any, rank: int) -> dict[int, tuple[int, int]]:
    """XTC's padding forms (int, (before, after), {axis: int | (before, after)})."""
    if isinstance(padding, int):
        return {axis: (padding, padding) for axis in range(rank)}
    if isinstance(padding, (list, tuple)):
        return {axis: (int(padding[0]), int(padding[1])) for axis in range(rank)}
    result = {}
    for axis, pad in padding.items():
        pair = (pad, pad) if isinstance(pad, int) else (pad[0], pad[1])
        result[int(axis) % rank] = (int(pair[0]), int(pair[1]))
    return result


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


def operands(graph: GraphDict) -> dict[str, Operand]:
    """Every operand of the graph by uid: inputs, then each node's result."""
    known = {o.uid: o for o in inputs(graph)}
    for node in graph["nodes"]:
        expr = node["expr"]
        args = [known[uid] for uid in expr["args"]]
        attrs = expr["op"].get("attrs") or {}
        shape = result_shape(expr["op"]["name"], [a.shape for a in args], attrs)
        uid = node["uid"]
        known[uid] = Operand(node.get("name") or uid, uid, shape, args[0].dtype)
    return known


def outputs(graph: GraphDict) -> list[Operand]:
    known = operands(graph)
    return [known[o["uid"]] for o in graph["outputs"]]


def op_names(graph: GraphDict) -> tuple[str, ...]:
    return tuple(node["expr"]["op"]["name"] for node in graph["nodes"])
