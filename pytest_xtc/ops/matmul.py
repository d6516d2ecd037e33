"""``matmul``: C[i, j] = sum_k A[i, k] B[k, j]. As XTC defines it for N-D operands, A is
read as (A.shape[0], prod(A.shape[1:])) and B as (prod(B.shape[:-1]), B.shape[-1])."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from pytest_xtc.ops.contraction import Contraction
from pytest_xtc.ops.spec import Attrs, Shape


class Matmul(Contraction):
    name = "matmul"
    arity = 2
    loops, reductions = ("i", "j", "k"), ("k",)

    def shape(self, shapes: Sequence[Shape], attrs: Attrs) -> Shape:
        a, b = shapes
        if len(a) < 2 or len(b) < 2:
            raise ValueError("both operands need at least 2 dimensions")
        if math.prod(a[1:]) != math.prod(b[:-1]):
            folded = (" (XTC's matmul has no batch: it folds A's trailing and B's leading "
                      "dimensions into the reduction; write one 2-D matmul per batch)"
                      if len(a) > 2 or len(b) > 2 else "")
            raise ValueError(f"reduction sizes differ: {math.prod(a[1:])} and "
                             f"{math.prod(b[:-1])}{folded}")
        return (a[0], b[-1])

    def forward(self, args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        a, b = args
        with np.errstate(over="ignore", invalid="ignore"):  # special values: IEEE results
            return np.matmul(a.reshape(a.shape[0], -1), b.reshape(-1, b.shape[-1]))

    def reduction(self, shapes: Sequence[Shape], attrs: Attrs) -> int:
        return math.prod(shapes[0][1:])


OP = Matmul()


def family(i: int, j: int, k: int, dtype: str = "float32") -> tuple[dict, str]:
    """Catalog family ``matmul``: [i, j, k]."""
    from pytest_xtc.ops.builder import GraphBuilder

    g = GraphBuilder("matmul")
    c = g.node("matmul", "C", [g.tensor("A", (i, k), dtype), g.tensor("B", (k, j), dtype)])
    return g.output(c), f"{i}x{j}x{k}"
