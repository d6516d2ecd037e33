"""``unpad``: removes ``padding`` from the given axes (the inverse of ``pad``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

import numpy as np

from pytest_xtc.ops.pad import PADDING_FORMS, label, spelled
from pytest_xtc.ops.spec import Attr, Attrs, Op, Shape, ieee_value, number, padding, value_label


class Unpad(Op):
    name = "unpad"
    attrs = (Attr("padding", padding, doc="an integer, [before, after], a list or "
                  "{axis: width}"),
             Attr("constant_value", number, 0.0, "a number (XTC's unpad reads it, uses none)"))
    #: constant_value: absent, or a value no copy makes (XTC's factory takes it; a target
    #: that pads with it by mistake shows)
    forms: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "padding": PADDING_FORMS, "constant_value": ("default", "nan", "inf")}

    def shape(self, shapes: Sequence[Shape], attrs: Attrs) -> Shape:
        out = list(shapes[0])
        for axis, (before, after) in attrs["padding"].items():
            out[axis] -= before + after
            if out[axis] < 1:
                raise ValueError(f"axis {axis} of size {shapes[0][axis]} cannot lose "
                                 f"{before + after}")
        return tuple(out)

    def forward(self, args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        x = args[0]
        pads = attrs["padding"]
        index = tuple(
            slice(pads.get(axis, (0, 0))[0], x.shape[axis] - pads.get(axis, (0, 0))[1])
            for axis in range(x.ndim)
        )
        return x[index]


OP = Unpad()


def family(shape: list[int], padding: dict[int, list[int]], dtype: str = "float32",
           padding_form: str = "mapping", constant_value: float | str = "default",
           ) -> tuple[dict, str]:
    """Catalog family ``unpad``: {shape, padding, padding_form (pad's spellings),
    constant_value (``default``: not written)}."""
    from pytest_xtc.ops import spec
    from pytest_xtc.ops.builder import GraphBuilder

    given = spelled(padding, len(shape), padding_form)
    g = GraphBuilder("unpad")
    written = {} if constant_value == "default" else {
        "constant_value": ieee_value(constant_value, dtype)}
    y = g.node("unpad", "Y", [g.tensor("X", shape, dtype)], padding=given, **written)
    form = "" if padding_form == "mapping" else f"-{padding_form}"
    form += "" if constant_value == "default" else f"-v{value_label(constant_value)}"
    return g.output(y), label(shape, spec.padding(given, len(shape))) + form
