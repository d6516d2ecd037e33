"""``pad``: constant padding of any axes (XTC's padding forms, see ``spec.padding``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from pytest_xtc.ops.spec import (
    IEEE_CLASSES,
    Attr,
    Attrs,
    Op,
    Shape,
    ieee_value,
    number,
    padding,
    value_label,
)

#: XTC's spellings of ``padding`` (its op factory): a mapping {axis: [before, after]} (its
#: graph dump's), an integer (every axis, both sides), [before, after] (every axis), a
#: list of per-axis widths (the last axes), a mapping with axes counted from the end.
PADDING_FORMS = ("mapping", "int", "pair", "list", "negative_axes")


class Pad(Op):
    name = "pad"
    attrs: tuple[Attr, ...] = (
        Attr("padding", padding, doc="an integer, [before, after], a list or {axis: width}"),
        Attr("constant_value", number, 0.0, "a number"),
    )
    forms: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "padding": PADDING_FORMS, "constant_value": IEEE_CLASSES}

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

    def widths(self, attrs: Attrs, rank: int) -> dict[int, tuple[int, int]]:
        """The padding, whatever its spelling: {axis from 0: (before, after)}."""
        return {int(axis) % rank: tuple(pair) for axis, pair in attrs["padding"].items()}


OP = Pad()


def label(shape: Sequence[int], widths: dict) -> str:
    pads = "_".join(f"{a}:{b}-{e}" for a, (b, e) in sorted(widths.items()))
    return f"{'x'.join(map(str, shape))}-pad{pads}"


def spelled(widths: Mapping[int, Sequence[int]], rank: int, form: str) -> Any:
    """``widths`` ({axis: [before, after]}, axes from 0) in XTC's spelling ``form``
    (:data:`PADDING_FORMS`); ``int`` and ``pair`` take the first padded axis's widths for
    every axis (what they can say)."""
    items = sorted((int(a), [int(w) for w in v]) for a, v in widths.items())
    first = items[0][1] if items else [0, 0]
    if form == "int":
        return first[0]
    if form == "pair":
        return list(first)
    if form == "negative_axes":
        return {a - rank: v for a, v in items}
    if form == "list":
        start = items[0][0] if items else rank - 1
        given = dict(items)
        return [given.get(a, [0, 0]) for a in range(start, rank)]
    if form != "mapping":
        raise ValueError(f"padding form {form!r}: expected one of {', '.join(PADDING_FORMS)}")
    return dict(items)


def family(shape: list[int], padding: dict[int, list[int]], dtype: str = "float32",
           constant_value: float | str = 0.0, padding_form: str = "mapping",
           ) -> tuple[dict, str]:
    """Catalog family ``pad``: {shape, padding, constant_value (a number or an IEEE class),
    padding_form}."""
    from pytest_xtc.ops import spec
    from pytest_xtc.ops.builder import GraphBuilder

    g = GraphBuilder("pad")
    given = spelled(padding, len(shape), padding_form)
    value = ieee_value(constant_value, dtype)
    y = g.node("pad", "Y", [g.tensor("X", shape, dtype)], padding=given,
               constant_value=value)
    shown = "" if constant_value in (0, "zero") and not str(value).startswith("-") else (
        f"-v{value_label(constant_value)}")
    form = "" if padding_form == "mapping" else f"-{padding_form}"
    return g.output(y), label(shape, spec.padding(given, len(shape))) + shown + form
