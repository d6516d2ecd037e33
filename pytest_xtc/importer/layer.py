"""One imported layer: an XTC graph built from one ONNX node or a chain of them, with the
ONNX tensor each case operand stands for and the layout change between them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_xtc.importer.model import Model, NotImported
from pytest_xtc.ops.builder import GraphBuilder, GraphDict, Operand

NCHW_TO_NHWC = (0, 2, 3, 1)
NHWC_TO_NCHW = (0, 3, 1, 2)
OIHW_TO_RSCF = (2, 3, 1, 0)  # ONNX conv weights (F, C, R, S) as XTC's (R, S, C, F)
SWAP = (1, 0)


@dataclass
class Layer:
    """An imported layer. ``tensors``: case operand name -> ONNX tensor name; ``layouts``:
    case operand name -> the permutation that, followed by a reshape to the other side's
    shape, takes an ONNX input to the case's (an output: the case's to ONNX's)."""

    onnx_ops: tuple[str, ...]
    nodes: tuple[str, ...]
    graph: GraphDict
    tensors: dict[str, str]
    layouts: dict[str, list[int]] = field(default_factory=dict)
    omitted: str = ""  # the epilogue left out, e.g. "conv2d without its bias add: ..."
    omitted_parts: tuple[str, ...] = ()  # its parts: bias, alpha

    @property
    def xtc_ops(self) -> tuple[str, ...]:
        return tuple(n["expr"]["op"]["name"] for n in self.graph["nodes"])

    @property
    def dtype(self) -> str:
        return str(self.graph["inputs"][0]["expr"]["type"]["dtype"])


class LayerBuilder:
    """Builds a :class:`Layer` with the catalog's graph builder (shapes checked by the op
    registry as nodes are added)."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.graph = GraphBuilder("layer")
        self.tensors: dict[str, str] = {}
        self.layouts: dict[str, list[int]] = {}
        self.dtype: str | None = None

    def input(self, role: str, tensor: str, perm: Sequence[int] | None = None,
              shape: Sequence[int] | None = None) -> Operand:
        """A case input standing for ONNX ``tensor``: transposed by ``perm``, then read as
        ``shape`` (same element count)."""
        onnx_shape = self.model.shape(tensor)
        dtype = self.model.dtype(tensor)
        if self.dtype not in (None, dtype):
            raise NotImported(f"operands of dtypes {self.dtype} and {dtype}")
        self.dtype = dtype
        if perm is not None and len(perm) != len(onnx_shape):
            raise NotImported(f"{tensor!r} has rank {len(onnx_shape)}, not {len(perm)}")
        moved = tuple(onnx_shape[p] for p in perm) if perm else onnx_shape
        shape = tuple(shape) if shape is not None else moved
        if math.prod(shape) != math.prod(moved) or not shape or min(shape) < 1:
            raise NotImported(f"{tensor!r} of shape {list(onnx_shape)} cannot be read "
                              f"as {list(shape)}")
        self.tensors[role] = tensor
        if perm and list(perm) != sorted(perm):
            self.layouts[role] = list(perm)
        return self.graph.tensor(role, shape, dtype)

    def node(self, op: str, name: str, args: Sequence[Operand], **attrs: Any) -> Operand:
        try:
            return self.graph.node(op, name, args, **attrs)
        except ValueError as exc:  # the registry's shape rules refuse it
            raise NotImported(f"XTC's {op} refuses it: {exc}") from None

    def finish(self, result: Operand, tensor: str, perm: Sequence[int] | None,
               onnx_nodes: Sequence[Any], omitted: str = "",
               omitted_parts: Sequence[str] = ()) -> Layer:
        """The layer whose output ``result`` stands for ONNX ``tensor``."""
        expected = self.model.shape(tensor)
        moved = tuple(result.shape[p] for p in perm) if perm else result.shape
        if (tuple(moved) != tuple(expected)) if perm else math.prod(moved) != math.prod(expected):
            raise NotImported(f"XTC's result {list(result.shape)} does not match ONNX's "
                              f"{list(expected)}")
        self.tensors[result.name] = tensor
        if perm:
            self.layouts[result.name] = list(perm)
        graph = self.graph.output(result)
        return Layer(tuple(n.op_type for n in onnx_nodes),
                     tuple(n.name or n.output[0] for n in onnx_nodes),
                     graph, self.tensors, self.layouts, omitted, tuple(omitted_parts))
