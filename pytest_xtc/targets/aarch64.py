"""``aarch64``, ``aarch64-qemu``, ``aarch64-native``: XTC's MLIR backend compiling for an
AArch64 CPU (``arch="aarch64"``, ``--xtc-aarch64-cpu``), the kernel run on that processor
and judged here: the suite's embedded road (docs/embedded.md).

Compile here (XTC, the cross compiler: :mod:`.toolchains.aarch64`), flash (the kernel
library is the image the device loads: :class:`Aarch64Device`, XTC's ``EmbeddedDevice``),
run there (``device_call``, a small C program built once with the cross compiler, under
QEMU user mode on a non-AArch64 machine: ``aarch64-qemu``; directly on an AArch64 one:
``aarch64-native``; plain ``aarch64`` chooses by the machine), judge here (the session's
checks on what comes back: every call, guard bands and the sentinel travel with the
operands, ``core/pack/device_aarch64.py``). Times under QEMU are the emulator's: recorded,
never held against hardware ceilings, never a verdict.
"""

from __future__ import annotations

import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pytest_xtc.core.adapter import (
    ONCE,
    Artifact,
    Capabilities,
    ExportedKernel,
    OptionSpec,
    Probe,
    RunResult,
    TargetAdapter,
    TargetSpec,
    Tier,
    Timing,
)
from pytest_xtc.core.adapters.cache_seal import cache_dir
from pytest_xtc.core.cases.case import HOST, Case
from pytest_xtc.core.pack import device_aarch64
from pytest_xtc.core.xtc import translation, xtc_env
from pytest_xtc.targets.toolchains import aarch64 as cross
from pytest_xtc.targets.toolchains.embedded import EmbeddedRuntime

CPU_OPTION = "aarch64-cpu"
DEFAULT_CPU = "cortex-a57"  # ARMv8.0-A with NEON (Advanced SIMD), no SVE
#: Seconds for (compile, run) of one case: under QEMU each call starts the emulator, and
#: a 257x259x257 float32 matmul takes 0.27 s a call (docs/embedded.md).
TIME_LIMITS = (120.0, 300.0)


class Aarch64Device(EmbeddedRuntime):
    """The AArch64 processor as XTC's ``EmbeddedDevice``: ``flash`` loads the kernel
    library the device runs; each call carries its operands there and back."""

    def __init__(self, cpu: str, qemu_cpu: str, runner: Path, emulated: bool) -> None:
        super().__init__()
        self.cpu, self.qemu_cpu, self.emulated = cpu, qemu_cpu, emulated
        prefix = device_aarch64.emulator(qemu_cpu) if emulated else []
        self.command = [*prefix, str(runner)]
        omp = cross.openmp_dir()
        self.runtime = [omp / "libomp.so"] if omp else []

    def target_name(self) -> str:
        return "aarch64"

    def device_name(self) -> str:
        where = f"QEMU user mode, -cpu {self.qemu_cpu}" if self.emulated else platform.node()
        return f"AArch64 {self.cpu} ({where})"

    def device_arch(self) -> str:
        return "aarch64"

    def call(self, operands: Sequence[np.ndarray], timing: Timing,
             limit_s: float | None = None) -> list[float]:
        image, entry = self.image()
        runtime = self.runtime if cross.needs_openmp(image) else []
        named = f"-cpu {self.qemu_cpu}" if self.emulated else self.cpu
        return device_aarch64.call(self.command, runtime, image, entry, operands,
                                   _timing(timing), cpu_name=named, limit_s=limit_s)


def _timing(timing: Timing) -> dict[str, Any]:
    return {"repeat": timing.repeat, "number": timing.number,
            "min_repeat_ms": timing.min_repeat_ms}


class Aarch64Target(TargetAdapter):
    placements = frozenset({HOST})
    options = (
        OptionSpec(
            CPU_OPTION,
            f"the AArch64 CPU the aarch64 targets compile for (LLVM's name; default "
            f"{DEFAULT_CPU}, NEON), emulated as QEMU's CPU of that name (else -cpu max)",
            env="XTC_AARCH64_CPU", pattern=r"[a-z0-9][a-z0-9.+-]*",
            expected="an LLVM AArch64 CPU name, e.g. cortex-a57 or neoverse-v1",
        ),
    )

    def __init__(self, spec: TargetSpec) -> None:
        super().__init__(spec)
        self._device: Aarch64Device | None = None

    # -- which processor ---------------------------------------------------------------------

    def emulated(self) -> bool:
        """``aarch64-qemu``: QEMU; ``aarch64-native``: this CPU; ``aarch64``: by machine."""
        if self.spec.base.endswith("-qemu"):
            return True
        if self.spec.base.endswith("-native"):
            return False
        return not device_aarch64.native()

    def cpu(self) -> str:
        return self.spec.options.get(CPU_OPTION) or DEFAULT_CPU

    def probe(self) -> Probe:
        emulated = self.emulated()
        problem, versions = cross.missing(emulated)
        versions = {**xtc_env.versions(), **versions}
        if problem:
            return Probe(Tier.UNAVAILABLE, problem, versions)
        try:
            xtc_env.import_mlir_backend()
            runner = cross.runner(cache_dir() / "aarch64")
        except Exception as exc:
            return Probe(Tier.UNAVAILABLE, f"{type(exc).__name__}: {exc}", versions)
        cpu = self.cpu()
        qemu_cpu = cross.qemu_cpu(cpu) if emulated else cpu
        self._device = Aarch64Device(cpu, qemu_cpu, runner, emulated)
        omp = cross.openmp_dir()
        versions["aarch64-openmp"] = str(omp) if omp else "none (parallel schedules unsupported)"
        note = "times are the emulator's, not hardware figures" if emulated else ""
        if emulated:
            versions["emulated-cpu"] = qemu_cpu
        return Probe(Tier.EXECUTE, note, versions, device=self._device.device_name())

    def device(self) -> Aarch64Device:
        probe = self.status()
        if self._device is None:
            raise RuntimeError(f"{self.name} cannot run here: {probe.reason}")
        return self._device

    def capabilities(self) -> Capabilities:
        primitives = xtc_env.scheduler_primitives()
        if cross.openmp_dir() is None:  # no AArch64 OpenMP runtime to link parallel loops
            primitives = primitives - {"parallelize"}
        return Capabilities(ops=xtc_env.mlir_ops(), placements=self.placements,
                            schedules=primitives)

    def time_limits(self) -> tuple[float, float]:
        return TIME_LIMITS

    # -- compile here ------------------------------------------------------------------------

    def compile(self, case: Case, workdir: Path) -> Artifact:
        backend, sched = xtc_env.scheduled(case, workdir, None)
        compiler = cross.cross_compiler()(backend, shared_lib=True, arch="aarch64",
                                          cpu=self.cpu(), dump_file=str(workdir / "kernel"))
        translation.in_process(compiler.target)
        with xtc_env.diagnostics():
            module = compiler.compile(sched)
        files = sorted(p for p in workdir.rglob("*") if p.is_file())
        return Artifact(workdir, module, files, {"cpu": self.cpu()})

    def check_artifact(self, case: Case, artifact: Artifact) -> None:
        library = Path(artifact.handle.file_name)
        machine = cross.elf_machine(library)
        assert machine == cross.EM_AARCH64, (
            f"{library.name}: ELF machine {machine}, not AArch64 ({cross.EM_AARCH64})")

    def prepare(self, workdir: Path) -> None:
        translation.prepare()  # MLIR's translation context, for the workers forked after

    # -- flash, run there --------------------------------------------------------------------

    def run(
        self,
        artifact: Artifact,
        inputs: Sequence[np.ndarray],
        outputs: Sequence[np.ndarray],
        timing: Timing = ONCE,
    ) -> RunResult:
        self.check_artifact(None, artifact)  # type: ignore[arg-type]  # a host .so never runs
        device = self.device()
        module = artifact.handle
        device.flash(str(Path(module.file_name).absolute()), module.payload_name)
        return RunResult(times=device.call([*inputs, *outputs], timing))

    def guarded_buffers(self) -> bool:
        return True  # the memory around each operand travels with it, and comes back

    def export(self, case: Case, artifact: Artifact) -> ExportedKernel | None:
        """For packs and ``--xtc-run-on``: the device runner calls ``device_call``
        (``runtime[0]``) under QEMU (``QEMU_CPU`` in its environment) or natively."""
        self.check_artifact(case, artifact)
        device = self.device()
        module = artifact.handle
        return ExportedKernel(device_aarch64.KIND, Path(module.file_name).absolute(),
                              module.payload_name, (Path(device.command[-1]), *device.runtime),
                              guarded=True)
