"""ONNX ``Relu`` as XTC's ``relu`` (threshold 0), on a tensor of any rank XTC takes."""

from __future__ import annotations

from typing import Any

from pytest_xtc.core.cases.casefile import MAX_RANK
from pytest_xtc.importer.layer import LayerBuilder
from pytest_xtc.importer.model import Model, NotImported
from pytest_xtc.importer.onnx_ops import known_attributes, operands
from pytest_xtc.ops.builder import Operand


def check(node: Any, model: Model) -> None:
    known_attributes(node, ())
    (x,) = operands(node, model, 1)
    if not 1 <= len(model.shape(x)) <= MAX_RANK:
        raise NotImported(f"rank {len(model.shape(x))}: cases take 1 to {MAX_RANK}")


def build(layer: LayerBuilder, node: Any, x: Operand | None = None) -> Operand:
    """Relu of ``x`` (a chain's result, in the chain's layout), else of the node's input."""
    if x is None:
        x = layer.input("X", node.input[0])
    return layer.node("relu", "relu", [x])
