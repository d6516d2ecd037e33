"""Deliberately faulty variants of the host target: the suite must reject every one.

Each compiles and runs real XTC kernels, then goes wrong in one known way. They prove
that the checks can fail (``xtc-conformance selftest`` and the plugin's own tests).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from pytest_xtc.core.adapter import ONCE, Artifact, RunResult, TargetSpec, Timing
from pytest_xtc.core.cases import graphs
from pytest_xtc.core.cases.case import Case
from pytest_xtc.selftest.faults_dimensions import DIMENSION_FAULTS
from pytest_xtc.selftest.faults_model import MODEL_FAULTS
from pytest_xtc.selftest.faults_numbers import FAULTS as NUMBER_FAULTS
from pytest_xtc.selftest.hidden import (
    KeepsDtypeState,
    KeepsShapeState,
    PointwiseConvOffset,
    TimedOnStaleInputs,
    WrongFromThirdCall,
    WrongWhenTimed,
)
from pytest_xtc.selftest.tampered import Tampered
from pytest_xtc.targets.host import HostTarget

__all__ = ["FAULTS", "Tampered", "make"]


class LastRowWrong(Tampered):
    """A tile-remainder bug: when the first dimension of an output is not a multiple of
    the tile (4), its last row repeats the row above it."""

    TILE = 4

    def spoil(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        for out in outputs:
            rows = out.shape[0] if out.ndim else 0
            if rows > 1 and rows % self.TILE:
                out[-1] = out[-2]


class Float16Arithmetic(Tampered):
    """Inputs and results pass through float16, as if the kernel computed in half."""

    def feed(self, inputs: Sequence[np.ndarray]) -> Sequence[np.ndarray]:
        return [a.astype(np.float16).astype(a.dtype) for a in inputs]

    def spoil(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        for out in outputs:
            out[...] = out.astype(np.float16).astype(out.dtype)


class OutputNeverWritten(HostTarget):
    """Compiles, but never runs the kernel: outputs keep whatever they held."""

    def run(
        self,
        artifact: Artifact,
        inputs: Sequence[np.ndarray],
        outputs: Sequence[np.ndarray],
        timing: Timing = ONCE,
    ) -> RunResult:
        return RunResult()


class InputOverwritten(Tampered):
    """The kernel scribbles on its first input after computing."""

    def spoil(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        inputs[0].flat[0] = inputs[0].flat[0] + np.asarray(1, inputs[0].dtype)


class TransposedOperand(Tampered):
    """The kernel reads its last input transposed (same memory, wrong layout)."""

    def feed(self, inputs: Sequence[np.ndarray]) -> Sequence[np.ndarray]:
        last = inputs[-1]
        swapped = np.ascontiguousarray(last.reshape(last.shape[::-1]).T) if last.ndim == 2 else last
        return [*inputs[:-1], swapped]


class ReluPassesNegatives(HostTarget):
    """Every relu is compiled as a plain copy (a pad of width 0): negatives pass through."""

    def compile(self, case: Case, workdir: Path) -> Artifact:
        graph = copy.deepcopy(case.graph)
        for node in graph["nodes"]:
            if node["expr"]["op"]["name"] == "relu":
                node["expr"]["op"] = {"name": "pad", "attrs": {"padding": {0: [0, 0]}}}
        return super().compile(replace(case, graph=graph), workdir)


class ConvIgnoresStride(HostTarget):
    """conv2d computed with stride 1; the output keeps the first windows, not strided ones."""

    def compile(self, case: Case, workdir: Path) -> Artifact:
        graph = copy.deepcopy(case.graph)
        for node in graph["nodes"]:
            if node["expr"]["op"]["name"] == "conv2d":
                node["expr"]["op"]["attrs"]["stride"] = [1, 1]
        artifact = super().compile(replace(case, graph=graph), workdir)
        artifact.handle = (artifact.handle, [o.shape for o in graphs.outputs(graph)])
        return artifact

    def run(
        self,
        artifact: Artifact,
        inputs: Sequence[np.ndarray],
        outputs: Sequence[np.ndarray],
        timing: Timing = ONCE,
    ) -> RunResult:
        module, shapes = artifact.handle
        full = [np.full(s, np.nan, dtype=o.dtype) for s, o in zip(shapes, outputs, strict=True)]
        result = super().run(Artifact(artifact.directory, module), inputs, full, timing)
        for out, whole in zip(outputs, full, strict=True):
            out[...] = whole[tuple(slice(0, n) for n in out.shape)]
        return result


class Crash(HostTarget):
    """The kernel dereferences a null pointer: the process dies of SIGSEGV."""

    def run(
        self,
        artifact: Artifact,
        inputs: Sequence[np.ndarray],
        outputs: Sequence[np.ndarray],
        timing: Timing = ONCE,
    ) -> RunResult:
        import ctypes

        ctypes.string_at(0)  # a segmentation fault, as a broken kernel would
        raise AssertionError("unreachable")


class Hang(HostTarget):
    """The kernel never returns (its run time limit is 0.5 s, to keep the proof short)."""

    def time_limits(self) -> tuple[float, float]:
        return (120.0, 0.5)

    def run(
        self,
        artifact: Artifact,
        inputs: Sequence[np.ndarray],
        outputs: Sequence[np.ndarray],
        timing: Timing = ONCE,
    ) -> RunResult:
        while True:
            time.sleep(60)


class WritesPastOutput(HostTarget):
    """A real out-of-bounds write: the kernel is compiled for one more row of its first
    input and of its output than the case has, and run on the case's buffers (it writes
    one row past the end of the output; its results inside the output are right)."""

    def compile(self, case: Case, workdir: Path) -> Artifact:
        graph = copy.deepcopy(case.graph)
        first = graph["inputs"][0]["expr"]["type"]["shape"]
        first[0] += 1
        return super().compile(replace(case, graph=graph), workdir)


class CachesByShape(HostTarget):
    """Right on the first call, then returns the first call's results for any input of
    the same shapes (a result cache keyed by shape: state carried between calls)."""

    def run(
        self,
        artifact: Artifact,
        inputs: Sequence[np.ndarray],
        outputs: Sequence[np.ndarray],
        timing: Timing = ONCE,
    ) -> RunResult:
        kept: list[np.ndarray] | None = getattr(artifact, "kept", None)
        if kept is not None:
            for out, old in zip(outputs, kept, strict=True):
                out[...] = old
            return RunResult()
        result = super().run(artifact, inputs, outputs, timing)
        artifact.kept = [o.copy() for o in outputs]  # type: ignore[attr-defined]
        return result


class NanToZero(Tampered):
    """Results are right, except that every NaN comes out as 0 (a flush of NaN)."""

    def spoil(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        for out in outputs:
            out[np.isnan(out)] = 0


class NegativeZeroLost(Tampered):
    """Data movement loses the sign of zero: -0.0 comes out as +0.0."""

    def spoil(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        for out in outputs:
            out[out == 0] = 0.0


class Tf32Inputs(Tampered):
    """float32 contractions computed on inputs rounded to TF32 (10 explicit mantissa
    bits, round to nearest even), as a tensor-core path would: within the rigorous bound
    at K in the thousands, caught by the statistical precision check."""

    def feed(self, inputs: Sequence[np.ndarray]) -> Sequence[np.ndarray]:
        return [tf32(a) if a.dtype == np.float32 else a for a in inputs]


def tf32(array: np.ndarray) -> np.ndarray:
    """``array`` (float32) rounded to nearest even at 10 explicit mantissa bits."""
    bits = np.ascontiguousarray(array, np.float32).view(np.uint32).astype(np.uint64)
    drop = 13  # 23 - 10 mantissa bits
    half = (1 << (drop - 1)) - 1 + ((bits >> drop) & 1)
    rounded = ((bits + half) >> drop) << drop
    return rounded.astype(np.uint32).view(np.float32).reshape(array.shape)


class WrongWhenBatched(Tampered):
    """A batch-indexing bug: with more than one image, every image gets the first one's
    results (only batch 1 is right)."""

    def spoil(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if inputs and inputs[0].ndim == 4 and inputs[0].shape[0] > 1:
            for out in outputs:
                if out.ndim == 4 and out.shape[0] == inputs[0].shape[0]:
                    out[1:] = out[:1]


FAULTS: dict[str, type[HostTarget]] = {
    "last-row-wrong": LastRowWrong,
    "float16": Float16Arithmetic,
    "output-never-written": OutputNeverWritten,
    "input-overwritten": InputOverwritten,
    "transposed-operand": TransposedOperand,
    "relu-passes-negatives": ReluPassesNegatives,
    "conv-ignores-stride": ConvIgnoresStride,
    "writes-past-output": WritesPastOutput,
    "caches-by-shape": CachesByShape,
    "nan-to-zero": NanToZero,
    "negative-zero-lost": NegativeZeroLost,
    "tf32-inputs": Tf32Inputs,
    "wrong-when-batched": WrongWhenBatched,
    "wrong-from-third-call": WrongFromThirdCall,
    "wrong-when-timed": WrongWhenTimed,
    "timed-on-stale-inputs": TimedOnStaleInputs,
    "keeps-dtype-state": KeepsDtypeState,
    "keeps-shape-state": KeepsShapeState,
    "pointwise-conv-offset": PointwiseConvOffset,
    "crash": Crash,
    "hang": Hang,
    **NUMBER_FAULTS,
    **DIMENSION_FAULTS,
    **MODEL_FAULTS,
}


def make(name: str) -> HostTarget:
    return FAULTS[name](TargetSpec(f"faulty-{name}", f"faulty-{name}"))
