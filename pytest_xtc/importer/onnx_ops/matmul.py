"""ONNX ``MatMul`` with a 2-D right operand as XTC's ``matmul``: the left operand's leading
dimensions are its rows ([.., M, K] read as [prod(..) * M, K]: the same numbers, each row
one dot product with the same columns). A batched right operand is refused: XTC's matmul
folds leading dimensions into the reduction."""

from __future__ import annotations

import math
from typing import Any

from pytest_xtc.importer.layer import LayerBuilder
from pytest_xtc.importer.model import Model, NotImported
from pytest_xtc.importer.onnx_ops import known_attributes, operands
from pytest_xtc.ops.builder import Operand


def check(node: Any, model: Model) -> None:
    known_attributes(node, ())
    a, b = (model.shape(n) for n in operands(node, model, 2))
    if len(a) < 2 or len(b) < 2:
        raise NotImported("matrix-vector MatMul (a 1-D operand)")
    if len(b) > 2:
        raise NotImported("batched matmul: XTC's matmul folds leading dimensions into the "
                          "reduction")


def build(layer: LayerBuilder, node: Any) -> Operand:
    a_shape = layer.model.shape(node.input[0])
    a = layer.input("A", node.input[0], shape=(math.prod(a_shape[:-1]), a_shape[-1]))
    b = layer.input("B", node.input[1])
    return layer.node("matmul", "matmul", [a, b])
