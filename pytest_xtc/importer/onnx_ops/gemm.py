"""ONNX ``Gemm`` as XTC's ``matmul``: transA and transB folded into the operands' layout
(the case states A as [M, K] and B as [K, N]). Its epilogue, ``alpha`` scaling and the
bias ``beta * C``, XTC cannot express (no scaling op, no add): the product is imported
without it, saying so, or refused under ``--strict``. Opset 6's ``broadcast`` attribute
is understood: it only says how C is broadcast."""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_xtc.importer.layer import SWAP, LayerBuilder
from pytest_xtc.importer.model import Model, attributes
from pytest_xtc.importer.onnx_ops import known_attributes, operands, reason_of, refuse
from pytest_xtc.ops.builder import Operand

ATTRIBUTES = ("alpha", "beta", "transA", "transB")
BROADCAST = "broadcast"  # opsets 1 to 6 only
STRICT = {"alpha": "Gemm alpha other than 1: XTC has no scaling op",
          "bias": "Gemm bias C: XTC has no add to express it"}


def _attributes(model: Model) -> tuple[str, ...]:
    return ATTRIBUTES + ((BROADCAST,) if model.opset < 7 else ())


def problems(node: Any, model: Model) -> list[str]:
    """Every reason the product itself (its epilogue aside) cannot be expressed."""
    found = reason_of(known_attributes, node, _attributes(model))
    shapes = reason_of(operands, node, model, 2)
    if shapes:
        return found + shapes
    a, b = (model.shape(n) for n in node.input[:2])
    if len(a) != 2 or len(b) != 2:
        return [*found, "Gemm operands are not 2-D"]
    if _has_c(node):
        found += _c_problems(node, model)
    return found


def _has_c(node: Any) -> bool:
    return len(node.input) > 2 and bool(node.input[2])


def _c_problems(node: Any, model: Model) -> list[str]:
    """C must fit the result [M, N] (opset 6 without ``broadcast``: exactly), even when
    left out: otherwise the model is not one ONNX runs."""
    c = model.shapes.get(node.input[2])
    out = model.shapes.get(node.output[0])
    if c is None or out is None:
        return []
    exact = model.opset < 7 and not attributes(node).get(BROADCAST, 0)
    try:
        fits = tuple(c) == tuple(out) if exact else np.broadcast_shapes(c, out) == tuple(out)
    except ValueError:
        fits = False
    if fits:
        return []
    how = "without broadcast" if exact else "broadcast"
    return [f"Gemm C of shape {list(c)} does not fit the result {list(out)} ({how})"]


def epilogue(node: Any, model: Model) -> dict[str, tuple[str, str]]:
    """What an import leaves out: part -> (its words, the XTC op it would need)."""
    attrs = attributes(node)
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    parts = {}
    if alpha != 1.0:
        parts["alpha"] = (f"alpha scaling (alpha {alpha:g})", "scaling op")
    if _has_c(node) and beta != 0.0:
        parts["bias"] = ("bias add (C)" if beta == 1.0 else f"bias add (beta*C, beta {beta:g})",
                         "add")
    return parts


def check(node: Any, model: Model) -> None:
    refuse(problems(node, model))


def build(layer: LayerBuilder, node: Any) -> Operand:
    """The product A' B' (transposes applied; alpha and C left out)."""
    attrs = attributes(node)
    a = layer.input("A", node.input[0], SWAP if attrs.get("transA", 0) else None)
    b = layer.input("B", node.input[1], SWAP if attrs.get("transB", 0) else None)
    return layer.node("matmul", "matmul", [a, b])
