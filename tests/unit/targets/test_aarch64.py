"""The ``aarch64`` targets: probes (one line naming what is missing and how to get it),
the choice of processor by name, and, with the real cross toolchain and QEMU user mode,
kernels compiled by XTC for AArch64, run on the emulated CPU and judged here: the real
target accepted, faulty variants rejected (a runner call that drops an output's
remainder, a write past an operand's end, an SVE image on a NEON-only CPU).

The tests that run QEMU skip where the toolchain is missing (``bash .ci/install-cross``
installs it), unless ``XTC_REQUIRE_CROSS=1`` (CI sets it) makes that a failure.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from pytest_xtc.conformance import builtin_cases
from pytest_xtc.core.adapter import Tier, Timing
from pytest_xtc.core.cases.case import Case
from pytest_xtc.core.execution import guard
from pytest_xtc.core.execution.runner import run_case
from pytest_xtc.core.execution.settings import Settings
from pytest_xtc.core.outcome import Status
from pytest_xtc.core.pack import device_aarch64
from pytest_xtc.targets.aarch64 import Aarch64Device, Aarch64Target
from pytest_xtc.targets.toolchains import aarch64 as cross
from tests.conftest import spec_of

FAST = Settings(isolate=False, perf=False)
HAVE_CROSS = all(shutil.which(t) for t in (cross.CC, device_aarch64.EMULATOR))
needs_cross = pytest.mark.skipif(
    not HAVE_CROSS and os.environ.get("XTC_REQUIRE_CROSS") != "1",
    reason="no AArch64 cross toolchain or qemu-aarch64 (bash .ci/install-cross)")


def target(name: str = "aarch64-qemu", **options: str) -> Aarch64Target:
    return Aarch64Target(spec_of(name, options))


def case(case_id: str) -> Case:
    return next(c for c in builtin_cases() if c.id == case_id)


# -- probes and names (no toolchain needed) ---------------------------------------------------


@pytest.mark.parametrize("tool, said", [
    (device_aarch64.EMULATOR, "qemu-aarch64 not found: apt-get install qemu-user"),
    (cross.CC, "aarch64-linux-gnu-gcc not found: apt-get install gcc-aarch64-linux-gnu"),
])
def test_probe_names_the_missing_tool_and_how_to_get_it(
    tool: str, said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name: None if name == tool else real(name))
    probe = target().status()
    assert probe.tier is Tier.UNAVAILABLE and probe.reason.startswith(said), probe.reason
    assert "\n" not in probe.reason


def test_darwin_has_no_qemu_user_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "system", lambda: "Darwin")
    probe = target().status()
    assert probe.tier is Tier.UNAVAILABLE and "no user mode on Darwin" in probe.reason


def test_native_needs_an_aarch64_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device_aarch64, "native", lambda: False)
    probe = target("aarch64-native").status()
    assert probe.tier is Tier.UNAVAILABLE and "not AArch64 (use aarch64-qemu)" in probe.reason


@pytest.mark.parametrize("native, emulated", [(False, True), (True, False)])
def test_plain_aarch64_chooses_by_machine(
    native: bool, emulated: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(device_aarch64, "native", lambda: native)
    assert target("aarch64").emulated() is emulated
    assert target("aarch64-qemu").emulated() and not target("aarch64-native").emulated()


def test_cpu_option_is_checked() -> None:
    (option,) = Aarch64Target.options
    assert option.problem("cortex-a57") is None and option.problem("neoverse-v1") is None
    assert "not a valid value" in str(option.problem("cortex a57; rm"))


# -- on the emulated processor ----------------------------------------------------------------


@needs_cross
def test_probe_names_emulator_version_and_cpu() -> None:
    probe = target().status()
    assert probe.tier is Tier.EXECUTE, probe.reason
    assert probe.versions["qemu-aarch64"].startswith("qemu-aarch64 version")
    assert probe.versions["emulated-cpu"] == "cortex-a57"
    assert "cortex-a57" in probe.device and "QEMU" in probe.device
    assert "emulator's" in probe.reason


@needs_cross
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_real_target_passes(seed: int, tmp_path: Path) -> None:
    settings = replace(FAST, base_seed=seed)
    for case_id in ("matmul-float32-13x11x7-tile", "relu-float32-5x7-vectorize"):
        outcome = run_case(target(), case(case_id), tmp_path / case_id, settings)
        assert outcome.status is Status.PASSED, outcome.message


@needs_cross
def test_kernel_is_an_aarch64_elf_and_a_host_one_is_refused(tmp_path: Path) -> None:
    aarch = target()
    artifact = aarch.compile(case("matmul-float32-13x11x7-tile"), tmp_path / "a")
    assert cross.elf_machine(Path(artifact.handle.file_name)) == cross.EM_AARCH64
    aarch.check_artifact(case("matmul-float32-13x11x7-tile"), artifact)
    host_so = Path(shutil.which("python3") or "/bin/sh").resolve()  # an x86 (host) ELF
    faulty = replace(artifact, handle=type("M", (), {"file_name": str(host_so)})())
    with pytest.raises(AssertionError, match="not AArch64"):
        aarch.check_artifact(case("matmul-float32-13x11x7-tile"), faulty)


class DroppedRemainder(Aarch64Device):
    """FAULTY runner call: an output's last elements (those past a whole 16-byte vector)
    are not carried back, as a vectorised copy without its remainder loop would do."""

    def call(self, operands, timing, limit_s=None):  # type: ignore[no-untyped-def]
        before = [np.array(o) for o in operands]
        times = super().call(operands, timing, limit_s)
        out, was = operands[-1].reshape(-1), before[-1].reshape(-1)
        keep = (out.nbytes // 16) * 16 // out.itemsize
        out[keep:] = was[keep:] if keep < out.size else was[-1:]
        return times


@needs_cross
def test_runner_call_that_drops_a_remainder_is_rejected(tmp_path: Path) -> None:
    faulty = target()
    faulty.status()
    real = faulty.device()
    faulty._device = DroppedRemainder(real.cpu, real.qemu_cpu, Path(real.command[-1]), True)
    outcome = run_case(faulty, case("relu-float32-5x7-vectorize"), tmp_path / "f", FAST)
    assert outcome.status is Status.FAILED, outcome.message
    assert "3 never written" in outcome.message, outcome.message


def _cross_build(source: str, flags: list[str], tmp_path: Path) -> Path:
    (tmp_path / "k.c").write_text(source)
    library = tmp_path / "k.so"
    subprocess.run([cross.CC, "-O1", "-shared", "-fPIC", *flags, "-o", str(library),
                    str(tmp_path / "k.c")], check=True)
    return library


def _device(tmp_path: Path, qemu_cpu: str = "cortex-a57") -> Aarch64Device:
    runner = cross.runner(tmp_path / "runner")
    return Aarch64Device("cortex-a57", qemu_cpu, runner, emulated=True)


@needs_cross
@pytest.mark.parametrize("past, found", [(0, []), (1, ["wrote 1 element(s) past the end of y "
                                                          "(up to 1 past it)"])])
def test_guard_bands_see_the_device_write_out_of_bounds(
    past: int, found: list[str], tmp_path: Path
) -> None:
    library = _cross_build(
        f"void entry(float *x, float *y) {{ for (int i = 0; i < 8 + {past}; i++) "
        "y[i] = x[i] + 1; }", [], tmp_path)
    device = _device(tmp_path)
    device.flash(str(library), "entry")
    x = guard.place("x", np.arange(8, dtype=np.float32))
    from pytest_xtc.core.cases import values

    y = guard.place("y", values.unwritten((8,), "float32"))
    device.call([x.view, y.view], Timing())
    assert guard.check([x, y]) == found
    assert np.array_equal(y.view, np.arange(8, dtype=np.float32) + 1)


SVE_KERNEL = """#include <arm_sve.h>
void entry(float *x, float *y) {
  for (int i = 0; i < 8; i += (int)svcntw()) {
    svbool_t p = svwhilelt_b32(i, 8);
    svst1_f32(p, y + i, svadd_n_f32_x(p, svld1_f32(p, x + i), 1.0f));
  }
}"""


@needs_cross
def test_sve_image_on_a_neon_cpu_is_an_illegal_instruction(tmp_path: Path) -> None:
    library = _cross_build(SVE_KERNEL, ["-march=armv8.2-a+sve"], tmp_path)
    x, y = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    on_max = _device(tmp_path, "max")  # an SVE CPU: the image itself computes right
    on_max.flash(str(library), "entry")
    on_max.call([x, y], Timing())
    assert np.array_equal(y, x + 1)
    neon = _device(tmp_path)
    neon.flash(str(library), "entry")
    with pytest.raises(device_aarch64.DeviceFault,
                       match=r"SIGILL \(illegal instruction\) on -cpu cortex-a57"):
        neon.call([x, np.zeros(8, np.float32)], Timing())


@needs_cross
def test_sve_case_on_a_neon_cpu_fails_the_case_not_the_session(tmp_path: Path) -> None:
    """A whole case whose image is SVE code, run on -cpu cortex-a57: the case fails,
    naming the signal and the CPU; the session goes on."""

    class SveImage(Aarch64Target):
        def compile(self, case, workdir):  # type: ignore[no-untyped-def]
            artifact = super().compile(case, workdir)
            source = SVE_KERNEL.replace("void entry", f"void {artifact.handle.payload_name}")
            image = _cross_build(source, ["-march=armv8.2-a+sve"], workdir)
            shutil.copyfile(image, artifact.handle.file_name)
            return artifact

    faulty = SveImage(spec_of("aarch64-qemu", {}))
    outcome = run_case(faulty, case("relu-float32-1x1-none"), tmp_path / "c", FAST)
    assert outcome.status is Status.FAILED
    assert "SIGILL (illegal instruction) on -cpu cortex-a57" in outcome.message, outcome.message



@needs_cross
def test_packed_aarch64_case_runs_on_the_device_runner_and_is_judged(tmp_path: Path) -> None:
    """Compile and pack here, run by the pack's device runner (device_call under QEMU,
    QEMU_CPU naming the CPU), judge here: the same verdict as a local run."""
    import sys

    pack, select = tmp_path / "pack", ["-k", "relu-float32-5x7-vectorize"]
    common = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
              "--xtc-target=aarch64-qemu", *select]
    done = subprocess.run([*common, f"--xtc-pack={pack}"], cwd=tmp_path, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout[-2000:]
    ran = subprocess.run([sys.executable, str(pack / "runner" / "device_runner.py"), str(pack)],
                         capture_output=True, text=True, env={**os.environ,
                                                              "QEMU_CPU": "cortex-a57"})
    assert ran.returncode == 0 and ran.stdout.startswith("ok"), ran.stdout + ran.stderr
    judged = subprocess.run([*common, f"--xtc-from-pack={pack}"], cwd=tmp_path,
                            capture_output=True, text=True)
    assert judged.returncode == 0 and "1 passed" in judged.stdout, judged.stdout[-2000:]
