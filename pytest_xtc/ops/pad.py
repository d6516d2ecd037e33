"""``pad``: constant padding of any axes (XTC's padding forms, see ``spec.padding``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pytest_xtc.ops.spec import Attr, Attrs, Op, Shape, number, padding


class Pad(Op):
    name = "pad"
    attrs: tuple[Attr, ...] = (
        Attr("padding", padding, doc="an integer, [before, after], a list or {axis: width}"),
        Attr("constant_value", number, 0.0, "a number"),
    )

    def shape(self, shapes: Sequence[Shape], attrs: Attrs) -> Shape:
        out = list(shapes[0])
        for axis, (before, after) in attrs["padding"].items():
            out[axis] += before + after
        return tuple(out)

    def forward(self, args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        x = args[0]
        widths = [attrs["padding"].get(axis, (0, 0)) for axis in range(x.ndim)]
        return np.pad(x, widths, constant_values=np.asarray(attrs["constant_value"], x.dtype))

    def error_attrs(self, attrs: Attrs) -> Attrs:
        return {**attrs, "constant_value": 0.0}  # the padding itself is exact


OP = Pad()


def label(shape: Sequence[int], widths: dict) -> str:
    pads = "_".join(f"{a}:{b}-{e}" for a, (b, e) in sorted(widths.items()))
    return f"{'x'.join(map(str, shape))}-pad{pads}"


def family(shape: list[int], padding: dict[int, list[int]], dtype: str = "float32",
           constant_value: float = 0.0) -> tuple[dict, str]:
    """Catalog family ``pad``: {shape, padding, constant_value}."""
    from pytest_xtc.ops.builder import GraphBuilder

    g = GraphBuilder("pad")
    y = g.node("pad", "Y", [g.tensor("X", shape, dtype)], padding=padding,
               constant_value=constant_value)
    value = "" if constant_value == 0 else f"-v{constant_value:g}"
    return g.output(y), label(shape, padding) + value
