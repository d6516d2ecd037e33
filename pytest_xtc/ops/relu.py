"""``relu``: max(x, threshold), threshold 0 by default (XTC's graph-level ``forward``
honours ``threshold``; a target that ignores it is wrong). 1-Lipschitz: it passes its
argument's error bound through.

IEEE rule: relu is IEEE 754-2019 ``maximum(x, threshold)``, as numpy's and XTC's own
graph-level forward compute it: NaN in, NaN out (any payload; a select ``x > t ? x : t``
that turns NaN into the threshold is wrong); +Inf stays, -Inf gives the threshold;
subnormals above the threshold pass unchanged (flushing them to zero is wrong); a zero
result may have either sign (``maximum(-0, +0)`` is +0, a select ``x >= t`` keeps -0,
and the graph does not fix which).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

import numpy as np

from pytest_xtc.ops.spec import (
    IEEE_CLASSES,
    Attr,
    Attrs,
    Bound,
    Op,
    Shape,
    ieee_value,
    number,
    value_label,
)


class Relu(Op):
    name = "relu"
    attrs = (Attr("threshold", number, 0.0, "a number"),)
    forms: ClassVar[Mapping[str, tuple[str, ...]]] = {"threshold": ("default", *IEEE_CLASSES)}
    copies = False  # it selects, but its zero results may take either sign

    def shape(self, shapes: Sequence[Shape], attrs: Attrs) -> Shape:
        return tuple(shapes[0])

    def forward(self, args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        x = args[0]
        return np.maximum(x, np.asarray(attrs["threshold"], dtype=x.dtype))

    def bound(self, args: Sequence[np.ndarray], errs: Sequence[Bound], attrs: Attrs,
              u: float) -> Bound:
        return errs[0]


OP = Relu()


def family(*dims: int, dtype: str = "float32", shape: Sequence[int] | None = None,
           threshold: float | str | None = None) -> tuple[dict, str]:
    """Catalog family ``relu``: the input's shape, or {shape, threshold} (a number, an IEEE
    class, or ``default``: none written)."""
    from pytest_xtc.ops.builder import GraphBuilder

    shape = tuple(shape if shape is not None else dims)
    g = GraphBuilder("relu")
    given = None if threshold in (None, "default") else threshold
    attrs = {} if given is None else {"threshold": ieee_value(given, dtype)}
    y = g.node("relu", "Y", [g.tensor("X", shape, dtype)], **attrs)
    label = "x".join(map(str, shape)) + ("" if given is None else f"-thr{value_label(given)}")
    return g.output(y), label
