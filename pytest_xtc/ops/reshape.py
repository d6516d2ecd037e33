"""``reshape``: the same elements in a new shape (one ``-1`` is inferred)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

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


def family(shape: list[int], to: list[int], dtype: str = "float32") -> tuple[dict, str]:
    """Catalog family ``reshape``: {shape, to}."""
    from pytest_xtc.ops.builder import GraphBuilder

    g = GraphBuilder("reshape")
    y = g.node("reshape", "Y", [g.tensor("X", shape, dtype)], shape=to)
    return g.output(y), f"{'x'.join(map(str, shape))}-to{'x'.join(map(str, to))}"
