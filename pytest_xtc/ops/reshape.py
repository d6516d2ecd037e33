"""``reshape``: the same elements in a new shape (one ``-1`` is inferred)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from pytest_xtc.ops.spec import Attr, Attrs, Op, Shape, int_tuple


def _shape(value: Any, rank: int) -> tuple[int, ...]:
    shape = int_tuple(value, rank)
    if shape.count(-1) > 1 or any(d == 0 or d < -1 for d in shape):
        raise ValueError("expected positive sizes and at most one -1")
    return shape


class Reshape(Op):
    name = "reshape"
    attrs = (Attr("shape", _shape, doc="the new shape, one -1 at most"),)
    #: one size inferred (-1), or every size written
    forms: ClassVar[Mapping[str, tuple[str, ...]]] = {"shape": ("inferred", "explicit")}

    def shape(self, shapes: Sequence[Shape], attrs: Attrs) -> Shape:
        size, shape = math.prod(shapes[0]), list(attrs["shape"])
        known = math.prod(d for d in shape if d != -1)
        if -1 in shape:
            if size % known:
                raise ValueError(f"{size} elements do not fit {attrs['shape']}")
            shape[shape.index(-1)] = size // known
        elif known != size:
            raise ValueError(f"{size} elements do not fit {attrs['shape']}")
        return tuple(shape)

    def forward(self, args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        return args[0].reshape(attrs["shape"])


OP = Reshape()


def family(shape: list[int], to: list[int], dtype: str = "float32",
           shape_form: str = "inferred") -> tuple[dict, str]:
    """Catalog family ``reshape``: {shape, to, shape_form} (``explicit``: the -1 of
    ``to`` written out)."""
    from pytest_xtc.ops.builder import GraphBuilder

    if shape_form == "explicit":
        to = list(OP.shape([tuple(shape)], {"shape": tuple(to)}))
    g = GraphBuilder("reshape")
    y = g.node("reshape", "Y", [g.tensor("X", shape, dtype)], shape=to)
    form = "" if shape_form == "inferred" else f"-{shape_form}"
    return g.output(y), f"{'x'.join(map(str, shape))}-to{'x'.join(map(str, to))}{form}"
