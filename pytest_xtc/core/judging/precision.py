"""The statistical precision check: effective mantissa bits of a contraction's results.
No pytest.

The rigorous bound (``gamma_K |A||B|``) is blind to a float32 target computing on inputs
rounded to TF32 or float16 once K is in the thousands: it is loose by about K for
zero-mean data. This check measures the error's size against two models (research report
of this project, "A statistical precision check", validated on 10 honest summation orders
x 200 seeds with no false alarm, and every TF32/fp16/bf16 target caught, per case too):

* honest float32 recursive summation, the least accurate usual order, per element
  ``V = (u^2/6) [K C^2/3 + (K/6 + 1) S2]``, with ``S2 = kappa^2 (|A||B|)^2 / K``
  (``kappa^2 = 16/9`` for the suite's uniform inputs) estimating ``sum_k (a_k b_k)^2``;
* inputs rounded to p bits: ``E[e^2] = (u_p^2/3) S2``.

Over the elements of a case (or pooled over cases: the sums add), with ``E = sum e^2``:
``excess = E - 2 V``; effective bits = p if excess <= 0, else ``min(p, -log2(3 excess /
S) / 2)``. A float32 result with at least 16 elements reading below 16 bits fails: every
honest order reads 24, legitimate fast algorithms (Strassen, Winograd F(4,3)) 17 or more,
TF32 and float16 inputs about 11, bfloat16 about 8. float64 is measured, never decided:
its reference would need more than float64 to separate the models.

Only random-input cases (uniform in [-1, 1)) whose outputs come from one contraction of
graph inputs are measured, and only when the rigorous check found nothing wrong.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

KAPPA2 = 16.0 / 9.0  # E[(ab)^2] / E[|ab|]^2 for a, b ~ U(-1, 1)
C_SUB = 2.0  # multiples of the honest (recursive summation) error removed
MIN_ELEMENTS = 16  # elements needed before deciding
MANTISSA_BITS = {"float16": 11, "float32": 24, "float64": 53}  # implicit bit counted
FAIL_BELOW = {"float32": 16}  # dtypes decided, and their threshold in bits


@dataclass
class Terms:
    """The sums of one case (or of many: they add): ``e2`` = sum of squared errors,
    ``v`` = sum of the honest-summation variances over u^2, ``s2`` = sum of S2, ``n``
    elements."""

    dtype: str
    e2: float = 0.0
    v: float = 0.0
    s2: float = 0.0
    n: int = 0

    def __add__(self, other: Terms) -> Terms:
        if other.dtype != self.dtype:
            raise ValueError(f"cannot pool {self.dtype} with {other.dtype}")
        return Terms(self.dtype, self.e2 + other.e2, self.v + other.v, self.s2 + other.s2,
                     self.n + other.n)

    @property
    def bits(self) -> float:
        """Effective mantissa bits (the implicit bit counted)."""
        p = MANTISSA_BITS[self.dtype]
        excess = self.e2 - C_SUB * self.v * 2.0 ** (-2 * p)
        if self.s2 <= 0 or excess <= 0:
            return float(p)
        return min(float(p), -0.5 * math.log2(3.0 * excess / self.s2))

    @property
    def ratio(self) -> float:
        """RMS error over that of honest recursive summation in the dtype."""
        honest = self.v * 2.0 ** (-2 * MANTISSA_BITS[self.dtype])
        return math.sqrt(self.e2 / honest) if honest > 0 else 0.0

    def problem(self) -> str | None:
        """None when consistent with the dtype's arithmetic (or not decided), else why."""
        threshold = FAIL_BELOW.get(self.dtype)
        bits = self.bits
        if threshold is None or self.n < MIN_ELEMENTS or bits >= threshold:
            return None
        p = MANTISSA_BITS[self.dtype]
        return (
            f"effective precision {bits:.1f} bits < {threshold} ({self.dtype} has {p}): RMS "
            f"error over {self.n} random-input elements is {self.ratio:.3g}x that of "
            f"{self.dtype} recursive summation; inputs look rounded to lower precision "
            "(TF32/float16/bfloat16?)"
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["bits"] = round(self.bits, 3)
        data["decided"] = self.dtype in FAIL_BELOW and self.n >= MIN_ELEMENTS
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Terms:
        return cls(str(data["dtype"]), float(data["e2"]), float(data["v"]),
                   float(data["s2"]), int(data["n"]))


def terms(dtype: str, got: np.ndarray, expected: np.ndarray, magnitude: np.ndarray,
          k: int) -> Terms:
    """One output's sums: ``got`` the target's result, ``expected`` the float64 reference,
    ``magnitude`` = |A||B|, ``k`` the reduction length."""
    error = (got.astype(np.float64) - expected).ravel()
    s2 = np.square(magnitude) * (KAPPA2 / k)
    v = (k / 3.0) * np.square(expected) + (k / 6.0 + 1.0) * s2
    # the sum of squares by einsum's own loop, not BLAS: BLAS's dot of a long vector
    # wakes its thread pool, whose threads then spin on the cores a worker needs
    return Terms(dtype, float(np.einsum("i,i->", error, error)), float(v.sum()) / 6.0,
                 float(s2.sum()), int(error.size))


def pool(found: Iterable[Terms]) -> dict[str, Terms]:
    """Pooled sums per dtype (a report's effective bits per target and dtype)."""
    total: dict[str, Terms] = {}
    for t in found:
        total[t.dtype] = total[t.dtype] + t if t.dtype in total else t
    return total
