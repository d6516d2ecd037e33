"""Faulty host variants, each wrong only in a dimension the catalog left unvaried before
it was generated from its model (issue 52): attribute values beyond the ordinary (a pad
constant's IEEE class, axes counted from the end), graph shapes (a value read by two
nodes), value distributions (a wide dynamic range), index widths (a float32 counter past
2^24), call-to-call variation (operands moved after the first call), schedule
primitives on every operand (pack_at of the first input), and special values under every
algorithmic shape (a convolution of stride 1 along W). Each runs real XTC kernels; the catalog
alone must reject every one."""

from __future__ import annotations

import copy
import ctypes
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from pytest_xtc.core.adapter import ONCE, Artifact, RunResult, Timing
from pytest_xtc.core.cases import values
from pytest_xtc.core.cases.case import Case
from pytest_xtc.selftest.faults_numbers import Knowing
from pytest_xtc.selftest.tampered import Tampered
from pytest_xtc.targets.host import HostTarget


def _rewritten(case: Case, change: Any) -> Case:
    """``case`` with ``change(node)`` applied to each node of a copy of its graph."""
    graph = copy.deepcopy(case.graph)
    for node in graph["nodes"]:
        change(node, graph)
    return replace(case, graph=graph)


class PadConstantClassLost(HostTarget):
    """A pad constant that is not an ordinary number (NaN, +-Inf, -0.0, a subnormal) is
    materialised as +0.0 (folded through an integer, or flushed)."""

    def compile(self, case: Case, workdir: Path) -> Artifact:
        def change(node: dict, graph: dict) -> None:
            attrs = node["expr"]["op"].get("attrs") or {}
            value = attrs.get("constant_value")
            if isinstance(value, float) and (not math.isfinite(value) or (math.copysign(
                    1.0, value) < 0 and value == 0) or 0 < abs(value) < 1e-37):
                attrs["constant_value"] = 0.0

        return super().compile(_rewritten(case, change), workdir)


class NegativeAxisMisread(HostTarget):
    """A padding axis written from the end (-1, -2) is read from the start (-1 as 0, -2 as
    1): the wrong axes are padded."""

    def compile(self, case: Case, workdir: Path) -> Artifact:
        def change(node: dict, graph: dict) -> None:
            attrs = node["expr"]["op"].get("attrs") or {}
            pads = attrs.get("padding")
            if isinstance(pads, dict) and any(int(k) < 0 for k in pads):
                attrs["padding"] = {(-int(k) - 1 if int(k) < 0 else k): v for k, v in pads.items()}

        return super().compile(_rewritten(case, change), workdir)


class FanOutReadsConsumed(HostTarget):
    """A value read by two nodes, one of them a relu, is overwritten by the relu in place:
    the other reader gets relu(V), not V."""

    def compile(self, case: Case, workdir: Path) -> Artifact:
        def change(node: dict, graph: dict) -> None:
            relus = {n["expr"]["args"][0]: n["uid"] for n in graph["nodes"]
                     if n["expr"]["op"]["name"] == "relu" and n is not node}
            node["expr"]["args"] = [relus.get(a, a) if relus.get(a) != node["uid"] else a
                                    for a in node["expr"]["args"]]

        return super().compile(_rewritten(case, change), workdir)


class DropsSmallTerms(Knowing):
    """A matmul that skips the products below 1e-4 of the largest one of their dot product
    (an approximate, pruning kernel): on inputs of one magnitude nothing is lost."""

    def spoil(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if self.last_op() != "matmul" or len(inputs) != 2 or inputs[0].ndim != 2:
            return
        a, b = (x.astype(np.float64) for x in inputs)
        if a.shape[0] * a.shape[1] * b.shape[1] > 1 << 22:
            return
        terms = a[:, :, None] * b[None, :, :]
        big = np.abs(terms).max(axis=1, keepdims=True)
        kept = np.where(np.abs(terms) >= 1e-4 * big, terms, 0.0).sum(axis=1)
        with np.errstate(invalid="ignore"):
            if np.isfinite(kept).all():
                outputs[0][...] = kept.astype(outputs[0].dtype)


class IndexFloat32(Tampered):
    """The output index is counted in float32: past 2^24 elements it rounds to even, so
    the odd elements there are never written (their even neighbours written twice)."""

    EXACT = 1 << 24

    def spoil(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        for out in outputs:
            if out.size > self.EXACT:
                flat = out.reshape(-1)
                kept = flat[self.EXACT:].copy()
                values.fill_unwritten(flat[self.EXACT:])
                where = np.arange(self.EXACT, flat.size).astype(np.float32).astype(np.int64)
                flat[np.minimum(where, flat.size - 1)] = kept


class FirstCallAlignmentKept(HostTarget):
    """Specialised on its first call: where that call's inputs were 16-byte aligned, every
    later call reads its inputs from their addresses rounded down to 16 bytes."""

    def run(self, artifact: Artifact, inputs: Sequence[np.ndarray],
            outputs: Sequence[np.ndarray], timing: Timing = ONCE) -> RunResult:
        aligned = all(a.ctypes.data % 16 == 0 for a in inputs)
        first = getattr(artifact, "first_aligned", None)
        if first is None:
            artifact.first_aligned = first = aligned  # type: ignore[attr-defined]
        fed = list(inputs)
        if first and not aligned:
            fed = []
            for a in inputs:
                start = a.ctypes.data - a.ctypes.data % 16
                raw = ctypes.string_at(start, a.nbytes)
                fed.append(np.frombuffer(raw, a.dtype).reshape(a.shape).copy())
        return super().run(artifact, fed, outputs, timing)


class PackFirstInputMisread(HostTarget):
    """A schedule packing the first input (``pack_at`` of input 0) packs it one row short:
    the last row of the output repeats the one before."""

    def compile(self, case: Case, workdir: Path) -> Artifact:
        artifact = super().compile(case, workdir)
        artifact.packs_first = any(  # type: ignore[attr-defined]
            step == "pack_at" and len(args) > 1 and args[1] == 0
            for _, steps in case.schedule.segments for step, args in steps)
        return artifact

    def run(self, artifact: Artifact, inputs: Sequence[np.ndarray],
            outputs: Sequence[np.ndarray], timing: Timing = ONCE) -> RunResult:
        result = super().run(artifact, inputs, outputs, timing)
        if getattr(artifact, "packs_first", False):
            for out in outputs:
                flat = out.reshape(out.shape[0], -1) if out.ndim else out
                if flat.ndim == 2 and flat.shape[0] > 1:
                    flat[-1] = flat[-2]
        return result


def _stride_w(node: dict) -> int:
    stride = (node["expr"]["op"].get("attrs") or {}).get("stride", 1)
    return int(stride if isinstance(stride, int) else stride[-1])


class StrideOneConvSpecials(Knowing):
    """A convolution sliding one pixel at a time along W runs a fast algorithm whose
    transforms subtract infinities: where its inputs hold an Inf, every infinite result
    comes out NaN (strided along W it is right)."""

    def compile(self, case: Case, workdir: Path) -> Artifact:
        artifact = super().compile(case, workdir)
        artifact.stride_one = any(  # type: ignore[attr-defined]
            n["expr"]["op"]["name"] == "conv2d" and _stride_w(n) == 1
            for n in case.graph["nodes"])
        return artifact

    def run(self, artifact: Artifact, inputs: Sequence[np.ndarray],
            outputs: Sequence[np.ndarray], timing: Timing = ONCE) -> RunResult:
        result = super().run(artifact, inputs, outputs, timing)
        if getattr(artifact, "stride_one", False) and any(np.isinf(a).any() for a in inputs):
            for out in outputs:
                out[np.isinf(out)] = np.nan
        return result


MODEL_FAULTS: dict[str, type[HostTarget]] = {
    "pad-constant-class-lost": PadConstantClassLost,
    "negative-axis-misread": NegativeAxisMisread,
    "fan-out-reads-consumed": FanOutReadsConsumed,
    "drops-small-terms": DropsSmallTerms,
    "index-float32": IndexFloat32,
    "first-call-alignment-kept": FirstCallAlignmentKept,
    "pack-first-input-misread": PackFirstInputMisread,
    "stride-one-conv-specials": StrideOneConvSpecials,
}
