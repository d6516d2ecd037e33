"""Faulty host variants of special values and performance claims (issue 33, classes 7 and
8): each must be rejected by the catalog alone, with default options. A performance
fault is rejected when its cases' performance records are marked invalid (a wrong clock
is not a wrong result). :data:`ACCEPTED` holds the variants that are *right*, and must
pass: a target declaring ``deterministic = False`` whose repeat run sums in another order.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pytest_xtc.core.adapter import ONCE, Artifact, RunResult, Timing
from pytest_xtc.core.cases import graphs
from pytest_xtc.core.cases.case import Case
from pytest_xtc.core.judging import reference
from pytest_xtc.selftest.tampered import Tampered
from pytest_xtc.targets.host import HostTarget


class Knowing(Tampered):
    """A tampered host that keeps its case's graph on the artifact (``artifact.graph``)."""

    def compile(self, case: Case, workdir: Path) -> Artifact:
        artifact = super().compile(case, workdir)
        artifact.graph = case.graph  # type: ignore[attr-defined]
        return artifact

    def run(self, artifact: Artifact, inputs: Sequence[np.ndarray],
            outputs: Sequence[np.ndarray], timing: Timing = ONCE) -> RunResult:
        self.graph = getattr(artifact, "graph", None)
        return super().run(artifact, inputs, outputs, timing)

    def last_op(self) -> str:
        return graphs.op_names(self.graph)[-1] if self.graph else ""


def _flush(array: np.ndarray) -> None:
    """Subnormals to zero of the same sign, in place (FTZ/DAZ)."""
    tiny = np.finfo(array.dtype).tiny
    array[(array != 0) & (np.abs(array) < tiny)] *= 0


class ReluFloat16Threshold(Knowing):
    """relu compares in float16: ``x`` stays only where ``float16(x) > 0``, so positives
    below float16's smallest subnormal (float32's subnormals, 1e-8...) become 0."""

    def spoil(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if self.last_op() == "relu":
            for out in outputs:
                with np.errstate(over="ignore"):
                    lost = (out > 0) & ~(out.astype(np.float16) > 0)
                out[lost] = 0


class FlushesSubnormals(Tampered):
    """The kernel runs with flush-to-zero and denormals-are-zero (x86 MXCSR FTZ/DAZ, a
    fast-math build): subnormal inputs read as zero, subnormal results written as zero."""

    def feed(self, inputs: Sequence[np.ndarray]) -> Sequence[np.ndarray]:
        fed = [a.copy() for a in inputs]
        for a in fed:
            _flush(a)
        return fed

    def spoil(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        for out in outputs:
            _flush(out)


class ContractionFlushesSubnormals(FlushesSubnormals, Knowing):
    """FTZ/DAZ in contractions only (a BLAS-like microkernel built with fast-math): data
    movement and relu keep their subnormals."""

    def feed(self, inputs: Sequence[np.ndarray]) -> Sequence[np.ndarray]:
        return super().feed(inputs) if self._contracts() else inputs

    def spoil(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if self._contracts():
            super().spoil(inputs, outputs)

    def _contracts(self) -> bool:
        names = graphs.op_names(self.graph) if self.graph else ()
        return bool({"matmul", "conv2d"} & set(names))


class SkipsZeroProducts(Knowing):
    """matmul skips ``A[i, k] * B[k, :]`` when ``A[i, k]`` is zero (a sparsity shortcut),
    so ``0 x Inf`` and ``0 x NaN`` never make their NaN."""

    def spoil(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        names = graphs.op_names(self.graph) if self.graph else ()
        if not names or names[0] != "matmul" or len(inputs) != 2:
            return
        a, b = (x.astype(np.float64) for x in inputs)
        with np.errstate(all="ignore"):
            products = a[:, :, None] * b[None, :, :]
            honest = products.sum(1)
            skipped = np.where(a[:, :, None] == 0, 0.0, products).sum(1)
            if names[-1] == "relu":
                skipped = np.maximum(skipped, 0.0)
        out = outputs[0]
        changed = np.isnan(honest) & ~np.isnan(skipped)
        out[changed] = skipped[changed].astype(out.dtype)


class SkipsZeroFilters(Knowing):
    """A contraction whose second operand has an all-zero slice along its last axis (a
    pruned conv2d filter, a zero column of B) writes zeros there without computing, so
    ``0 x Inf`` and ``0 x NaN`` in those outputs never make their NaN."""

    def spoil(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        names = graphs.op_names(self.graph) if self.graph else ()
        if not {"matmul", "conv2d"} & set(names) or len(inputs) < 2:
            return
        weights, out = inputs[-1], outputs[0]
        if weights.ndim < 2 or out.shape[-1] != weights.shape[-1]:
            return
        zero = (weights.reshape(-1, weights.shape[-1]) == 0).all(0)
        out[..., zero] = 0


class SaturatesOverflow(Tampered):
    """Results that overflow are clamped to the largest finite value (a saturating
    store): +-Inf comes out as +-max."""

    def spoil(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        for out in outputs:
            big = np.finfo(out.dtype).max
            out[np.isposinf(out)] = big
            out[np.isneginf(out)] = -big


class ReluDropsNan(Knowing):
    """relu as C's ``fmax(x, 0)``, which returns the number when one operand is NaN:
    NaN comes out as 0."""

    def spoil(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if self.last_op() == "relu":
            for out in outputs:
                out[np.isnan(out)] = 0


class TimesTooShort(HostTarget):
    """Right results, but the kernel times it reports are 1000 times too short (a
    runtime reporting milliseconds read as seconds, say)."""

    perf_fault = True

    def run(self, artifact: Artifact, inputs: Sequence[np.ndarray],
            outputs: Sequence[np.ndarray], timing: Timing = ONCE) -> RunResult:
        result = super().run(artifact, inputs, outputs, timing)
        return RunResult([t / 1000 for t in result.times])


class VaryingSum(Knowing):
    """Declares ``deterministic = False`` and is right: its timed calls sum in another
    order (they return the correctly rounded result, the float64 sum rounded once), so
    the repeat run differs from the first call in some bits, within the bound."""

    deterministic = False

    def spoil(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if self.timed and self.graph:
            with np.errstate(all="ignore"):
                found = reference.forward(self.graph, [a.astype(np.float64) for a in inputs])
                for out, value in zip(outputs, found, strict=True):
                    out[...] = value.astype(out.dtype)

    def run(self, artifact: Artifact, inputs: Sequence[np.ndarray],
            outputs: Sequence[np.ndarray], timing: Timing = ONCE) -> RunResult:
        self.timed = timing != ONCE
        return super().run(artifact, inputs, outputs, timing)


class VaryingBeyondBound(VaryingSum):
    """Declares ``deterministic = False``, but its timed calls are off by 2^-7 relative
    (a reduction that drops partial sums): beyond the bound."""

    def spoil(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if self.timed:
            for out in outputs:
                out *= np.asarray(1 + 2.0**-7, out.dtype)


FAULTS: dict[str, type[HostTarget]] = {
    "relu-float16-threshold": ReluFloat16Threshold,
    "flushes-subnormals": FlushesSubnormals,
    "contraction-flushes-subnormals": ContractionFlushesSubnormals,
    "skips-zero-products": SkipsZeroProducts,
    "skips-zero-filters": SkipsZeroFilters,
    "saturates-overflow": SaturatesOverflow,
    "relu-drops-nan": ReluDropsNan,
    "varying-beyond-bound": VaryingBeyondBound,
    "times-too-short": TimesTooShort,
}
#: Right variants the suite must accept (``--xtc-repeat-check`` included).
ACCEPTED: dict[str, type[HostTarget]] = {"varying-sum": VaryingSum}
