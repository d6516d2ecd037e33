"""Comparing a target's outputs with the float64 reference, and saying what went wrong."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytest_xtc.core.cases import values
from pytest_xtc.core.judging.reference import Reference
from pytest_xtc.core.judging.wrong_map import wrong_map


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
    unwritten: int  # elements still holding the unwritten sentinel (values.py)
    bitwise: bool = False  # data movement: compared bit for bit
    got_bits: str = ""
    expected_bits: str = ""
    wrong_map: dict[str, Any] | None = None  # where the wrong elements lie (wrong_map.py)

    def describe(self) -> str:
        head = f"output {self.output}: {self.exceeding} of {self.size} elements exceed the bound"
        if self.unwritten:
            head += f" ({self.unwritten} never written: still NaN, the sentinel bits)"
        if self.bitwise:
            rule = "bit-exact rule: data movement keeps every bit"
        elif not np.isfinite(self.expected):
            rule = "IEEE rule for special values"
        elif self.bound == 0:
            rule = "exact rule: must be bit-exact"
        else:
            rule = f"bound {self.bound:.3g}"
        got, expected = repr(self.got), repr(self.expected)
        if self.got_bits:
            got, expected = f"{got} = {self.got_bits}", f"{expected} = {self.expected_bits}"
        return (
            f"{head}; largest error {self.max_error:.3g} at {list(self.where)} "
            f"(got {got}, expected {expected}, {rule}); "
            f"error/bound ratio {self.ratio:.3g}"
        )


@dataclass
class Comparison:
    mismatches: list[Mismatch] = field(default_factory=list)
    worst_ratio: float = 0.0  # largest error / bound over every output (0 when exact)

    @property
    def ok(self) -> bool:
        return not self.mismatches


def _narrowed(expected: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``expected`` in the output's dtype (out of its range: inf, without a warning)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return expected.astype(dtype)


def _bits(value: np.ndarray) -> str:
    size = value.dtype.itemsize
    uint = {2: np.uint16, 4: np.uint32, 8: np.uint64}[size]
    return f"0x{int(np.asarray(value).view(uint)):0{2 * size}x}"


def _judge(
    out: np.ndarray, expected: np.ndarray, bound: np.ndarray, bitwise: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(good, error, ratio) element-wise, by the output's rule."""
    with np.errstate(invalid="ignore", over="ignore"):  # a faulty output's NaNs: no warning
        got = out.astype(np.float64)
        error = np.abs(got - expected)
        if bitwise:
            same = differing_mask(out, expected.astype(out.dtype))
            good = ~same
            error = np.where(good, 0.0, np.where(np.isnan(error), np.inf, error))
        else:
            good = error <= bound  # NaN compares false, so it is bad
            special = ~np.isfinite(expected)
            good = np.where(np.isnan(expected), np.isnan(got), good)
            good = np.where(np.isinf(expected), got == expected, good)
            error = np.where(special, np.where(good, 0.0, np.inf), error)
            error = np.where(np.isnan(error), np.inf, error)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # past it: inf
        ratio = np.where(bound > 0, error / np.where(bound > 0, bound, 1),
                         np.where(error > 0, np.inf, 0.0))
    return good, error, ratio


def compare(
    names: Sequence[str], outputs: Sequence[np.ndarray], reference: Reference
) -> Comparison:
    """Element-wise by each output's rule (README, "When is a result right"): within the
    bound, the NaN and +-Inf IEEE fixes, bit for bit for data movement; an element still
    holding the unwritten sentinel fails; an element only required written passes once
    written."""
    result = Comparison()
    count = len(outputs)
    free = reference.free or [None] * count
    bitwise = reference.bitwise or [False] * count
    for name, out, expected, bound, loose, exact_bits in zip(
        names, outputs, reference.values, reference.bounds, free, bitwise, strict=True
    ):
        good, error, ratios = _judge(out, expected, bound, exact_bits)
        unwritten = values.unwritten_mask(out)
        if loose is not None:
            good = good | loose
            ratios = np.where(loose, 0.0, ratios)
        good &= ~unwritten
        ratios = np.where(unwritten, np.inf, ratios)
        if ratios.size:
            result.worst_ratio = max(result.worst_ratio, float(ratios.max()))
        bad = ~good
        if not bad.any():
            continue
        ranked = np.where(bad, np.where(unwritten, np.inf, error), -1.0)
        # where to show: an unwritten element first, else the largest error
        flat = int(np.argmax(unwritten)) if unwritten.any() else int(np.argmax(ranked))
        where = tuple(int(i) for i in np.unravel_index(flat, out.shape))
        got_value, expected_value = float(out[where]), float(expected[where])
        show_bits = exact_bits or bool(unwritten[where]) or got_value == expected_value or (
            np.isnan(got_value) and np.isnan(expected_value))
        result.mismatches.append(
            Mismatch(
                output=name,
                max_error=float(ranked.flat[flat]),
                where=where,
                got=got_value,
                expected=expected_value,
                bound=float(bound[where]),
                ratio=float(ratios.max()),
                exceeding=int(bad.sum()),
                size=int(out.size),
                unwritten=int(unwritten.sum()),
                bitwise=exact_bits,
                got_bits=_bits(out[where]) if show_bits else "",
                expected_bits=_bits(_narrowed(expected, out.dtype)[where]) if show_bits else "",
                wrong_map=wrong_map(name, bad),
            )
        )
    return result


def differing_mask(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """True where two same-shaped arrays differ bit for bit (NaN payloads too)."""
    bytes_a = np.ascontiguousarray(a).view(np.uint8).reshape((*a.shape, -1))
    bytes_b = np.ascontiguousarray(b).view(np.uint8).reshape((*b.shape, -1))
    return (bytes_a != bytes_b).any(-1)


def differing(a: np.ndarray, b: np.ndarray) -> int:
    """How many elements of two same-shaped arrays differ bit for bit (NaN payloads too)."""
    return int(differing_mask(a, b).sum())


def changed_inputs(
    names: Sequence[str], before: Sequence[np.ndarray], after: Sequence[np.ndarray]
) -> list[str]:
    """Inputs whose bytes differ after the run, with how many elements changed (an input
    left as the very array given is unchanged: its bytes were compared where it ran)."""
    return [
        f"input {name} was modified by the kernel ({count} elements changed)"
        for name, old, new in zip(names, before, after, strict=True)
        if old is not new and (count := differing(old, new))
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
