"""Comparing a target's outputs with the float64 reference, and saying what went wrong."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pytest_xtc.core.reference import Reference


@dataclass
class Mismatch:
    """One output that is outside its bound, with the figures a failure must state."""

    output: str
    max_error: float
    where: tuple[int, ...]
    got: float
    expected: float
    bound: float
    ratio: float  # largest error / bound over the output; inf where the bound is 0
    exceeding: int
    size: int
    unwritten: int  # elements still NaN: never written by the kernel

    def describe(self) -> str:
        head = f"output {self.output}: {self.exceeding} of {self.size} elements exceed the bound"
        if self.unwritten:
            head += f" ({self.unwritten} never written: still NaN)"
        rule = "exact rule: must be bit-exact" if self.bound == 0 else f"bound {self.bound:.3g}"
        return (
            f"{head}; largest error {self.max_error:.3g} at {list(self.where)} "
            f"(got {self.got!r}, expected {self.expected!r}, {rule}); "
            f"error/bound ratio {self.ratio:.3g}"
        )


@dataclass
class Comparison:
    mismatches: list[Mismatch] = field(default_factory=list)
    worst_ratio: float = 0.0  # largest error / bound over every output (0 when exact)

    @property
    def ok(self) -> bool:
        return not self.mismatches


def compare(
    names: Sequence[str], outputs: Sequence[np.ndarray], reference: Reference
) -> Comparison:
    """Element-wise ``|out - ref| <= bound``; NaN anywhere fails."""
    result = Comparison()
    for name, out, expected, bound in zip(
        names, outputs, reference.values, reference.bounds, strict=True
    ):
        error = np.abs(out.astype(np.float64) - expected)
        bad = ~(error <= bound)  # NaN compares false, so it is bad
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = np.where(
                bound > 0, error / np.where(bound > 0, bound, 1), np.where(error > 0, np.inf, 0)
            )
        ratios = np.where(np.isnan(error), np.inf, ratios)
        if ratios.size:
            result.worst_ratio = max(result.worst_ratio, float(ratios.max()))
        if not bad.any():
            continue
        ranked = np.where(np.isnan(error), np.inf, error)
        flat = int(np.argmax(ranked))
        where = tuple(int(i) for i in np.unravel_index(flat, out.shape))
        result.mismatches.append(
            Mismatch(
                output=name,
                max_error=float(ranked.flat[flat]),
                where=where,
                got=float(out[where]),
                expected=float(expected[where]),
                bound=float(bound[where]),
                ratio=float(ratios.max()),
                exceeding=int(bad.sum()),
                size=int(out.size),
                unwritten=int(np.isnan(out).sum()),
            )
        )
    return result


def differing(a: np.ndarray, b: np.ndarray) -> int:
    """How many elements of two same-shaped arrays differ bit for bit (NaN payloads too)."""
    bytes_a = np.ascontiguousarray(a).view(np.uint8).reshape((*a.shape, -1))
    bytes_b = np.ascontiguousarray(b).view(np.uint8).reshape((*b.shape, -1))
    return int((bytes_a != bytes_b).any(-1).sum())


def changed_inputs(
    names: Sequence[str], before: Sequence[np.ndarray], after: Sequence[np.ndarray]
) -> list[str]:
    """Inputs whose bytes differ after the run, with how many elements changed."""
    return [
        f"input {name} was modified by the kernel ({count} elements changed)"
        for name, old, new in zip(names, before, after, strict=True)
        if (count := differing(old, new))
    ]


def unstable_outputs(
    names: Sequence[str], first: Sequence[np.ndarray], second: Sequence[np.ndarray]
) -> list[str]:
    """Outputs that differ bit for bit between two runs of the same kernel on the same
    inputs (a nondeterministic parallel reduction, say)."""
    return [
        f"output {name} changed between two runs ({count} elements differ)"
        for name, a, b in zip(names, first, second, strict=True)
        if (count := differing(a, b))
    ]
