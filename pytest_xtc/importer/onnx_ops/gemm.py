"""ONNX ``Gemm`` as XTC's ``matmul``: transA and transB folded into the operands' layout
(the case states A as [M, K] and B as [K, N]); alpha 1 and no bias (or beta 0) only, since
XTC has no scaling or add to express them."""

from __future__ import annotations

from typing import Any

from pytest_xtc.importer.layer import SWAP, LayerBuilder
from pytest_xtc.importer.model import Model, NotImported
from pytest_xtc.importer.onnx_ops import known_attributes, operands
from pytest_xtc.ops.builder import Operand

ATTRIBUTES = ("alpha", "beta", "transA", "transB")


def check(node: Any, model: Model) -> None:
    attrs = known_attributes(node, ATTRIBUTES)
    a, b = (model.shape(n) for n in operands(node, model, 2))
    if len(a) != 2 or len(b) != 2:
        raise NotImported("Gemm operands are not 2-D")
    if attrs.get("alpha", 1.0) != 1.0:
        raise NotImported("Gemm alpha other than 1: XTC has no scaling op")
    if len(node.input) > 2 and node.input[2] and attrs.get("beta", 1.0) != 0.0:
        raise NotImported("Gemm bias C: XTC has no add to express it")


def build(layer: LayerBuilder, node: Any) -> Operand:
    attrs = known_attributes(node, ATTRIBUTES)
    a = layer.input("A", node.input[0], SWAP if attrs.get("transA", 0) else None)
    b = layer.input("B", node.input[1], SWAP if attrs.get("transB", 0) else None)
    return layer.node("matmul", "matmul", [a, b])
