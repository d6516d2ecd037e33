"""What the contractions (matmul, conv2d) share: Higham's rigorous error bound.

A dot product of length K computed in floating point of unit roundoff u, in any summation
order, with or without FMA, satisfies ``|fl(a.b) - a.b| <= gamma_K |a|.|b|`` with
``gamma_K = K u / (1 - K u)`` (Higham, Accuracy and Stability of Numerical Algorithms, 2nd
ed., eq. 3.5). The reference's own float64 rounding, and the rounding in computing the
bound, add ``2 gamma_K(2^-53)``. Arguments that carry an error (an earlier node's result)
add the first-order propagation ``e_a |b| + |a| e_b + e_a e_b``, computed only for the
arguments that carry one. ``u = 0`` (exact inputs: every product and partial sum is
representable) makes the rounding term zero: bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from pytest_xtc.ops.spec import Attrs, Bound, Op, Shape

FLOAT64_U = 2.0**-53


def gamma(k: int, u: float) -> float:
    """Higham's gamma_k = k u / (1 - k u)."""
    if k * u >= 1:
        return float("inf")
    return k * u / (1 - k * u)


class Contraction(Op):
    """An op computing dot products of length :meth:`reduction` (two operands)."""

    exact = False

    def bound(self, args: Sequence[np.ndarray], errs: Sequence[Bound], attrs: Attrs,
              u: float) -> Bound:
        a, b = args
        ea, eb = errs
        k = self.reduction([a.shape, b.shape], attrs)
        abs_a, abs_b = np.abs(a), np.abs(b)
        total: np.ndarray | None = None
        if u:
            mag_a = abs_a if ea is None else abs_a + ea
            mag_b = abs_b if eb is None else abs_b + eb
            rounding = gamma(k, u) + 2 * gamma(k, FLOAT64_U)
            total = rounding * self.forward([mag_a, mag_b], attrs)
        terms = []
        if ea is not None:
            terms.append(self.forward([ea, abs_b], attrs))
        if eb is not None:
            terms.append(self.forward([abs_a, eb], attrs))
        if ea is not None and eb is not None:
            terms.append(self.forward([ea, eb], attrs))
        for term in terms:
            total = term if total is None else total + term
        return total

    def magnitude(self, args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        """|A| |B|, the scale of each result's rounding error."""
        return self.forward([np.abs(args[0]), np.abs(args[1])], attrs)

    def flops(self, shapes: Sequence[Shape], attrs: Attrs) -> int:
        return 2 * math.prod(self.shape(shapes, attrs)) * self.reduction(shapes, attrs)
