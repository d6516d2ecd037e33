"""What the contractions (matmul, conv2d) share: Higham's rigorous error bound.

A dot product of length K computed in floating point of unit roundoff u, in any summation
order, with or without FMA, satisfies ``|fl(a.b) - a.b| <= gamma_K |a|.|b|`` with
``gamma_K = K u / (1 - K u)`` (Higham, Accuracy and Stability of Numerical Algorithms, 2nd
ed., eq. 3.5). The reference's own float64 rounding, and the rounding in computing the
bound, add ``2 gamma_K(2^-53)``. Arguments that carry an error (an earlier node's result)
add the first-order propagation ``e_a |b| + |a| e_b + e_a e_b``, computed only for the
arguments that carry one. ``u = 0`` (exact inputs: every product and partial sum is
representable) makes the rounding term zero: bit for bit.

IEEE rule (special values, :meth:`Contraction.ieee`): a result is NaN where any of its
products is NaN (a NaN factor, or 0 x Inf) or where it has products +Inf and -Inf; +Inf
(-Inf) where its infinite products all have that sign; otherwise finite, within the bound
above plus the underflow term (:meth:`Contraction.underflow`). Where ``(1 + gamma_K +
2 gamma_K(2^-53)) |A||B|`` over the finite factors exceeds the dtype's largest finite
number, whether the result overflows depends on the summation order (and on FMA):
such elements, unless NaN is certain, are only required written. NaN payloads and the
sign of a zero result are free.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from pytest_xtc.ops.spec import Attrs, Bound, Op, Shape

DEFAULT_C = 1.0  # the bound's constant c: Higham's bound holds as it is

FLOAT64_U = 2.0**-53
FLOAT64_TINY = 2.0**-1074  # the smallest float64 subnormal: 2 eta_64


def scaled(factor: float, magnitude: np.ndarray) -> np.ndarray:
    """``factor * magnitude``, 0 where the magnitude is 0: every product there is exactly
    0, whatever the factor (an infinite gamma_K, K u >= 1, times 0 was NaN, a bound no
    result meets)."""
    with np.errstate(invalid="ignore"):
        return np.where(magnitude == 0, 0.0, factor * magnitude)


def gamma(k: int, u: float) -> float:
    """Higham's gamma_k = k u / (1 - k u)."""
    if k * u >= 1:
        return float("inf")
    return k * u / (1 - k * u)


class Contraction(Op):
    """An op computing dot products of length :meth:`reduction` (two operands)."""

    exact = False
    copies = False

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
            total = scaled(self.rounding(k, u), self.forward([mag_a, mag_b], attrs))
        terms = []
        if ea is not None:
            terms.append(self.forward([ea, abs_b], attrs))
        if eb is not None:
            terms.append(self.forward([abs_a, eb], attrs))
        if ea is not None and eb is not None:
            terms.append(self.forward([ea, eb], attrs))
        for term in terms:
            total = term if total is None else total + term
        if terms and total is not None:  # an infinite error met a zero factor: no bound
            total = np.where(np.isnan(total), np.inf, total)
        return total

    def rounding(self, k: int, u: float) -> float:
        """The factor of |A||B| in the bound: gamma_K(u) plus the reference's own."""
        return gamma(k, u) + 2 * gamma(k, FLOAT64_U)

    def underflow(self, k: int, u: float, dtype: str) -> float:
        """The absolute term for products that underflow, never 0 (Higham eq. 2.8: an
        underflowing product errs by at most eta, half the smallest subnormal; sums do
        not): ``K eta (1 + gamma_K)`` for the target's products, plus ``K eta_64`` for the
        reference's own and ``(3K + 4) eta_64`` for the bound's own float64 products that
        underflow. eta is a power of two made by ``ldexp``: float64's, 2^-1075, is not a
        float64 (written as ``smallest_subnormal / 2`` it was 0.0, and a subnormal result
        whose ``gamma_K |A||B|`` underflowed too had a bound of 0)."""
        eta_exponent = int(np.finfo(dtype).machep) + int(np.finfo(dtype).minexp) - 1
        target = math.ldexp(k * (1 + gamma(k, u)), eta_exponent)
        return target + (2 * k + 2) * FLOAT64_TINY

    def ieee(self, args: Sequence[np.ndarray], errs: Sequence[Bound],
             free: Sequence[np.ndarray | None], attrs: Attrs, u: float,
             dtype: str) -> tuple[np.ndarray, Bound, np.ndarray | None]:
        # Large finite magnitudes overflow in the float64 reference and bound: the rule
        # expects it (such elements are only required written), numpy need not warn.
        with np.errstate(over="ignore"):
            return self._ieee(args, errs, free, attrs, u, dtype)

    def _ieee(self, args: Sequence[np.ndarray], errs: Sequence[Bound],
              free: Sequence[np.ndarray | None], attrs: Attrs, u: float,
              dtype: str) -> tuple[np.ndarray, Bound, np.ndarray | None]:
        a, b = args
        k = self.reduction([a.shape, b.shape], attrs)
        finite_a, finite_b = np.isfinite(a), np.isfinite(b)
        clean = [np.where(finite_a, a, 0.0), np.where(finite_b, b, 0.0)]
        clean_errs = [None if e is None else np.where(f, e, 0.0)
                      for e, f in zip(errs, (finite_a, finite_b), strict=True)]
        value = self.forward(clean, attrs)
        bound = self.bound(clean, clean_errs, attrs, u)
        magnitude = self.magnitude(clean, attrs)
        if u:
            underflow = self.underflow(k, u, dtype)
            bound = np.full(value.shape, underflow) if bound is None else bound + underflow
        ones_a, ones_b = np.ones(a.shape, bool), np.ones(b.shape, bool)

        def meet(x: np.ndarray, y: np.ndarray) -> np.ndarray:
            return self.forward([x.astype(np.float64), y.astype(np.float64)], attrs) > 0

        inf_a, inf_b = np.isinf(a), np.isinf(b)
        nan = (meet(np.isnan(a), ones_b) | meet(ones_a, np.isnan(b))
               | meet(inf_a, b == 0) | meet(a == 0, inf_b))
        positive = (meet(inf_a & (a > 0), b > 0) | meet(inf_a & (a < 0), b < 0)
                    | meet(a > 0, inf_b & (b > 0)) | meet(a < 0, inf_b & (b < 0)))
        negative = (meet(inf_a & (a > 0), b < 0) | meet(inf_a & (a < 0), b > 0)
                    | meet(a > 0, inf_b & (b < 0)) | meet(a < 0, inf_b & (b > 0)))
        nan |= positive & negative
        value = np.where(nan, np.nan, np.where(positive, np.inf,
                                               np.where(negative, -np.inf, value)))
        special = nan | positive | negative
        # a finite product may overflow, or not inside an FMA: +-Inf or NaN then depend on
        # the compiler's choices (NaN from NaN factors, 0 x Inf or Inf - Inf does not)
        overflow = ~nan & (scaled(1 + self.rounding(k, u), magnitude)
                           > float(np.finfo(dtype).max))
        spread = self.spread(free, [a.shape, b.shape], attrs)
        loose = overflow if spread is None else overflow | spread
        dense = np.zeros(value.shape) if bound is None else np.broadcast_to(bound, value.shape)
        bound = np.where(special, 0.0, dense)
        return value, bound, loose if loose.any() else None

    def spread(self, masks: Sequence[np.ndarray | None], shapes: Sequence[Shape],
               attrs: Attrs) -> np.ndarray | None:
        """A result element depends on every element of its rows of A and columns of B."""
        if all(m is None for m in masks):
            return None
        a, b = (np.ones(s) if m is None else m.astype(np.float64)
                for m, s in zip(masks, shapes, strict=True))
        ones = [np.ones(s) for s in shapes]
        total = np.zeros(self.shape(shapes, attrs))
        if masks[0] is not None:
            total = total + self.forward([a, ones[1]], attrs)
        if masks[1] is not None:
            total = total + self.forward([ones[0], b], attrs)
        return total > 0

    def magnitude(self, args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        """|A| |B|, the scale of each result's rounding error."""
        return self.forward([np.abs(args[0]), np.abs(args[1])], attrs)

    def flops(self, shapes: Sequence[Shape], attrs: Attrs) -> int:
        return 2 * math.prod(self.shape(shapes, attrs)) * self.reduction(shapes, attrs)
