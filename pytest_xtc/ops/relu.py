"""``relu``: max(x, threshold), threshold 0 by default (XTC's graph-level ``forward``
honours ``threshold``; a target that ignores it is wrong). 1-Lipschitz: it passes its
argument's error bound through."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pytest_xtc.ops.spec import Attr, Attrs, Bound, Op, Shape, number


class Relu(Op):
    name = "relu"
    attrs = (Attr("threshold", number, 0.0, "a number"),)

    def shape(self, shapes: Sequence[Shape], attrs: Attrs) -> Shape:
        return tuple(shapes[0])

    def forward(self, args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        x = args[0]
        return np.maximum(x, np.asarray(attrs["threshold"], dtype=x.dtype))

    def bound(self, args: Sequence[np.ndarray], errs: Sequence[Bound], attrs: Attrs,
              u: float) -> Bound:
        return errs[0]


OP = Relu()


def family(*shape: int, dtype: str = "float32") -> tuple[dict, str]:
    """Catalog family ``relu``: the input's shape."""
    from pytest_xtc.ops.builder import GraphBuilder

    g = GraphBuilder("relu")
    y = g.node("relu", "Y", [g.tensor("X", shape, dtype)])
    return g.output(y), "x".join(map(str, shape))
