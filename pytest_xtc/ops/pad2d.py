"""``pad2d``: constant padding of two axes, H and W of NHWC unless ``axes`` says others.

``padding`` is what XTC's graph dump holds, ``{axis: [before, after]}``, or an integer
(both axes, both sides). XTC's other spellings are refused: write them as a mapping.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pytest_xtc.ops.pad import Pad
from pytest_xtc.ops.spec import Attr, Attrs, Shape, integer, number, padding


def _axes(value: Any, rank: int) -> tuple[int, int]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ValueError("expected two axes")
    first, second = (integer(v, rank) % rank for v in value)
    if first == second:
        raise ValueError("the two axes must differ")
    return (first, second)


def _pad2d(value: Any, rank: int) -> Any:
    if isinstance(value, Mapping) and len(value) <= 2:
        return padding(value, rank)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError("expected an integer or {axis: [before, after]} for two axes")


class Pad2d(Pad):
    name = "pad2d"
    attrs = (
        Attr("padding", _pad2d, doc="an integer or {axis: [before, after]}"),
        Attr("constant_value", number, 0.0, "a number"),
        Attr("axes", _axes, None, "two axes (default: -3, -2)"),
    )

    def shape(self, shapes: Sequence[Shape], attrs: Attrs) -> Shape:
        return super().shape(shapes, self._widths(attrs, len(shapes[0])))

    def forward(self, args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        return super().forward(args, self._widths(attrs, args[0].ndim))

    @staticmethod
    def _widths(attrs: Attrs, rank: int) -> Attrs:
        """The attributes with ``padding`` as {axis: (before, after)}."""
        pads = attrs["padding"]
        if isinstance(pads, int):
            axes = attrs["axes"] or ((rank - 3) % rank, (rank - 2) % rank)
            pads = {axis: (pads, pads) for axis in axes}
        return {**attrs, "padding": pads}


OP = Pad2d()


def family(n: int, h: int, w: int, c: int, width: int, dtype: str = "float32",
           sides: Sequence[int] | None = None, constant_value: float = 0.0,
           ) -> tuple[dict, str]:
    """Catalog family ``pad2d``: [n, h, w, c, width], or {n, h, w, c, width: 0, sides:
    [top, bottom, left, right], constant_value}."""
    from pytest_xtc.ops.builder import GraphBuilder

    g = GraphBuilder("pad2d")
    top, bottom, left, right = sides if sides is not None else (width,) * 4
    widths = {1: [top, bottom], 2: [left, right]}
    y = g.node("pad2d", "Y", [g.tensor("X", (n, h, w, c), dtype)], padding=widths,
               constant_value=constant_value)
    pads = f"{top}" if len({top, bottom, left, right}) == 1 else f"{top}-{bottom}_{left}-{right}"
    value = "" if constant_value == 0 else f"-v{constant_value:g}"
    return g.output(y), f"{n}x{h}x{w}x{c}-pad{pads}{value}"
