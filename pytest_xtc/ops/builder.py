"""Writing a graph dict node by node, in XTC's own serialization, without importing XTC:
what the catalog's families build their graphs with."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_xtc import ops

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
        spec = ops.get(op)
        shapes = [a.shape for a in args]
        shape = spec.shape(shapes, spec.normalize(attrs, shapes))
        return Operand(name, uid, shape, args[0].dtype)

    def output(self, *operands: Operand) -> GraphDict:
        self.graph["outputs"] = [{"uid": o.uid} for o in operands]
        return self.graph
