"""ONNX ``Conv`` 2-D, group 1, no dilation, as XTC's ``conv2d``: NCHW input read as NHWC,
OIHW weights as RSCF (R, S, C, F), explicit or automatic pads as a ``pad2d`` before it,
strides kept. A bias is an epilogue XTC cannot express (no add): the conv is imported
without it, saying so, or refused under ``--strict``."""

from __future__ import annotations

from typing import Any

from pytest_xtc.importer.layer import NCHW_TO_NHWC, NHWC_TO_NCHW, OIHW_TO_RSCF, LayerBuilder
from pytest_xtc.importer.model import Model, NotImported, attributes
from pytest_xtc.importer.onnx_ops import known_attributes, operands, reason_of, refuse
from pytest_xtc.ops.builder import Operand

ATTRIBUTES = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")
OUTPUT_LAYOUT = NHWC_TO_NCHW
STRICT = {"bias": "Conv bias: XTC has no add to express it"}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def problems(node: Any, model: Model) -> list[str]:
    """Every reason the conv itself (its epilogue aside) cannot be expressed."""
    found = reason_of(known_attributes, node, ATTRIBUTES)
    attrs = attributes(node)
    group = attrs.get("group", 1)
    shapes = reason_of(operands, node, model, 2)
    if group != 1:
        x_shape = model.shapes.get(node.input[0]) or ()
        depthwise = len(x_shape) > 1 and group == x_shape[1]
        kind = "depthwise conv" if depthwise else "grouped conv"
        found.append(f"{kind} (group {group}): XTC's conv2d has no groups")
    if any(d != 1 for d in attrs.get("dilations", [])):
        found.append(f"dilated conv (dilations {list(attrs['dilations'])}): XTC's conv2d "
                     "has no dilation")
    if shapes:
        return found + shapes
    x, w = model.shape(node.input[0]), model.shape(node.input[1])
    if len(x) != 4 or len(w) != 4:
        return [*found, f"{len(x) - 2}-D conv: XTC's conv2d is 2-D"]
    kernel = attrs.get("kernel_shape")
    if kernel is not None and list(kernel) != list(w[2:]):
        found.append(f"kernel_shape {list(kernel)} differs from the weights' {list(w[2:])}")
    return found + reason_of(pads, node, model)


def epilogue(node: Any, model: Model) -> dict[str, tuple[str, str]]:
    """What an import leaves out: part -> (its words, the XTC op it would need)."""
    return {"bias": ("bias add", "add")} if len(node.input) > 2 and node.input[2] else {}


def check(node: Any, model: Model) -> None:
    refuse(problems(node, model))


def strides(node: Any) -> list[int]:
    return [int(s) for s in attributes(node).get("strides", [1, 1])]


def pads(node: Any, model: Model) -> dict[int, list[int]]:
    """The pads as NHWC pad2d widths {1: [top, bottom], 2: [left, right]} (zeros kept)."""
    attrs = attributes(node)
    auto = _text(attrs.get("auto_pad", "NOTSET"))
    if auto == "NOTSET":
        given = [int(p) for p in attrs.get("pads", [0, 0, 0, 0])]
        if len(given) != 4 or min(given) < 0:
            raise NotImported(f"pads {given}: expected 4 non-negative widths")
        return {1: [given[0], given[2]], 2: [given[1], given[3]]}
    if auto == "VALID":
        return {1: [0, 0], 2: [0, 0]}
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise NotImported(f"auto_pad {auto} not understood")
    size = model.shape(node.input[0])[2:]
    kernel = model.shape(node.input[1])[2:]
    found = {}
    for axis, (n, k, s) in enumerate(zip(size, kernel, strides(node), strict=True)):
        total = max((-(-n // s) - 1) * s + k - n, 0)
        small, large = total // 2, total - total // 2
        found[axis + 1] = [small, large] if auto == "SAME_UPPER" else [large, small]
    return found


def build(layer: LayerBuilder, node: Any,
          pre: tuple[Any, dict[int, list[int]], float] | None = None) -> Operand:
    """The conv (its bias left out), after ``pre``: a Pad node chained before it, its NHWC
    widths and value."""
    source = pre[0].input[0] if pre else node.input[0]
    x = layer.input("X", source, NCHW_TO_NHWC)
    if pre is not None:
        x = layer.node("pad2d", "pad", [x], padding=pre[1], constant_value=pre[2])
    own = pads(node, layer.model)
    if any(w for pair in own.values() for w in pair):
        x = layer.node("pad2d", "conv_pad", [x], padding=own, constant_value=0.0)
    w = layer.input("W", node.input[1], OIHW_TO_RSCF)
    return layer.node("conv2d", "conv", [x, w], stride=strides(node))
