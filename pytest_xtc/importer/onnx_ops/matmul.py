"""ONNX ``MatMul`` with a 2-D right operand (or one whose leading dimensions are all 1,
squeezed) as XTC's ``matmul``: the left operand's leading dimensions are its rows
([.., M, K] read as [prod(..) * M, K]: the same numbers, each row one dot product with the
same columns). A batched right operand is refused: XTC's matmul folds leading dimensions
into the reduction."""

from __future__ import annotations

import math
from typing import Any

from pytest_xtc.importer.layer import LayerBuilder
from pytest_xtc.importer.model import Model
from pytest_xtc.importer.onnx_ops import known_attributes, operands, reason_of, refuse
from pytest_xtc.ops.builder import Operand

STRICT: dict[str, str] = {}


def problems(node: Any, model: Model) -> list[str]:
    found = reason_of(known_attributes, node, ())
    shapes = reason_of(operands, node, model, 2)
    if shapes:
        return found + shapes
    a, b = (model.shape(n) for n in node.input[:2])
    if len(a) < 2 or len(b) < 2:
        return [*found, "matrix-vector MatMul (a 1-D operand)"]
    if math.prod(b[:-2]) != 1:
        found.append(f"batched matmul (right operand {list(b)}): XTC's matmul folds leading "
                     "dimensions into the reduction")
    return found


def epilogue(node: Any, model: Model) -> dict[str, tuple[str, str]]:
    return {}


def check(node: Any, model: Model) -> None:
    refuse(problems(node, model))


def build(layer: LayerBuilder, node: Any) -> Operand:
    a_shape = layer.model.shape(node.input[0])
    b_shape = layer.model.shape(node.input[1])
    a = layer.input("A", node.input[0], shape=(math.prod(a_shape[:-1]), a_shape[-1]))
    b = layer.input("B", node.input[1], shape=b_shape[-2:])
    return layer.node("matmul", "matmul", [a, b])
