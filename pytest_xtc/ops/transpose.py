"""``transpose``: permutes the axes (``axes``; an empty list reverses them, as in XTC)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from pytest_xtc.ops.spec import Attr, Attrs, Op, Shape, int_tuple


def _axes(value: Any, rank: int) -> tuple[int, ...]:
    axes = int_tuple(value, rank)
    if axes and sorted(a % rank for a in axes) != list(range(rank)):
        raise ValueError(f"expected a permutation of 0..{rank - 1}")
    return tuple(a % rank for a in axes) if axes else tuple(reversed(range(rank)))


class Transpose(Op):
    name = "transpose"
    attrs = (Attr("axes", _axes, (), "a permutation of the axes"),)
    #: the axes from 0, counted from the end, or none (XTC reverses them)
    forms: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "axes": ("explicit", "negative", "empty")}

    def shape(self, shapes: Sequence[Shape], attrs: Attrs) -> Shape:
        axes = attrs["axes"] or tuple(reversed(range(len(shapes[0]))))
        return tuple(shapes[0][a] for a in axes)

    def forward(self, args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        return np.transpose(args[0], attrs["axes"] or None)


OP = Transpose()


def family(shape: list[int], axes: list[int], dtype: str = "float32",
           axes_form: str = "explicit") -> tuple[dict, str]:
    """Catalog family ``transpose``: {shape, axes, axes_form} (``negative``: each axis
    written counted from the end; ``empty``: no axes, XTC reverses them, whatever
    ``axes`` says)."""
    from pytest_xtc.ops.builder import GraphBuilder

    rank = len(shape)
    written = {"explicit": list(axes), "negative": [a - rank for a in axes], "empty": []}
    axes = list(reversed(range(rank))) if axes_form == "empty" else list(axes)
    g = GraphBuilder("transpose")
    y = g.node("transpose", "Y", [g.tensor("X", shape, dtype)], axes=written[axes_form])
    form = "" if axes_form == "explicit" else f"-{axes_form}_axes"
    return g.output(y), f"{'x'.join(map(str, shape))}-axes{''.join(map(str, axes))}{form}"
