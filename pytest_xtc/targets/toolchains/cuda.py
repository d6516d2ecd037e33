"""The CUDA toolkit (nvcc, ptxas) and driver (nvidia-smi, libcuda) the nvgpu adapter uses."""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

DEFAULT_CUDA_DIR = Path("/usr/local/cuda")
LIBCUDA = "libcuda.so.1"  # the driver library the CUDA runtime loads
ARCH = re.compile(r"^sm_(\d+)(\d)$")  # sm_<major><minor>: sm_90 is compute capability 9.0


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as ``nvidia-smi`` lists it."""

    index: int
    name: str
    compute_cap: str  # "9.0"; "" when nvidia-smi does not say
    driver: str = ""

    @property
    def arch(self) -> str:
        return "sm_" + self.compute_cap.replace(".", "") if self.compute_cap else ""


def find_toolkit() -> tuple[Path | None, str]:
    """The CUDA toolkit (``CUDA_INSTALL_DIR``, else /usr/local/cuda) with nvcc and ptxas, or
    None and what was looked for."""
    from_env = os.environ.get("CUDA_INSTALL_DIR")
    root = Path(from_env) if from_env else DEFAULT_CUDA_DIR
    where = f"CUDA_INSTALL_DIR={from_env}" if from_env else "CUDA_INSTALL_DIR unset"
    missing = [t for t in ("nvcc", "ptxas") if not os.access(root / "bin" / t, os.X_OK)]
    if missing:
        return None, (f"no CUDA toolkit: {' and '.join(missing)} not found in {root / 'bin'} "
                      f"(looked in {where})")
    return root, ""


def nvcc_info(toolkit: Path) -> tuple[str | None, str]:
    """nvcc's version (``13.0.88``), or None and why."""
    nvcc = toolkit / "bin" / "nvcc"
    try:
        done = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"{nvcc} does not run: {exc}"
    match = re.search(r"release [\d.]+, V([\d.]+)", done.stdout)
    if done.returncode != 0 or match is None:
        said = (done.stderr or done.stdout).strip()[:200]
        return None, f"{nvcc} --version failed (exit {done.returncode}): {said}"
    return match[1], ""


def nvcc_archs(toolkit: Path) -> list[str]:
    """The ``sm_XX`` nvcc compiles for; empty when it does not say."""
    try:
        done = subprocess.run([str(toolkit / "bin" / "nvcc"), "--list-gpu-code"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    return re.findall(r"^sm_\d+$", done.stdout, re.MULTILINE) if done.returncode == 0 else []


def unknown_arch(toolkit: Path, nvcc_version: str, arch: str) -> str:
    """Why nvcc cannot compile for ``arch``, or "" (also when nvcc does not list its archs)."""
    codes = nvcc_archs(toolkit)
    if codes and arch not in codes:
        return f"nvcc {nvcc_version} cannot compile for {arch} (it knows {', '.join(codes)})"
    return ""


def find_gpus() -> tuple[list[GpuInfo], str]:
    """The GPUs a working driver shows (nvidia-smi answers, libcuda loads), or none and why."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return [], "nvidia-smi not found on PATH"
    query = ["--query-gpu=index,name,compute_cap,driver_version", "--format=csv,noheader"]
    try:
        done = subprocess.run([smi, *query], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return [], f"nvidia-smi does not run: {exc}"
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip()[:200]
        return [], f"nvidia-smi failed (exit {done.returncode}): {said}"
    gpus = []
    for line in done.stdout.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 4 and fields[0].isdigit():
            cap = fields[2] if re.fullmatch(r"\d+\.\d", fields[2]) else ""
            gpus.append(GpuInfo(int(fields[0]), fields[1], cap, fields[3]))
    if not gpus:
        return [], f"nvidia-smi lists no GPU: {done.stdout.strip()[:200]!r}"
    try:
        ctypes.CDLL(LIBCUDA)
    except OSError as exc:
        return [], f"the CUDA driver library does not load: {exc}"
    return gpus, ""


def visible_devices_conflict(ordinal: int) -> str:
    """Why CUDA_VISIBLE_DEVICES hides GPU ``ordinal`` (nvidia-smi's order), or ""."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None or visible.strip() == str(ordinal):
        return ""
    return (f"CUDA_VISIBLE_DEVICES={visible!r} conflicts with GPU {ordinal}: unset it, or "
            f"select nvgpu[N] with CUDA_VISIBLE_DEVICES=N")
