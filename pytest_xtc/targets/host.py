"""``host``: XTC's MLIR backend lowered to LLVM IR and run on this CPU.

The kernel runs on the runner's arrays themselves (``xtc_env.run_in_place``: a bare
pointer per operand, XTC's own timing loop), not on XTC's copies: so the runner's guard
bands see its writes out of bounds (``guarded_buffers``)."""

from __future__ import annotations

import contextlib
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
from pytest_xtc.core.xtc import kept_kernels, translation, xtc_env
from pytest_xtc.core.xtc.xtc_env import evaluate as evaluate  # the name vendors use

#: The fastest CPU clock shipped (an Intel i9-14900KS's turbo, 6.2 GHz): the clock where
#: the CPU does not say its own (no cpufreq, as in most virtual machines).
CLOCK_HZ = 6.2e9
#: Fused multiply-add units a core has, at most: two on x86 (AVX-512 or AVX2), four
#: 128-bit pipes on AArch64 cores. CPUs report their vector width, not their ports.
FMA_PORTS = {"x86_64": 2, "aarch64": 4}
#: Bytes of the widest vector register, by the flags /proc/cpuinfo lists (first found).
VECTOR_BYTES = (("avx512f", 64), ("sve", 256), ("avx2", 32), ("avx", 32))
#: float16 on AMX tiles (AMX-FP16: 1024 FMAs a cycle): the bound where a CPU has them.
AMX_FLOPS_PER_CYCLE = 2 * 1024
#: Loads and stores a core's first-level cache serves a cycle (two loads, one store).
ACCESSES_PER_CYCLE = 3
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
        translation.prepare()  # MLIR's translation context, the host's triple: made once

    def peak_flops(self, dtype: str) -> float | None:
        from xtc.runtimes.host import HostRuntime

        # XTC measures fused multiply-adds per second, one core: two FLOPs each.
        peak = 2.0 * float(HostRuntime.get().evaluate_flops(dtype))
        return peak or None

    def physical_limits(self, dtype: str) -> Ceilings | None:
        return cpu_ceilings(dtype)


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    return {f for line in text.splitlines() if line.split(":")[0].strip() in ("flags",
            "Features") for f in line.split(":", 1)[1].split()}


def _max_clock_hz() -> float:
    """The fastest clock a core of this CPU reports (cpufreq), else :data:`CLOCK_HZ`."""
    found = []
    for path in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/cpuinfo_max_freq"):
        with contextlib.suppress(OSError, ValueError):
            found.append(int(path.read_text()) * 1e3)  # kHz
    return max(found) if found else CLOCK_HZ


def cpu_ceilings(dtype: str) -> Ceilings:
    """What this machine cannot exceed: the cores this process may use, each at the
    fastest clock the CPU reports, doing at most its FMA ports' worth of fused
    multiply-adds on its widest vectors a cycle (docs/correctness-values-and-performance.md)."""
    import os
    import platform

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    cores = cores or os.cpu_count() or 1
    flags, clock = _cpu_flags(), _max_clock_hz()
    width = next((n for flag, n in VECTOR_BYTES if flag in flags), 16)  # SSE2, NEON: 16
    ports = FMA_PORTS.get(platform.machine(), max(FMA_PORTS.values()))
    item = {"float64": 8, "float32": 4, "float16": 2}.get(dtype, 2)
    per_cycle = 2 * ports * width // item
    if dtype == "float16" and "amx_tile" in flags:
        per_cycle = max(per_cycle, AMX_FLOPS_PER_CYCLE)
    moved = ACCESSES_PER_CYCLE * width
    return Ceilings(cores * clock * per_cycle, cores * clock * moved, 1 / clock,
                    f"{cores} cores at {clock / 1e9:.3g} GHz, {ports} FMA ports of "
                    f"{width * 8} bits: {per_cycle} {dtype} FLOPs and {moved} bytes a cycle "
                    "each")
