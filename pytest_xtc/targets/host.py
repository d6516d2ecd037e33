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
    ExportedKernel,
    Probe,
    RunResult,
    TargetAdapter,
    Tier,
    Timing,
)
from pytest_xtc.core.cases.case import HOST, Case
from pytest_xtc.core.judging.plausibility import Ceilings
from pytest_xtc.core.xtc import kept_kernels, xtc_env
from pytest_xtc.core.xtc.xtc_env import evaluate as evaluate  # the name vendors use

#: The fastest CPU clock shipped (an Intel i9-14900KS's turbo, 6.2 GHz), and per core and
#: cycle twice the most any CPU core does: FLOPs (AVX-512 on two FMA ports: 32 float64, 64
#: float32, 128 float16 with AVX512-FP16; float16 also AMX-FP16's 2048) and bytes its
#: first-level cache moves (three 64-byte accesses). docs/correctness-values-and-performance.md
CLOCK_HZ = 6.2e9
FLOPS_PER_CYCLE = {"float64": 2 * 32, "float32": 2 * 64, "float16": 2 * 2048}
BYTES_PER_CYCLE = 2 * 3 * 64
#: XTC's modules a host compile imports (see ``prepare``)
CPU_COMPILE_PATH = tuple(f"xtc.backends.mlir.MlirTarget.{name}"
                         for name in ("MlirCpuTarget", "MlirLLVMTarget", "cpu_lowering"))


class HostTarget(TargetAdapter):
    #: The ``target`` given to XTC's ``get_compiler``.
    xtc_target = "llvmir"
    #: Schedule primitives this target cannot take (None: all).
    unsupported_primitives: frozenset[str] = frozenset()
    placements = frozenset({HOST})
    kernel_cache = kept_kernels.HOST  # its artifacts can be kept (docs/caches.md)

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

    def export(self, case: Case, artifact: Artifact) -> ExportedKernel | None:
        """The kernel library as XTC's host evaluator calls it (its payload symbol, bare
        pointers), with the OpenMP runtime it may call and XTC's host runtime, built into
        the artifact's directory, whose ``evaluate_perf`` times it."""
        module = artifact.handle
        if not xtc_env.in_place_capable(module):
            return None
        runtime = xtc_env.host_runtime_library(artifact.directory)
        return ExportedKernel("host-bare", Path(module.file_name).absolute(),
                              module.payload_name, (*xtc_env.openmp_libraries(), runtime),
                              timer=len(xtc_env.openmp_libraries()), guarded=True)

    def prepare(self, workdir: Path) -> None:
        """Import XTC's backend and build its host runtime once, so that a worker forked
        again after a crash finds them done."""
        from xtc.runtimes.host.runtime import RuntimeType, resolve_runtime

        xtc_env.import_mlir_backend("xtc.targets.host", *CPU_COMPILE_PATH)
        resolve_runtime(RuntimeType.HOST)
        xtc_env.warm_up(workdir / "warm-up")  # for the workers forked for one case each

    def peak_flops(self, dtype: str) -> float | None:
        from xtc.runtimes.host import HostRuntime

        # XTC measures fused multiply-adds per second, one core: two FLOPs each.
        peak = 2.0 * float(HostRuntime.get().evaluate_flops(dtype))
        return peak or None

    def physical_limits(self, dtype: str) -> Ceilings | None:
        import os

        cores = os.cpu_count() or 1  # every core of the machine (parallel schedules)
        per_cycle = FLOPS_PER_CYCLE.get(dtype, max(FLOPS_PER_CYCLE.values()))
        return Ceilings(cores * CLOCK_HZ * per_cycle, cores * CLOCK_HZ * BYTES_PER_CYCLE,
                        1 / CLOCK_HZ, f"{cores} cores at {CLOCK_HZ / 1e9:g} GHz, "
                        f"{per_cycle} FLOPs and {BYTES_PER_CYCLE} bytes a cycle each")
