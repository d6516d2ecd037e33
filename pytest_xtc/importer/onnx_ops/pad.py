"""ONNX ``Pad`` in constant mode with constant widths, as XTC's ``pad`` (alone) or as a
``pad2d`` on H and W before a conv (chained, in NHWC)."""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_xtc.core.cases.casefile import MAX_RANK
from pytest_xtc.importer import folding
from pytest_xtc.importer.layer import LayerBuilder
from pytest_xtc.importer.model import Model, NotImported, attributes
from pytest_xtc.importer.onnx_ops import known_attributes, reason_of, refuse
from pytest_xtc.ops.builder import Operand

Widths = dict[int, list[int]]


def widths(node: Any, model: Model) -> tuple[Widths, float]:
    """{axis: [before, after]} for the padded axes and the constant; NotImported when
    the widths or the value are not constants or the mode is not constant."""
    reasons = reason_of(known_attributes, node, ("mode", "pads", "value"))
    attrs = attributes(node)
    mode = attrs.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if mode != "constant":
        reasons.append(f"Pad mode {mode}: XTC pads with a constant")
    reasons += reason_of(_constants, node, model)
    refuse(reasons)
    x = node.input[0]
    rank = len(model.shape(x))
    model.dtype(x)
    if model.opset < 11:
        raw, value = np.asarray(attrs.get("pads", [])), float(attrs.get("value", 0.0))
    else:
        raw, value = _inputs(node, model)
    given = np.arange(rank) if len(node.input) < 4 or not node.input[3] else \
        _constant(node, model, 3, "axes")
    axes = [int(a) % rank for a in np.ravel(given)]
    pads = [int(p) for p in np.ravel(raw)]
    if len(pads) != 2 * len(axes):
        raise NotImported(f"{len(pads)} pad widths for {len(axes)} axes")
    if min(pads, default=0) < 0:
        raise NotImported("negative pads (cropping): XTC's pad only adds")
    found = {a: [pads[i], pads[i + len(axes)]] for i, a in enumerate(axes)
             if pads[i] or pads[i + len(axes)]}
    if not found:
        raise NotImported("pads nothing")
    if not 1 <= rank <= MAX_RANK:
        raise NotImported(f"rank {rank}: cases take 1 to {MAX_RANK}")
    return found, value


def _constants(node: Any, model: Model) -> None:
    """NotImported naming every pad input that is not a constant, and why."""
    whats = ("pads", "constant_value", "axes")
    refuse(f"{what} {folding.origin(name, model)}"
           for what, name in zip(whats, node.input[1:], strict=False)
           if name and model.constant(name) is None)


def _inputs(node: Any, model: Model) -> tuple[np.ndarray, float]:
    pads = _constant(node, model, 1, "pads")
    value = 0.0
    if len(node.input) > 2 and node.input[2]:
        given = _constant(node, model, 2, "constant_value")
        if given.size != 1 or not np.isfinite(given).all():
            raise NotImported("constant_value is not one finite number")
        value = float(given.ravel()[0])
    return pads, value


def _constant(node: Any, model: Model, index: int, what: str) -> np.ndarray:
    value = model.constant(node.input[index])
    if value is None:
        raise NotImported(f"{what} {folding.origin(node.input[index], model)}")
    return value


def check(node: Any, model: Model) -> None:
    widths(node, model)


def spatial(node: Any, model: Model) -> tuple[dict[int, list[int]], float] | None:
    """The pad as NHWC pad2d widths {1: [top, bottom], 2: [left, right]} when it pads only
    H and W of an NCHW tensor; None otherwise."""
    found, value = widths(node, model)
    if len(model.shape(node.input[0])) != 4 or set(found) - {2, 3}:
        return None
    return {1: found.get(2, [0, 0]), 2: found.get(3, [0, 0])}, value


def build(layer: LayerBuilder, node: Any) -> Operand:
    found, value = widths(node, layer.model)
    x = layer.input("X", node.input[0])
    return layer.node("pad", "pad", [x], padding=found, constant_value=value)
