"""``host``: XTC's MLIR backend lowered to LLVM IR and run on this CPU.

The kernel runs on the runner's arrays themselves (``xtc_env.run_in_place``: a bare
pointer per operand, XTC's own timing loop), not on XTC's copies: so the runner's guard
bands see its writes out of bounds (``guarded_buffers``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pytest_xtc.core.adapter import (
    ONCE,
    Artifact,
    Capabilities,
    Probe,
    RunResult,
    TargetAdapter,
    Tier,
    Timing,
)
from pytest_xtc.core.cases.case import HOST, Case
from pytest_xtc.core.xtc import xtc_env
from pytest_xtc.core.xtc.xtc_env import evaluate as evaluate  # the name vendors use


class HostTarget(TargetAdapter):
    #: The ``target`` given to XTC's ``get_compiler``.
    xtc_target = "llvmir"
    #: Schedule primitives this target cannot take (None: all).
    unsupported_primitives: frozenset[str] = frozenset()
    placements = frozenset({HOST})

    def probe(self) -> Probe:
        versions = xtc_env.versions()
        try:
            xtc_env.import_mlir_backend()
        except Exception as exc:
            return Probe(Tier.UNAVAILABLE, f"XTC's MLIR backend does not import: {exc}", versions)
        return Probe(Tier.EXECUTE, "", versions, device="host CPU")

    def capabilities(self) -> Capabilities:
        primitives = xtc_env.scheduler_primitives() - self.unsupported_primitives
        return Capabilities(
            ops=xtc_env.mlir_ops(), placements=self.placements, schedules=primitives
        )

    def compile(self, case: Case, workdir: Path) -> Artifact:
        module = xtc_env.compile_case(case, workdir, self.xtc_target)
        return Artifact(workdir, module, sorted(workdir.iterdir()))

    def run(
        self,
        artifact: Artifact,
        inputs: Sequence[np.ndarray],
        outputs: Sequence[np.ndarray],
        timing: Timing = ONCE,
    ) -> RunResult:
        return xtc_env.run_in_place(artifact.handle, inputs, outputs, timing)

    def guarded_buffers(self) -> bool:
        return True

    def prepare(self, workdir: Path) -> None:
        """Import XTC's backend and build its host runtime once, so that a worker forked
        again after a crash finds them done."""
        from xtc.runtimes.host.runtime import RuntimeType, resolve_runtime

        xtc_env.import_mlir_backend()
        resolve_runtime(RuntimeType.HOST)

    def peak_flops(self, dtype: str) -> float | None:
        from xtc.runtimes.host import HostRuntime

        # XTC measures fused multiply-adds per second, one core: two FLOPs each.
        peak = 2.0 * float(HostRuntime.get().evaluate_flops(dtype))
        return peak or None
