"""The nvgpu device check's driver (devicecheck/nvgpu/run_kernels.py), WITHOUT a GPU.

FAKE CUDA: these tests run the check's host self-test. The same cases, graphs, schedules
and data as the GPU check are compiled by XTC for the host (``build.py --selftest-only``)
and run by the same driver code through a stand-in for libmlir_cuda_runtime.so
(devicecheck/nvgpu/mock_mgpu.c) that works on host memory. They show that the driver
passes the operands, copies them and judges the outputs as it should; they say nothing
about a GPU, and nothing here runs on one (see docs/nvgpu-device-check.md).
"""

from __future__ import annotations

import ctypes.util
import importlib.util
import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from tests import ROOT

CHECK = ROOT / "devicecheck" / "nvgpu"
REAL = ["mm_64x48x32_tile_i4", "mm_37x29x23_odd_tile_i4", "mm_128x96x200_device",
        "mm_256x256x256_grid2d", "mm_100x75x33_threads_mixed", "relu_300x129_threads",
        "conv2d_1x18x18x8_3x3x8x16", "conv2d_2x17x17x4_3x3x4x8_s2_device",
        "mmrelu_40x24x16_two_kernels"]
FAULTY = ["FAULTY_relu_33x65_ref_is_abs", "FAULTY_mm_kernel_K31_data_K32"]
HOST_PLACED, DEVICE_PLACED = "mm_64x48x32_tile_i4", "mm_128x96x200_device"


def omp_dir() -> Path:
    """Where the cmeel-libomp wheel put libomp.so, which XTC's host kernels link."""
    return Path(sysconfig.get_paths()["platlib"]) / "cmeel.prefix" / "lib"


@pytest.fixture(scope="module")
def selftest_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """build.py --selftest-only: host kernels, data, references, the stand-in runtime."""
    if not (CHECK / "build.py").is_file():
        pytest.skip("no devicecheck/nvgpu/ in this tree")
    if not sys.platform.startswith("linux"):
        pytest.skip("the driver loads ELF kernels and glibc's aligned_alloc: Linux only")
    if shutil.which("cc") is None:
        pytest.skip("no C compiler (cc) to build the stand-in CUDA runtime (mock_mgpu.c)")
    if importlib.util.find_spec("xtc") is None:
        pytest.skip("XTC (xtc-tools) is not installed: nothing to compile the cases")
    if not (omp_dir() / "libomp.so").is_file() and ctypes.util.find_library("omp") is None:
        pytest.skip("no libomp.so for XTC's host kernels (the cmeel-libomp wheel)")
    bundle = tmp_path_factory.mktemp("devicecheck") / "build"
    done = subprocess.run([sys.executable, str(CHECK / "build.py"), "--selftest-only",
                           "--out", str(bundle)], capture_output=True, text=True,
                          timeout=180, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return bundle


def run_host(bundle: Path, *options: str) -> tuple[int, dict[str, Any]]:
    """The driver's host mode on ``bundle``: its exit status and its JSON report."""
    out = bundle.parent / "report.json"
    out.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, str(CHECK / "run_kernels.py"), "--mode", "host", "--bundle",
         str(bundle), "--libdir", str(omp_dir()), "--out", str(out), "--min-time", "0.01",
         "--case-timeout", "30", "--deadline", "100", *options],
        capture_output=True, text=True, timeout=150, check=False)
    assert out.is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    return done.returncode, json.loads(out.read_text())


def statuses(report: dict[str, Any]) -> dict[str, str]:
    return {case["name"]: case["status"] for case in report["cases"]}


def test_devicecheck_driver_with_fake_cuda_accepts_the_real_kernels_rejects_the_faulty(
        selftest_bundle: Path) -> None:
    code, report = run_host(selftest_bundle)
    assert code == 0
    assert report["verdict"] == "ALL GOOD: 9/9 XTC kernels correct, 2/2 faulty cases rejected"
    assert statuses(report) == {**dict.fromkeys(REAL, "PASS"), **dict.fromkeys(FAULTY, "FAIL")}
    cases = {case["name"]: case for case in report["cases"]}
    for name in REAL:
        assert cases[name]["err_first"] <= cases[name]["bound"], name
    for name in FAULTY:  # rejected by far, not at the edge of the bound
        assert cases[name]["err_first"] > 1000 * cases[name]["bound"], name
    # Host-placed operands are registered, device-placed ones allocated and copied.
    host_calls, device_calls = cases[HOST_PLACED]["mock_calls"], cases[DEVICE_PLACED]["mock_calls"]
    assert (host_calls["host_register"], host_calls["mem_alloc"]) == (3, 0)
    assert (device_calls["host_register"], device_calls["mem_alloc"]) == (0, 3)
    assert device_calls["mem_free"] == 3 and device_calls["memcpy"] >= 4


@pytest.mark.parametrize("sabotage", ["swap_inputs", "no_copy_in", "no_copy_out"])
def test_devicecheck_driver_with_fake_cuda_catches_a_broken_driver(
        selftest_bundle: Path, sabotage: str) -> None:
    """A driver broken on purpose (arguments swapped, a copy to or from the "device"
    left out) makes correct kernels fail; copies break only device-placed operands."""
    code, report = run_host(selftest_bundle, "--sabotage", sabotage,
                            "--only", f"{HOST_PLACED},{DEVICE_PLACED}")
    assert code == 0
    assert report["verdict"].startswith("PROBLEMS: "), report["verdict"]
    found = statuses(report)
    assert found[DEVICE_PLACED] != "PASS"
    assert found[HOST_PLACED] == ("PASS" if sabotage.startswith("no_copy") else "FAIL")


def test_devicecheck_gpu_mode_refuses_a_bundle_without_gpu_kernels(
        selftest_bundle: Path) -> None:
    done = subprocess.run([sys.executable, str(CHECK / "run_kernels.py"), "--mode", "gpu",
                           "--bundle", str(selftest_bundle), "--out",
                           str(selftest_bundle.parent / "gpu.json")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "built with --selftest-only: no GPU kernels" in done.stderr
