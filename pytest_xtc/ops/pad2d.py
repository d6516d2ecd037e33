"""``pad2d``: constant padding of two axes, H and W of NHWC unless ``axes`` says others.
``padding`` takes XTC's spellings (its op factory): an integer (both axes, both sides),
``[p]`` (the same), ``[before, after]`` (both axes), ``[[top, bottom], [left, right]]``,
``[top, bottom, left, right]``, or what XTC's graph dump holds, ``{axis: [before, after]}``
(``axes`` then does not apply).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from pytest_xtc.ops.pad import Pad
from pytest_xtc.ops.spec import (
    IEEE_CLASSES,
    Attr,
    Attrs,
    Shape,
    ieee_value,
    integer,
    number,
    padding,
    value_label,
)

#: XTC's spellings of pad2d's ``padding``, by name (:func:`spelled`).
PADDING_FORMS = ("mapping", "int", "one", "pair", "pairs", "sides", "negative_axes")
#: ``axes``: absent (-3, -2), written out from 0, written from the end.
AXES_FORMS = ("default", "explicit", "negative")


def _axes(value: Any, rank: int) -> tuple[int, int]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ValueError("expected two axes")
    first, second = (integer(v, rank) % rank for v in value)
    if first == second:
        raise ValueError("the two axes must differ")
    return (first, second)


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _pad2d(value: Any, rank: int) -> Any:
    """An integer, a mapping ({axis: widths}, normalized) or the four sides (top, bottom,
    left, right) that XTC's list spellings say."""
    if isinstance(value, Mapping) and len(value) <= 2:
        return padding(value, rank)
    if _int(value):
        return value
    if isinstance(value, (list, tuple)):
        items = list(value)
        if len(items) == 1 and _int(items[0]):
            return items[0]
        if len(items) == 2 and all(_int(v) for v in items):
            return (items[0], items[1], items[0], items[1])
        if len(items) == 2 and all(isinstance(v, (list, tuple)) and len(v) == 2
                                   and all(_int(w) for w in v) for v in items):
            return (*items[0], *items[1])
        if len(items) == 4 and all(_int(v) for v in items):
            return tuple(items)
    raise ValueError("expected an integer, [p], [before, after], [[top, bottom], [left, "
                     "right]], [top, bottom, left, right] or {axis: [before, after]}")


class Pad2d(Pad):
    name = "pad2d"
    attrs = (
        Attr("padding", _pad2d, doc="an integer, a list (XTC's forms) or {axis: [before, after]}"),
        Attr("constant_value", number, 0.0, "a number"),
        Attr("axes", _axes, None, "two axes (default: -3, -2)"),
    )
    forms: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "padding": PADDING_FORMS, "constant_value": IEEE_CLASSES, "axes": AXES_FORMS}

    def shape(self, shapes: Sequence[Shape], attrs: Attrs) -> Shape:
        return super().shape(shapes, self._widths(attrs, len(shapes[0])))

    def forward(self, args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        return super().forward(args, self._widths(attrs, args[0].ndim))

    def widths(self, attrs: Attrs, rank: int) -> dict[int, tuple[int, int]]:
        return super().widths(self._widths(attrs, rank), rank)

    @staticmethod
    def _widths(attrs: Attrs, rank: int) -> Attrs:
        """The attributes with ``padding`` as {axis: (before, after)}."""
        pads = attrs["padding"]
        if isinstance(pads, Mapping):
            return attrs
        axes = attrs["axes"] or ((rank - 3) % rank, (rank - 2) % rank)
        sides = (pads,) * 4 if isinstance(pads, int) else pads
        widths = {axes[0]: (sides[0], sides[1]), axes[1]: (sides[2], sides[3])}
        return {**attrs, "padding": {a: w for a, w in sorted(widths.items()) if w != (0, 0)}}


OP = Pad2d()


def spelled(sides: Sequence[int], form: str) -> Any:
    """Padding of H and W (NHWC, axes 1 and 2) by ``sides`` (top, bottom, left, right) in
    XTC's spelling ``form`` (:data:`PADDING_FORMS`); ``int``, ``one`` and ``pair`` say
    what they can (top; top; top and bottom for both axes)."""
    top, bottom, left, right = (int(v) for v in sides)
    spellings: dict[str, Any] = {
        "int": top, "one": [top], "pair": [top, bottom], "pairs": [[top, bottom], [left, right]],
        "sides": [top, bottom, left, right], "mapping": {1: [top, bottom], 2: [left, right]},
        "negative_axes": {-3: [top, bottom], -2: [left, right]},
    }
    if form not in spellings:
        raise ValueError(f"pad2d padding form {form!r}: expected one of "
                         f"{', '.join(PADDING_FORMS)}")
    return spellings[form]


def family(n: int, h: int, w: int, c: int, width: int, dtype: str = "float32",
           sides: Sequence[int] | None = None, constant_value: float | str = 0.0,
           padding_form: str = "mapping", axes_form: str = "default") -> tuple[dict, str]:
    """Catalog family ``pad2d``: [n, h, w, c, width], or {n, h, w, c, width: 0, sides:
    [top, bottom, left, right], constant_value (a number or an IEEE class), padding_form,
    axes_form}."""
    from pytest_xtc.ops.builder import GraphBuilder

    g = GraphBuilder("pad2d")
    given = spelled(sides if sides is not None else (width,) * 4, padding_form)
    axes = {"default": {}, "explicit": {"axes": [1, 2]}, "negative": {"axes": [-3, -2]}}
    value = ieee_value(constant_value, dtype)
    y = g.node("pad2d", "Y", [g.tensor("X", (n, h, w, c), dtype)], padding=given,
               constant_value=value, **axes[axes_form])
    widths = OP._widths(OP.normalize({"padding": given, **axes[axes_form]},
                                     [(n, h, w, c)]), 4)["padding"]
    top, bottom = widths.get(1, (0, 0))
    left, right = widths.get(2, (0, 0))
    pads = f"{top}" if len({top, bottom, left, right}) == 1 else f"{top}-{bottom}_{left}-{right}"
    shown = "" if constant_value in (0, "zero") and not str(value).startswith("-") else (
        f"-v{value_label(constant_value)}")
    forms = "".join(f"-{f}" for f in (padding_form, axes_form) if f not in ("mapping", "default"))
    return g.output(y), f"{n}x{h}x{w}x{c}-pad{pads}{shown}{forms}"
