"""``nvgpu``: XTC's MLIR backend lowered to NVVM, a CUDA kernel for an NVIDIA GPU.

Tiers: a GPU with its driver runs the cases (``available``); with only the CUDA toolkit and
``--xtc-nvgpu-arch=sm_XX`` the cases are compiled for that arch and the artifact inspected
(``compile-only``). ``nvgpu[N]`` selects GPU ``N`` in ``nvidia-smi``'s order.

XTC's own nvgpu target asks ``nvidia-smi`` for the GPU it compiles for. Here the target is
given a GPU description instead (arch from the option, or from the probed GPU), so the same
compile path works with and without a GPU. XTC emits GPU code only for parallelized loops:
the adapter adds one ``parallelize`` step to the case's schedule (see :func:`gpu_steps`).
"""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
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
from pytest_xtc.core.cases.case import DEVICE, HOST, Case
from pytest_xtc.core.execution import placement
from pytest_xtc.core.xtc import kept_kernels, xtc_env
from pytest_xtc.targets.toolchains.cuda import ARCH as _ARCH
from pytest_xtc.targets.toolchains.cuda import (
    DEFAULT_CUDA_DIR,
    LIBCUDA,
    GpuInfo,
    find_gpus,
    find_toolkit,
    nvcc_archs,
    nvcc_info,
    unknown_arch,
    visible_devices_conflict,
)
from pytest_xtc.targets.toolchains.gpu_binary import (
    EM_CUDA,
    FATBIN_MAGIC,
    check_gpu_binary,
    cubin_archs,
)
from pytest_xtc.targets.toolchains.gpu_mapping import NoGpuKernel, gpu_steps

__all__ = [  # the names this module has always offered, the CUDA ones from toolchains/
    "ARCH_OPTION", "DEFAULT_CUDA_DIR", "EM_CUDA", "FATBIN_MAGIC", "LIBCUDA", "Compiled",
    "GpuInfo", "NoGpuKernel", "NvgpuDevice", "NvgpuTarget", "check_gpu_binary", "cubin_archs",
    "evaluate", "find_gpus", "find_toolkit", "gpu_steps", "nvcc_archs", "nvcc_info",
]

ARCH_OPTION = "nvgpu-arch"
_ptx_versions: dict[tuple[str, str], str] = {}  # (arch, toolkit) -> XTC's PTX version


@dataclass(frozen=True)
class NvgpuDevice:
    """What the kernels are compiled for. Also the ``device=`` that places graph operands:
    XTC's MLIR backend only tests a tensor's device for None, so no driver is needed."""

    arch: str
    ordinal: int = 0
    name: str = ""

    @property
    def compute_cap(self) -> str:
        match = _ARCH.match(self.arch)
        assert match, self.arch
        return f"{match[1]}.{match[2]}"

    def description(self) -> dict[str, str]:
        """The GPU entry XTC's nvgpu target would read from nvidia-smi."""
        return {"name": self.name or self.arch, "compute_cap": self.compute_cap}


@dataclass
class Compiled:
    """The XTC module, and which of its arguments (inputs, then outputs) live on the GPU."""

    module: Any
    on_device: list[bool]


class NvgpuTarget(TargetAdapter):
    ordinals = True  # NAME[N]: device N
    placements = frozenset({HOST, DEVICE})
    kernel_cache = kept_kernels.NVGPU  # its artifacts can be kept (docs/caches.md)
    options = (
        OptionSpec(
            ARCH_OPTION,
            help="GPU arch to compile for, e.g. sm_90; without a GPU it enables the "
            "compile-only tier",
            env="XTC_NVGPU_ARCH",
            pattern=_ARCH.pattern.strip("^$"),
            expected="sm_<major><minor>, e.g. sm_90",
        ),
    )

    def __init__(self, spec: TargetSpec) -> None:
        super().__init__(spec)
        self._device: NvgpuDevice | None = None

    # -- probing ---------------------------------------------------------------------------

    def probe(self) -> Probe:
        if platform.system() == "Darwin":
            return Probe(Tier.UNAVAILABLE, "nvgpu is not supported on Darwin")
        arch = self.spec.options.get(ARCH_OPTION) or None
        if arch is not None and not _ARCH.match(arch):
            return Probe(Tier.UNAVAILABLE, f"--xtc-{ARCH_OPTION}={arch!r} is malformed: "
                         "expected sm_<major><minor>, e.g. sm_90")
        versions = dict(xtc_env.versions())
        toolkit, problem = find_toolkit()
        if toolkit is None:
            return Probe(Tier.UNAVAILABLE, problem, versions)
        versions["cuda-toolkit"] = str(toolkit)
        nvcc_version, problem = nvcc_info(toolkit)
        if nvcc_version is None:
            return Probe(Tier.UNAVAILABLE, problem, versions)
        versions["nvcc"] = nvcc_version
        if arch is not None and (unknown := unknown_arch(toolkit, nvcc_version, arch)):
            return Probe(Tier.UNAVAILABLE, unknown, versions)
        try:
            xtc_env.import_mlir_backend()
            from xtc.backends.mlir.MlirTarget.MlirNVGPUTarget import MlirNVGPUTarget  # noqa: F401
        except Exception as exc:
            return Probe(Tier.UNAVAILABLE, f"XTC's MLIR nvgpu backend does not import: {exc}",
                         versions)

        ordinal = self.ordinal()
        gpus, no_gpu = find_gpus()
        if gpus:
            versions["nvidia-driver"] = gpus[0].driver
            listed = "; ".join(f"{g.index}: {g.name}" for g in gpus)
            if ordinal >= len(gpus):
                return Probe(Tier.UNAVAILABLE, f"{self.name}: no GPU with ordinal {ordinal} "
                             f"(nvidia-smi lists {listed})", versions)
            conflict = visible_devices_conflict(ordinal)
            if conflict:
                return Probe(Tier.UNAVAILABLE, conflict, versions)
            gpu = gpus[ordinal]
            target_arch = arch or gpu.arch
            if not _ARCH.match(target_arch):
                return Probe(Tier.UNAVAILABLE, "nvidia-smi gives no compute capability for GPU "
                             f"{ordinal} ({gpu.name}); pass --xtc-{ARCH_OPTION}=sm_XX", versions)
            if unknown := unknown_arch(toolkit, nvcc_version, target_arch):
                return Probe(Tier.UNAVAILABLE, unknown, versions)
            self._device = NvgpuDevice(target_arch, ordinal, gpu.name)
            note = f", compiled for {target_arch}" if arch and arch != gpu.arch else ""
            return Probe(Tier.EXECUTE, note.lstrip(", "), versions,
                         device=f"GPU {ordinal}: {gpu.name} ({gpu.arch or 'arch unknown'}{note})")
        if arch is None:
            return Probe(Tier.UNAVAILABLE, f"no GPU ({no_gpu}); pass --xtc-{ARCH_OPTION}=sm_XX "
                         "(or XTC_NVGPU_ARCH) for the compile-only tier", versions)
        self._device = NvgpuDevice(arch, ordinal)
        return Probe(Tier.COMPILE_ONLY, f"no GPU ({no_gpu}): compiled for {arch}, not run",
                     versions, device=f"{arch} (no GPU: compile only)")

    def ordinal(self) -> int:
        """The GPU used: ``nvgpu[N]``, else CUDA_VISIBLE_DEVICES when it names one, else 0."""
        if self.spec.ordinal is not None:
            return self.spec.ordinal
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
        return int(visible) if visible.isdigit() else 0

    def device(self) -> NvgpuDevice:
        """What this target compiles for; raises when the probe found nothing to use."""
        probe = self.status()
        if self._device is None:
            raise RuntimeError(f"{self.name} cannot compile here: {probe.reason}")
        return self._device

    def capabilities(self) -> Capabilities:
        # split: gpu_steps maps the outermost parallel loop of more than one iteration to
        # the GPU and does not follow split segments (it would find none): not supported.
        return Capabilities(
            ops=xtc_env.mlir_ops(),
            placements=self.placements,
            schedules=xtc_env.scheduler_primitives() - {"split"},
        )

    def lock_key(self) -> str | None:
        return f"nvgpu:{self.ordinal()}"

    def time_limits(self) -> tuple[float, float]:
        return (120.0, 120.0)  # the first run of a process initializes CUDA

    # -- compiling -------------------------------------------------------------------------

    def compile(self, case: Case, workdir: Path) -> Artifact:
        device = self.device()
        backend, sched = xtc_env.scheduled(
            case, workdir, device, lambda graph, backend: gpu_steps(graph, backend, case)
        )
        compiler = _pinned_compiler()(
            backend, device, shared_lib=True, dump_file=str(workdir / "kernel"),
            save_temps=True, save_temps_dir=str(workdir / "temps"),
        )
        module = compiler.compile(sched)
        where = case.placement or {}
        on_device = [where.get(n) == DEVICE for n in placement.operand_names(case)]
        notes = {"arch": device.arch}
        files = sorted(p for p in workdir.rglob("*") if p.is_file())
        return Artifact(workdir, Compiled(module, on_device), files, notes)

    def check_artifact(self, case: Case, artifact: Artifact) -> None:
        check_gpu_binary(artifact.directory, self.device().arch)

    def export(self, case: Case, artifact: Artifact) -> ExportedKernel | None:
        """The kernel library as XTC's GPU evaluator calls it (bare pointers; device
        operands copied to and from the GPU, host ones registered), after the artifact
        check (a module with no GPU kernel is not exported), with XTC's CUDA runtime
        library and the libLLVM it needs; the driver's libcuda is the device machine's."""
        self.check_artifact(case, artifact)
        compiled: Compiled = artifact.handle
        lib = Path(xtc_env.mlir_prefix()) / "lib"
        runtime = (xtc_env.llvm_library(), lib / "libmlir_cuda_runtime.so")
        places = tuple(DEVICE if d else HOST for d in compiled.on_device)
        return ExportedKernel("cuda-bare", Path(compiled.module.file_name).absolute(),
                              compiled.module.payload_name, runtime, placements=places)

    # -- running ---------------------------------------------------------------------------

    def run(
        self,
        artifact: Artifact,
        inputs: Sequence[np.ndarray],
        outputs: Sequence[np.ndarray],
        timing: Timing = ONCE,
    ) -> RunResult:
        compiled: Compiled = artifact.handle
        return evaluate(compiled, _gpu_runtime(self.ordinal()), inputs, outputs, timing)


# -- what XTC gets -------------------------------------------------------------------------


@cache
def _pinned_compiler() -> type:
    """XTC's MLIR compiler with its nvgpu target compiling for a given :class:`NvgpuDevice`
    (XTC's own target takes nvidia-smi's GPU and fails without one)."""
    from xtc.backends.mlir import MlirCompiler
    from xtc.backends.mlir.MlirTarget.MlirNVGPUTarget import MlirNVGPUTarget
    from xtc.utils.tools import get_cuda_prefix

    class PinnedNVGPUTarget(MlirNVGPUTarget):
        def __init__(self, config: Any, device: NvgpuDevice) -> None:
            self._pinned = device.description()
            super().__init__(config)

        def _query_available_gpus(self) -> list[dict[str, str]]:
            return [self._pinned]

        def _select_gpu(self) -> dict[str, str]:  # without touching CUDA_* variables
            return self._pinned

        def _query_ptx_version(self) -> str:  # one nvcc call per arch, not per case
            key = (self.arch(), str(get_cuda_prefix()))
            if key not in _ptx_versions:
                _ptx_versions[key] = super()._query_ptx_version()
            return _ptx_versions[key]

    class PinnedCompiler(MlirCompiler):
        def __init__(self, backend: Any, device: NvgpuDevice, **kwargs: Any) -> None:
            super().__init__(backend, target="llvmir", **kwargs)  # placeholder, replaced:
            self._target = PinnedNVGPUTarget(self._config, device)

    return PinnedCompiler


# -- running -------------------------------------------------------------------------------


def _gpu_runtime(ordinal: int) -> Any:
    """XTC's GPUDevice on GPU ``ordinal`` (nvidia-smi's order) for this process."""
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", str(ordinal))
    from xtc.runtimes.accelerator.gpu import GPUDevice

    return GPUDevice()


def evaluate(
    compiled: Compiled,
    gpu: Any,
    inputs: Sequence[np.ndarray],
    outputs: Sequence[np.ndarray],
    timing: Timing = ONCE,
) -> RunResult:
    """Run through XTC's GPU evaluator: device operands are copied to GPU memory and back,
    host operands are mapped; results land in ``outputs``."""
    runtimes = [gpu if on else None for on in compiled.on_device]
    return xtc_env.evaluate(compiled.module, inputs, outputs, timing, runtimes)

