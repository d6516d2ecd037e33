"""The nvgpu adapter: its probe with a FAKE CUDA toolchain, and real compile-only runs.

``test_fake_*`` tests put shell-script stand-ins for ``nvcc``, ``ptxas`` and
``nvidia-smi`` on ``CUDA_INSTALL_DIR`` / ``PATH`` and check what the probe concludes.
Nothing in them compiles or runs a kernel: a probe saying "available" under a fake driver
only says that the probe found every piece it looks for.

``test_compile_*`` tests use the real CUDA toolkit of this machine (skipped without one)
to compile cases for sm_90 and inspect the artifacts. No GPU is used: nothing runs.
"""

from __future__ import annotations

import ctypes.util
import platform
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_xtc.conformance import builtin_cases
from pytest_xtc.core.adapter import Artifact, Tier
from pytest_xtc.core.cases.case import DEVICE, HOST, Case, placements
from pytest_xtc.core.execution import placement
from pytest_xtc.core.execution.runner import run_case
from pytest_xtc.core.outcome import Status
from pytest_xtc.core.xtc import xtc_env
from pytest_xtc.targets import nvgpu
from pytest_xtc.targets.nvgpu import NoGpuKernel, NvgpuTarget
from pytest_xtc.targets.toolchains import cuda, gpu_binary
from tests.conftest import fake_executable, spec_of

FAKE_NVCC_VERSION = "12.4.131"
H100 = "0, NVIDIA H100 80GB HBM3, 9.0, 550.54.15"
A100 = "1, NVIDIA A100-SXM4-40GB, 8.0, 550.54.15"


def adapter(name: str = "nvgpu", arch: str | None = None) -> NvgpuTarget:
    return NvgpuTarget(spec_of(name, {"nvgpu-arch": arch}))




@dataclass
class Fake:
    root: Path
    monkeypatch: pytest.MonkeyPatch

    def toolkit(self, nvcc_body: str | None = None) -> Path:
        """A fake CUDA toolkit in CUDA_INSTALL_DIR."""
        cuda = self.root / "cuda"
        body = nvcc_body or (
            'case "$1" in\n'
            "  --version) printf 'Cuda compilation tools, release 12.4, "
            f"V{FAKE_NVCC_VERSION}\\n';;\n"
            "  --list-gpu-code) printf 'sm_75\\nsm_80\\nsm_90\\n';;\n"
            "  *) exit 1;;\n"
            "esac"
        )
        fake_executable(cuda / "bin" / "nvcc", body)
        fake_executable(cuda / "bin" / "ptxas", "exit 0")
        self.monkeypatch.setenv("CUDA_INSTALL_DIR", str(cuda))
        return cuda

    def driver(self, *gpus: str, exit_code: int = 0, libcuda: bool = True) -> None:
        """A fake nvidia-smi (the only thing on PATH) listing ``gpus``; libcuda loads
        (a stand-in system library) unless ``libcuda`` is False."""
        lines = "".join(f"{g}\\n" for g in gpus)
        fake_executable(self.root / "driver" / "nvidia-smi", f"printf '{lines}'\nexit {exit_code}")
        self.monkeypatch.setenv("PATH", str(self.root / "driver"))
        stand_in = ctypes.util.find_library("c") or "libc.so.6"
        self.monkeypatch.setattr(cuda, "LIBCUDA", stand_in if libcuda else "libcuda-absent.so.1")


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Fake:
    """No toolkit, no driver until a test adds fakes; never this machine's own."""
    xtc_env.import_mlir_backend()  # before PATH is emptied
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    monkeypatch.setenv("CUDA_INSTALL_DIR", str(tmp_path / "no-cuda"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(cuda, "LIBCUDA", "libcuda-absent.so.1")
    return Fake(tmp_path, monkeypatch)


# -- the probe, with fakes -------------------------------------------------------------------


def test_fake_darwin_is_not_supported(fake: Fake, monkeypatch: pytest.MonkeyPatch) -> None:
    fake.toolkit()
    fake.driver(H100)
    monkeypatch.setattr(platform, "system", lambda: "Darwin")
    probe = adapter(arch="sm_90").status()
    assert probe.tier is Tier.UNAVAILABLE
    assert probe.reason == "nvgpu is not supported on Darwin"


@pytest.mark.parametrize("arch", ["90", "sm90", "sm_9", "compute_90", "sm_90a", "SM_90"])
def test_fake_malformed_arch_is_unavailable_with_its_value(fake: Fake, arch: str) -> None:
    fake.toolkit()
    probe = adapter(arch=arch).probe()
    assert probe.tier is Tier.UNAVAILABLE
    assert f"--xtc-nvgpu-arch={arch!r} is malformed" in probe.reason
    assert "sm_90" in probe.reason


def test_fake_missing_toolkit_names_what_was_looked_for(fake: Fake, tmp_path: Path) -> None:
    probe = adapter(arch="sm_90").probe()
    assert probe.tier is Tier.UNAVAILABLE
    assert "no CUDA toolkit" in probe.reason
    assert f"nvcc and ptxas not found in {tmp_path / 'no-cuda' / 'bin'}" in probe.reason
    assert "CUDA_INSTALL_DIR=" in probe.reason


def test_fake_default_toolkit_dir_without_env(fake: Fake, monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    monkeypatch.delenv("CUDA_INSTALL_DIR")
    monkeypatch.setattr(cuda, "DEFAULT_CUDA_DIR", tmp_path / "usr-local-cuda")
    probe = adapter(arch="sm_90").probe()
    assert probe.tier is Tier.UNAVAILABLE
    assert str(tmp_path / "usr-local-cuda" / "bin") in probe.reason
    assert "CUDA_INSTALL_DIR unset" in probe.reason


def test_fake_toolkit_without_ptxas(fake: Fake) -> None:
    (fake.toolkit() / "bin" / "ptxas").unlink()
    probe = adapter(arch="sm_90").probe()
    assert probe.tier is Tier.UNAVAILABLE
    assert "no CUDA toolkit: ptxas not found in" in probe.reason


def test_fake_nvcc_that_fails(fake: Fake) -> None:
    fake.toolkit(nvcc_body="echo 'nvcc: broken install' >&2; exit 3")
    probe = adapter(arch="sm_90").probe()
    assert probe.tier is Tier.UNAVAILABLE
    assert "--version failed (exit 3): nvcc: broken install" in probe.reason


def test_fake_toolkit_without_gpu_and_arch_says_how_to_get_compile_only(fake: Fake) -> None:
    fake.toolkit()
    probe = adapter().probe()
    assert probe.tier is Tier.UNAVAILABLE
    assert "no GPU (nvidia-smi not found on PATH)" in probe.reason
    assert "--xtc-nvgpu-arch=sm_XX" in probe.reason and "compile-only tier" in probe.reason
    assert probe.versions["nvcc"] == FAKE_NVCC_VERSION


def test_fake_toolkit_and_arch_without_gpu_is_compile_only(fake: Fake) -> None:
    fake.toolkit()
    target = adapter(arch="sm_90")
    probe = target.status()
    assert probe.tier is Tier.COMPILE_ONLY
    assert probe.versions["nvcc"] == FAKE_NVCC_VERSION
    assert "xtc-tools" in probe.versions
    assert "sm_90" in probe.device and "compile only" in probe.device
    assert target.device().arch == "sm_90" and target.device().compute_cap == "9.0"


def test_fake_arch_that_nvcc_does_not_know(fake: Fake) -> None:
    fake.toolkit()
    probe = adapter(arch="sm_35").probe()
    assert probe.tier is Tier.UNAVAILABLE
    assert f"nvcc {FAKE_NVCC_VERSION} cannot compile for sm_35" in probe.reason


def test_fake_gpu_arch_that_nvcc_does_not_know(fake: Fake) -> None:
    fake.toolkit()
    fake.driver("0, NVIDIA RTX PRO 6000, 12.0, 575.0")
    probe = adapter().probe()
    assert probe.tier is Tier.UNAVAILABLE
    assert f"nvcc {FAKE_NVCC_VERSION} cannot compile for sm_120" in probe.reason


def test_fake_driver_gives_the_execute_tier_in_the_probe(fake: Fake) -> None:
    """Only the probe's verdict: no kernel is compiled or run here."""
    fake.toolkit()
    fake.driver(H100)
    target = adapter()
    probe = target.probe()
    assert probe.tier is Tier.EXECUTE, probe.reason
    assert probe.device == "GPU 0: NVIDIA H100 80GB HBM3 (sm_90)"
    assert probe.versions["nvidia-driver"] == "550.54.15"
    assert target.device().arch == "sm_90"


def test_fake_explicit_arch_overrides_the_gpu_arch(fake: Fake) -> None:
    fake.toolkit()
    fake.driver(H100)
    target = adapter(arch="sm_80")
    probe = target.probe()
    assert probe.tier is Tier.EXECUTE
    assert "compiled for sm_80" in probe.device
    assert target.device().arch == "sm_80"


def test_fake_ordinal_that_does_not_exist(fake: Fake) -> None:
    fake.toolkit()
    fake.driver(H100)
    for arch in (None, "sm_90"):  # an explicit arch does not turn it into compile-only
        probe = adapter("nvgpu[1]", arch).probe()
        assert probe.tier is Tier.UNAVAILABLE
        assert "no GPU with ordinal 1" in probe.reason
        assert "0: NVIDIA H100 80GB HBM3" in probe.reason


def test_fake_ordinal_selects_its_gpu_and_lock(fake: Fake) -> None:
    fake.toolkit()
    fake.driver(H100, A100)
    target = adapter("nvgpu[1]")
    assert target.probe().tier is Tier.EXECUTE
    assert target.device().arch == "sm_80" and target.device().ordinal == 1
    assert target.lock_key() == "nvgpu:1"
    assert adapter().lock_key() == "nvgpu:0"


def test_fake_cuda_visible_devices_conflicting_with_the_ordinal(
    fake: Fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.toolkit()
    fake.driver(H100, A100)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    probe = adapter("nvgpu[1]").probe()
    assert probe.tier is Tier.UNAVAILABLE and "CUDA_VISIBLE_DEVICES='0'" in probe.reason
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    target = adapter()
    assert target.probe().tier is Tier.EXECUTE and target.device().ordinal == 1


@pytest.mark.parametrize(
    ("driver", "why"),
    [
        ({"exit_code": 9}, "nvidia-smi failed (exit 9)"),
        ({"libcuda": False}, "the CUDA driver library does not load"),
    ],
)
def test_fake_broken_driver_falls_back_to_compile_only(fake: Fake, driver: dict, why: str) -> None:
    fake.toolkit()
    fake.driver(H100, **driver)
    probe = adapter(arch="sm_90").probe()
    assert probe.tier is Tier.COMPILE_ONLY
    assert why in probe.reason
    no_arch = adapter().probe()
    assert no_arch.tier is Tier.UNAVAILABLE and why in no_arch.reason


def test_fake_gpu_without_compute_capability_needs_an_arch(fake: Fake) -> None:
    fake.toolkit()
    fake.driver("0, Some GPU, [N/A], 1.0")
    probe = adapter().probe()
    assert probe.tier is Tier.UNAVAILABLE and "no compute capability" in probe.reason
    assert adapter(arch="sm_90").probe().tier is Tier.EXECUTE


def test_fake_missing_xtc_backend(fake: Fake, monkeypatch: pytest.MonkeyPatch) -> None:
    fake.toolkit()

    def broken() -> None:
        raise ImportError("no module named mlir")

    monkeypatch.setattr(xtc_env, "import_mlir_backend", broken)
    probe = adapter(arch="sm_90").probe()
    assert probe.tier is Tier.UNAVAILABLE
    assert "XTC's MLIR nvgpu backend does not import: no module named mlir" in probe.reason


def test_fake_probe_that_raises_makes_the_target_unavailable(
    fake: Fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.toolkit()

    def explode() -> None:
        raise OSError("boom")

    monkeypatch.setattr(nvgpu, "find_gpus", explode)
    probe = adapter(arch="sm_90").status()  # status(): the probe, never raising
    assert probe.tier is Tier.UNAVAILABLE and "OSError: boom" in probe.reason


def test_fake_unavailable_target_refuses_to_compile(fake: Fake, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="cannot compile here: no CUDA toolkit"):
        adapter(arch="sm_90").compile(case("matmul-float32-13x11x7-none"), tmp_path / "w")


# -- real compile-only runs with this machine's CUDA toolkit ---------------------------------

_toolkit, _no_toolkit = nvgpu.find_toolkit()
needs_toolkit = pytest.mark.skipif(_toolkit is None, reason=f"needs a CUDA toolkit: {_no_toolkit}")
SAMPLE = [
    "matmul-float32-13x11x7-tile",
    "matmul-float64-31x37x29-parallelize",
    "conv2d-float32-1x9x9x3-3x3x8-s2-p1-none",
    "mlp-float32-1x16x32x10-tile",
    "pad-float32-5x7-pad0:1-2_1:0-3-none",
]


def case(key: str) -> Case:
    return next(c for c in builtin_cases() if c.key == key)


@pytest.fixture(scope="module")
def sm90() -> NvgpuTarget:
    """A compile-only nvgpu target for sm_90 (a GPU, if any, is hidden from it)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(nvgpu, "find_gpus", lambda: ([], "GPU hidden by the test"))
        target = adapter(arch="sm_90")
        assert target.status().tier is Tier.COMPILE_ONLY, target.status().reason
    return target


@pytest.fixture(scope="module")
def compiled(sm90: NvgpuTarget, tmp_path_factory: pytest.TempPathFactory) -> Callable:
    """Compile a case once per module: ``compiled(case) -> Artifact``."""
    done: dict[str, Artifact] = {}

    def get(placed: Case) -> Artifact:
        if placed.id not in done:
            done[placed.id] = sm90.compile(placed, tmp_path_factory.mktemp("nvgpu"))
        return done[placed.id]

    return get


@needs_toolkit
@pytest.mark.parametrize("key", SAMPLE)
def test_compile_every_placement_holds_an_sm90_binary_and_its_placement(
    sm90: NvgpuTarget, compiled: Callable, key: str
) -> None:
    base = case(key)
    for where in placements(base.graph):
        placed = base.place(where)
        artifact = compiled(placed)
        sm90.check_artifact(placed, artifact)
        placement.check(placed, artifact.directory)
        assert artifact.notes["arch"] == "sm_90"
        _, flags = placement.device_flags((artifact.directory / "source.mlir").read_text())
        assert flags == [where[n] == DEVICE for n in placement.operand_names(placed)]


@needs_toolkit
@pytest.mark.parametrize("flip", ["A", "C"])
def test_compile_wrong_placement_claim_fails_naming_the_operand(
    compiled: Callable, flip: str
) -> None:
    base = case("matmul-float32-13x11x7-tile")
    real = {"A": HOST, "B": DEVICE, "C": DEVICE}
    artifact = compiled(base.place(real))
    claim = dict(real, **{flip: DEVICE if real[flip] == HOST else HOST})
    with pytest.raises(AssertionError, match=f"operand {flip} .*memref.on_device"):
        placement.check(base.place(claim), artifact.directory)
    found = placement.problems(base.place(claim), (artifact.directory / "source.mlir").read_text())
    assert len(found) == 1 and found[0].startswith(f"operand {flip} ")


@needs_toolkit
def test_compile_artifact_for_another_arch_fails(compiled: Callable) -> None:
    placed = case("matmul-float32-13x11x7-none").place({"A": DEVICE, "B": DEVICE, "C": DEVICE})
    artifact = compiled(placed)
    with pytest.raises(AssertionError, match=r'chip = "sm_90".*not sm_80'):
        nvgpu.check_gpu_binary(artifact.directory, "sm_80")


@needs_toolkit
def test_compile_gpu_binary_is_an_sm90_cubin_shipped_in_the_library(compiled: Callable) -> None:
    artifact = compiled(case("conv2d-float32-1x9x9x3-3x3x8-s2-p1-none"))
    lowered = (artifact.directory / "temps" / "kernel.llvm.mlir").read_text()
    binaries, launched = placement.with_module(lowered, gpu_binary.gpu_objects)
    assert binaries and set(binaries) <= launched
    for objects in binaries.values():
        for _, blob in objects:
            assert nvgpu.cubin_archs(blob) == ["sm_90"]
            assert blob in (artifact.directory / "kernel.so").read_bytes()


def test_artifact_without_gpu_binary_fails(tmp_path: Path) -> None:
    (tmp_path / "temps").mkdir()
    (tmp_path / "temps" / "kernel.llvm.mlir").write_text("llvm.func @f() {\n  llvm.return\n}\n")
    (tmp_path / "kernel.so").write_bytes(b"\x7fELF")
    with pytest.raises(AssertionError, match=r"no gpu\.binary, XTC produced host code only"):
        nvgpu.check_gpu_binary(tmp_path, "sm_90")
    with pytest.raises(AssertionError, match=r"no kernel\.llvm\.mlir"):
        nvgpu.check_gpu_binary(tmp_path / "nothing", "sm_90")


@needs_toolkit
@pytest.mark.parametrize(
    ("key", "steps"),
    [
        ("matmul-float32-13x11x7-none", [("parallelize", (["i"],))]),
        ("matmul-float32-1x17x8-tile", [("parallelize", (["j"],))]),  # i, i1: one iteration
        ("matmul-float32-1x17x8-parallelize", [("parallelize", (["j"],))]),
        ("matmul-float32-33x65x17-parallelize", []),  # the schedule already maps i
        ("conv2d-float32-1x8x8x3-3x3x4-s1-p0-tile+interchange", [("parallelize", (["h"],))]),
        ("pad-float32-1x16-pad1:4-4-none", [("parallelize", (["j"],))]),
    ],
)
def test_compile_gpu_steps_parallelize_the_outermost_parallel_loop(
    sm90: NvgpuTarget, key: str, steps: list
) -> None:
    graph = xtc_env.build_graph(case(key), sm90.device())
    backend = xtc_env.import_mlir_backend().Backend(graph)
    assert nvgpu.gpu_steps(graph, backend, case(key)) == steps


@needs_toolkit
def test_compile_single_point_case_has_no_gpu_kernel(sm90: NvgpuTarget, tmp_path: Path) -> None:
    with pytest.raises(NoGpuKernel, match="no parallel loop of more than one iteration"):
        sm90.compile(case("matmul-float32-1x1x1-none"), tmp_path)


@needs_toolkit
def test_compile_runner_checks_placement_then_artifact(sm90: NvgpuTarget, tmp_path: Path) -> None:
    placed = case("matmul-float32-13x11x7-tile").place({"A": HOST, "B": DEVICE, "C": DEVICE})
    outcome = run_case(sm90, placed, tmp_path / "ok")
    assert (outcome.status, outcome.phase) == (Status.COMPILED, "check-artifact"), outcome.message
    assert outcome.run_s == 0.0 and outcome.times == []  # nothing ran: compiled, not passed
    # XTC 0.3.2's relu gives its result the input's placement: the check catches it.
    relu = case("relu-float32-5x7-none").place({"X": HOST, "Y": DEVICE})
    outcome = run_case(sm90, relu, tmp_path / "relu")
    assert (outcome.status, outcome.phase) == (Status.FAILED, "placement")
    assert "operand Y (argument 1 of @relu) is placed on the device" in outcome.message


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a GPU driver is here")
def test_suite_without_arch_or_gpu_skips_every_case(run) -> None:  # type: ignore[no-untyped-def]
    result = run("--xtc-target=nvgpu", "-q", "-k", "matmul-float32-13x11x7")
    assert result.ret == 0, result.stdout.str()
    outcomes = result.parseoutcomes()
    outcomes.pop("deselected", None)
    assert set(outcomes) == {"skipped"}, outcomes
    out = result.stdout.str()
    assert "pass --xtc-nvgpu-arch=sm_XX" in out or "no CUDA toolkit" in out
