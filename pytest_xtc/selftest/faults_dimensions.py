"""Faulty host variants, each wrong only in a dimension the catalog once left unvaried
(issue 33): output and operand sizes past 16-bit indices (and axes past 8-bit ones), one
loop of a compute op past a 16-bit or 8-bit bound,
tiled reductions and vector loops with a remainder, non-square filters, per-axis strides,
asymmetric padding, attribute-only twins (:mod:`.faults_cache`), operands off alignment
(:mod:`.faults_alignment`). Each runs real XTC kernels and goes wrong as the compiler or
runtime bug it names would; the catalog alone must reject every one."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from pytest_xtc import ops
from pytest_xtc.core.adapter import ONCE, Artifact, RunResult, Timing
from pytest_xtc.core.cases import values
from pytest_xtc.core.cases.case import Case
from pytest_xtc.selftest.faults_alignment import Aligned64Loads, AlignedLoads, AlignedStores
from pytest_xtc.selftest.faults_cache import (  # entry points name the classes here too
    CacheWithoutAttributes,
    CacheWithoutDtype,
    CacheWithoutShapes,
)
from pytest_xtc.selftest.faults_numbers import Knowing
from pytest_xtc.selftest.tampered import Tampered
from pytest_xtc.targets.host import HostTarget

WIDTH = 1 << 16  # a 16-bit index wraps here


class OutputIndex16(Tampered):
    """The output index is kept in 16 bits: element i is stored at i mod 2^16, so past
    65,536 elements the later results overwrite the first ones and the rest is never
    written."""

    def spoil(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        for out in outputs:
            if out.size > WIDTH:
                flat = out.reshape(-1)
                kept = flat.copy()
                values.fill_unwritten(flat)
                flat[np.arange(kept.size) & (WIDTH - 1)] = kept


class InputIndex16(Tampered):
    """Input indices are kept in 16 bits: past 65,536 elements an input is read at its
    index mod 2^16."""

    def feed(self, inputs: Sequence[np.ndarray]) -> Sequence[np.ndarray]:
        return [a.reshape(-1)[np.arange(a.size) & (WIDTH - 1)].reshape(a.shape)
                if a.size > WIDTH else a for a in inputs]


class ColumnIndex8(Tampered):
    """The innermost index is kept in 8 bits: past 256 columns, column j is stored at
    j mod 256 (the later columns overwrite the first ones, the rest is never written)."""

    COLUMNS = 1 << 8

    def spoil(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        for out in outputs:
            if out.ndim >= 2 and out.shape[-1] > self.COLUMNS:
                kept = out.copy()
                values.fill_unwritten(out)
                for start in range(0, out.shape[-1], self.COLUMNS):  # later ones win
                    part = kept[..., start : start + self.COLUMNS]
                    out[..., : part.shape[-1]] = part


class ColumnIndex16(ColumnIndex8):
    """The innermost loop's counter is kept in 16 bits: past 65,536 columns (one axis
    that long, whatever the output's size), column j is stored at j mod 2^16."""

    COLUMNS = 1 << 16


class RowsPast256(Tampered):
    """A row counter kept in 8 bits: the rows of an output past the 256th are never
    written."""

    ROWS = 1 << 8

    def spoil(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        for out in outputs:
            if out.ndim >= 2 and out.shape[-2] > self.ROWS:
                values.fill_unwritten(out[..., self.ROWS :, :])


class RowsPast65536(RowsPast256):
    """An outer loop's counter kept in 16 bits: the rows of an output past the 65,536th
    are never written."""

    ROWS = 1 << 16


#: The reduction loops of matmul and conv2d, each by the axis of their second operand (B,
#: the weights) it runs over. The loops of each nest are the op's (``ops/<op>.py``).
WEIGHT_AXES: dict[str, dict[str, int]] = {"matmul": {"k": 0}, "conv2d": {"r": 0, "s": 1, "c": 2}}


class LoopBound16(Knowing):
    """A compute op's loop bounds kept in 16 bits (matmul, conv2d; ``LOOPS``: those loops
    alone): a loop past 65,536 iterations runs its count mod 2^16 (65,537: once). Past
    that, an output axis's entries are never written, a reduction's terms never added."""

    BITS = 16
    OPS: ClassVar[tuple[str, ...]] = ("matmul", "conv2d")
    LOOPS: ClassVar[frozenset[str] | None] = None  # None: every loop of the nest

    def _runs(self, name: str, extent: int) -> int:
        width = 1 << self.BITS
        cut = extent > width and (self.LOOPS is None or name in self.LOOPS)
        return extent % width if cut else extent

    def feed(self, inputs: Sequence[np.ndarray]) -> Sequence[np.ndarray]:
        op = self.last_op()
        if op not in self.OPS or len(inputs) < 2:
            return inputs
        shape = inputs[1].shape
        cut = {axis: self._runs(name, shape[axis]) for name, axis in WEIGHT_AXES[op].items()}
        cut = {axis: runs for axis, runs in cut.items() if runs < shape[axis]}
        if not cut:  # the kernel reads the operands as placed
            return inputs
        weights = inputs[1].copy()
        for axis, runs in cut.items():  # terms past the count never added
            np.moveaxis(weights, axis, 0)[runs:] = 0
        return [inputs[0], weights, *inputs[2:]]

    def spoil(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        op = self.last_op()
        if op not in self.OPS or not outputs:
            return
        spec = ops.get(op)
        out = outputs[0]
        parallel = [loop for loop in spec.loops if loop not in spec.reductions]
        for axis, name in enumerate(parallel[: out.ndim]):  # the output's axes, in order
            runs = self._runs(name, out.shape[axis])
            if runs < out.shape[axis]:
                values.fill_unwritten(np.moveaxis(out, axis, 0)[runs:])


class ConvChannels8(LoopBound16):
    """conv2d's channel loops (input channels c, a reduction, and output channels f) kept
    in 8 bits: past 256 channels, only the count mod 256 are summed or written."""

    BITS = 8
    OPS = ("conv2d",)
    LOOPS = frozenset({"c", "f"})


class LastPartialTileUnwritten(Tampered):
    """An 8-wide vector loop over the output's last axis without its remainder loop: where
    that axis is longer than 8 and not a multiple of 8, its last elements are never
    written."""

    def spoil(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        for out in outputs:
            size = out.shape[-1] if out.ndim else 0
            if size > 8 and size % 8:
                values.fill_unwritten(out[..., size - size % 8 :])


def _reduction_tiles(case: Case) -> dict[str, int]:
    """Reduction loop -> the outermost factor the main schedule cuts it by (tile,
    strip_mine)."""
    found: dict[str, int] = {}
    for primitive, args in case.schedule.steps:
        if primitive in ("tile", "strip_mine") and len(args) > 1 and isinstance(args[1], dict):
            sizes = [v for v in args[1].values() if isinstance(v, int)]
            if args[0] in ("k", "r", "s", "c") and sizes:
                found[str(args[0])] = sizes[0]
    return found


class ReductionRemainder(Tampered):
    """A tiled reduction loop (matmul k, conv2d r, s, c) loses its remainder: where the
    tile does not divide the loop, the last K mod T terms of every sum are skipped
    (``SCALE`` 0); ``SCALE`` 2: they are added twice (a remainder loop run after a full
    last tile that already covered it)."""

    SCALE = 0.0

    def compile(self, case: Case, workdir: Path) -> Artifact:
        artifact = super().compile(case, workdir)
        names = [n["expr"]["op"]["name"] for n in case.graph["nodes"]]
        axes = next((WEIGHT_AXES[o] for o in names if o in WEIGHT_AXES), {})
        artifact.cut = {axes[k]: t for k, t in _reduction_tiles(case).items()  # type: ignore[attr-defined]
                        if k in axes}
        return artifact

    def run(self, artifact: Artifact, inputs: Sequence[np.ndarray],
            outputs: Sequence[np.ndarray], timing: Timing = ONCE) -> RunResult:
        cut: dict[int, int] = getattr(artifact, "cut", {})
        if cut and len(inputs) > 1:
            weights = inputs[1].copy()
            for axis, tile in cut.items():
                size = weights.shape[axis]
                if size % tile:
                    index = [slice(None)] * weights.ndim
                    index[axis] = slice(size - size % tile, size)
                    weights[tuple(index)] *= np.asarray(self.SCALE, weights.dtype)
            inputs = [inputs[0], weights, *inputs[2:]]
        return HostTarget.run(self, artifact, inputs, outputs, timing)


class ReductionRemainderTwice(ReductionRemainder):
    """A tiled reduction's remainder is added twice."""

    SCALE = 2.0


class SquareFilter(Tampered):
    """conv2d assumes square filters: the weight at (r, s) is read at offset r R + s (R
    for S); right only where R == S (past the weights: zeros)."""

    def feed(self, inputs: Sequence[np.ndarray]) -> Sequence[np.ndarray]:
        if len(inputs) < 2 or inputs[1].ndim != 4 or inputs[0].ndim != 4:
            return inputs
        w = inputs[1]
        r, s, c, f = w.shape
        if r == s:
            return inputs
        flat = w.reshape(r * s, c, f)
        rows = (np.arange(r)[:, None] * r + np.arange(s)[None, :]).reshape(-1)
        inside = rows < r * s
        read = np.zeros_like(flat)
        read[inside] = flat[rows[inside]]
        return [inputs[0], read.reshape(w.shape), *inputs[2:]]


class _Recompiled(HostTarget):
    """A host target compiling an altered graph (:meth:`alter`); its kernel writes an
    output of the altered graph's shapes, whose overlap with the case's outputs is kept
    (the rest is never written)."""

    def alter(self, graph: dict[str, Any]) -> None:
        """Change the graph's nodes in place."""

    def compile(self, case: Case, workdir: Path) -> Artifact:
        from pytest_xtc.core.cases import graphs

        graph = copy.deepcopy(case.graph)
        self.alter(graph)
        artifact = super().compile(replace(case, graph=graph), workdir)
        artifact.handle = (artifact.handle, [o.shape for o in graphs.outputs(graph)])
        return artifact

    def run(self, artifact: Artifact, inputs: Sequence[np.ndarray],
            outputs: Sequence[np.ndarray], timing: Timing = ONCE) -> RunResult:
        module, shapes = artifact.handle
        full = [values.unwritten(s, o.dtype) for s, o in zip(shapes, outputs, strict=True)]
        result = super().run(Artifact(artifact.directory, module), inputs, full, timing)
        for out, whole in zip(outputs, full, strict=True):
            values.fill_unwritten(out)
            common = tuple(slice(0, min(a, b)) for a, b in zip(out.shape, whole.shape,
                                                                strict=True))
            out[common] = whole[common]
        return result


class StridesSwapped(_Recompiled):
    """conv2d takes its strides as [sw, sh]: right only where they are equal."""

    def alter(self, graph: dict[str, Any]) -> None:
        for node in graph["nodes"]:
            op = node["expr"]["op"]
            if op["name"] == "conv2d" and isinstance(op["attrs"].get("stride"), list):
                op["attrs"]["stride"] = op["attrs"]["stride"][::-1]


class PadSidesSwapped(_Recompiled):
    """pad2d pads each axis (after, before): right only where both sides are equal."""

    def alter(self, graph: dict[str, Any]) -> None:
        for node in graph["nodes"]:
            op = node["expr"]["op"]
            if op["name"] == "pad2d" and isinstance(op["attrs"].get("padding"), dict):
                op["attrs"]["padding"] = {k: list(v)[::-1]
                                          for k, v in op["attrs"]["padding"].items()}


DIMENSION_FAULTS: dict[str, type[HostTarget]] = {
    "output-index-16bit": OutputIndex16,
    "input-index-16bit": InputIndex16,
    "column-index-8bit": ColumnIndex8,
    "column-index-16bit": ColumnIndex16,
    "rows-past-256-unwritten": RowsPast256,
    "rows-past-65536-unwritten": RowsPast65536,
    "loop-bound-16bit": LoopBound16,
    "conv-channels-8bit": ConvChannels8,
    "last-partial-tile-unwritten": LastPartialTileUnwritten,
    "reduction-remainder-dropped": ReductionRemainder,
    "reduction-remainder-twice": ReductionRemainderTwice,
    "square-filter-assumed": SquareFilter,
    "strides-swapped": StridesSwapped,
    "pad-sides-swapped": PadSidesSwapped,
    "cache-without-attributes": CacheWithoutAttributes,
    "cache-without-dtype": CacheWithoutDtype,
    "cache-without-shapes": CacheWithoutShapes,
    "aligned-loads": AlignedLoads,
    "aligned-stores": AlignedStores,
    "aligned-64-loads": Aligned64Loads,
}
