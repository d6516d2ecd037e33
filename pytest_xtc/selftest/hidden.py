"""Faulty host variants that hide from a suite checking too few calls, never the timed
ones, or each case in one order only (issue 21): each must be rejected all the same."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pytest_xtc.core.adapter import ONCE, Artifact, RunResult, Timing
from pytest_xtc.core.cases.case import Case
from pytest_xtc.selftest.tampered import Tampered
from pytest_xtc.targets.host import HostTarget


class WrongFromThirdCall(Tampered):
    """Right on its first two calls of an artifact, wrong from the third on (a buffer pool
    of two slots recycled without being cleared, say): every result is off by one."""

    def run(
        self,
        artifact: Artifact,
        inputs: Sequence[np.ndarray],
        outputs: Sequence[np.ndarray],
        timing: Timing = ONCE,
    ) -> RunResult:
        count = getattr(artifact, "calls", 0) + 1
        artifact.calls = count  # type: ignore[attr-defined]
        result = HostTarget.run(self, artifact, inputs, outputs, timing)
        if count >= 3:
            for out in outputs:
                out += np.asarray(1, out.dtype)
        return result


class WrongWhenTimed(Tampered):
    """Right when called once; when timed (XTC's timing loop), its kernel keeps the results
    of the warm-up call in a stale half of each output (a fast path with a bad tail)."""

    def run(
        self,
        artifact: Artifact,
        inputs: Sequence[np.ndarray],
        outputs: Sequence[np.ndarray],
        timing: Timing = ONCE,
    ) -> RunResult:
        result = HostTarget.run(self, artifact, inputs, outputs, timing)
        if timing != ONCE:
            for out in outputs:
                out.reshape(-1)[out.size // 2 :] = 0
        return result


class TimedOnStaleInputs(Tampered):
    """The timed run computes on the inputs of the call before it (a cached operand
    pointer never refreshed); untimed calls are right."""

    def run(
        self,
        artifact: Artifact,
        inputs: Sequence[np.ndarray],
        outputs: Sequence[np.ndarray],
        timing: Timing = ONCE,
    ) -> RunResult:
        stale = getattr(artifact, "last", None)
        used = stale if timing != ONCE and stale is not None else inputs
        artifact.last = [a.copy() for a in inputs]  # type: ignore[attr-defined]
        return HostTarget.run(self, artifact, used, outputs, timing)


class KeepsDtypeState(Tampered):
    """State carried across cases: the first case of another dtype after a float32 one on
    the same worker gets float32 arithmetic on every call (its inputs rounded to float32,
    its results a float32 ulp off); the next case is right again."""

    last_dtype: str | None = None
    current: object = None
    stale = False

    def run(
        self,
        artifact: Artifact,
        inputs: Sequence[np.ndarray],
        outputs: Sequence[np.ndarray],
        timing: Timing = ONCE,
    ) -> RunResult:
        dtype = str(inputs[0].dtype) if inputs else None
        if artifact is not self.current:  # a new case
            self.current = artifact
            self.stale = self.last_dtype == "float32" and dtype not in (None, "float32")
            self.last_dtype = dtype
        if not self.stale:
            return super().run(artifact, inputs, outputs, timing)
        used = [a.astype(np.float32).astype(a.dtype) for a in inputs]
        result = super().run(artifact, used, outputs, timing)
        for out in outputs:
            out[...] = (out.astype(np.float32) * np.float32(1 + 2**-10)).astype(out.dtype)
        return result


class KeepsShapeState(Tampered):
    """State carried across cases: a scratch buffer kept from the case before; on the first
    call of a case whose first output has another shape than the previous case's, that
    output's first element is the stale one left there."""

    last_shape: tuple[int, ...] | None = None
    last_head: np.ndarray | None = None

    def run(
        self,
        artifact: Artifact,
        inputs: Sequence[np.ndarray],
        outputs: Sequence[np.ndarray],
        timing: Timing = ONCE,
    ) -> RunResult:
        result = super().run(artifact, inputs, outputs, timing)
        out = outputs[0].reshape(-1)
        if not out.size:
            return result
        head = out[0].copy()
        if self.last_shape not in (None, outputs[0].shape) and self.last_head is not None:
            out[0] = self.last_head.astype(out.dtype) + np.asarray(1, out.dtype)
        self.last_shape, self.last_head = outputs[0].shape, head
        return result


class PointwiseConvOffset(HostTarget):
    """A 1x1 convolution with stride > 1 reads the wrong offset: its windows start one
    pixel late (x[s*i + 1] instead of x[s*i]), as a downsampling projection bug would."""

    def compile(self, case: Case, workdir: Path) -> Artifact:
        artifact = super().compile(case, workdir)
        artifact.offset_bug = any(  # type: ignore[attr-defined]
            node["expr"]["op"]["name"] == "conv2d"
            and max(node["expr"]["op"]["attrs"].get("stride", [1])) > 1
            and case.graph["inputs"][1]["expr"]["type"]["shape"][:2] == [1, 1]
            for node in case.graph["nodes"]
        )
        return artifact

    def run(
        self,
        artifact: Artifact,
        inputs: Sequence[np.ndarray],
        outputs: Sequence[np.ndarray],
        timing: Timing = ONCE,
    ) -> RunResult:
        if getattr(artifact, "offset_bug", False):
            shifted = np.ascontiguousarray(np.roll(inputs[0], -1, axis=(1, 2)))
            return super().run(artifact, [shifted, *inputs[1:]], outputs, timing)
        return super().run(artifact, inputs, outputs, timing)
