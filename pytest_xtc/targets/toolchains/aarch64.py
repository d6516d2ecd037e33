"""The AArch64 cross toolchain as the ``aarch64`` adapter finds and drives it: Debian's
``gcc-aarch64-linux-gnu`` (with the AArch64 C library in ``/usr/aarch64-linux-gnu``),
QEMU user mode (``qemu-user``) and the AArch64 OpenMP runtime (``cmeel-libomp``'s
``manylinux_2_28_aarch64`` wheel, unpacked by ``.ci/install-cross``).

XTC gap worked around here (XTC 0.3.2): ``MlirConfig(arch="aarch64")`` makes ``llc`` emit
an AArch64 object, but the shared library is then linked by the host ``cc`` with
``-march=native`` and the host's MLIR runtime and OpenMP libraries ("incompatible with
i386:x86-64 output"). :func:`cross_compiler` links with the cross compiler, for the CPU
compiled for, against the AArch64 OpenMP runtime only (kernels call no MLIR runtime).
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

from pytest_xtc.core.pack import device_aarch64

CC = "aarch64-linux-gnu-gcc"
SETUP = "bash .ci/install-cross (apt-get install qemu-user gcc-aarch64-linux-gnu)"
OMP_ENV = "XTC_AARCH64_OMP_DIR"  # a folder holding an AArch64 libomp.so
EM_AARCH64 = 183  # ELF e_machine
#: LLVM CPUs QEMU 7.2 does not emulate, and the QEMU CPU that has their features.
QEMU_FOR = {"neoverse-v1": "max", "neoverse-v2": "max", "neoverse-n2": "max", "a64fx": "a64fx"}
RUNNER_SOURCE = Path(device_aarch64.__file__).with_name("device_call.c")


def command(argv: list[str]) -> tuple[bool, str]:
    """(whether ``argv`` ran with status 0, its first line of output)."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    said = (done.stdout or done.stderr).strip().splitlines()
    return done.returncode == 0, said[0] if said else ""


def missing(emulated: bool) -> tuple[str, dict[str, str]]:
    """(one line saying what is missing and how to get it, or ""; the versions found)."""
    found: dict[str, str] = {}
    if emulated and platform.system() == "Darwin":
        return "aarch64-qemu: QEMU has no user mode on Darwin (use aarch64-native on an " \
               "Apple silicon Linux VM, or a Linux machine)", found
    if shutil.which(CC) is None:
        return f"{CC} not found: apt-get install gcc-aarch64-linux-gnu ({SETUP})", found
    found[CC] = command([CC, "--version"])[1]
    if emulated and not Path(device_aarch64.SYSROOT, "lib", "ld-linux-aarch64.so.1").is_file():
        return (f"{device_aarch64.SYSROOT}: no AArch64 C library: apt-get install "
                f"libc6-dev-arm64-cross ({SETUP})"), found
    if emulated:
        if shutil.which(device_aarch64.EMULATOR) is None:
            return f"{device_aarch64.EMULATOR} not found: apt-get install qemu-user " \
                   f"({SETUP})", found
        found[device_aarch64.EMULATOR] = command([device_aarch64.EMULATOR, "--version"])[1]
    elif not device_aarch64.native():
        return f"aarch64-native: this machine is {platform.machine()}, not AArch64 " \
               "(use aarch64-qemu)", found
    return "", found


def qemu_cpus() -> frozenset[str]:
    ok, _ = command([device_aarch64.EMULATOR, "--version"])
    if not ok:
        return frozenset()
    listed = subprocess.run([device_aarch64.EMULATOR, "-cpu", "help"], capture_output=True,
                            text=True, timeout=30).stdout
    return frozenset(line.strip() for line in listed.splitlines()[1:] if line.strip())


def qemu_cpu(cpu: str) -> str:
    """The CPU QEMU emulates for code compiled for LLVM CPU ``cpu``."""
    cpus = qemu_cpus()
    return cpu if cpu in cpus else QEMU_FOR.get(cpu, "max")


def openmp_dir() -> Path | None:
    """Where the AArch64 ``libomp.so`` is (``XTC_AARCH64_OMP_DIR``, else where
    ``.ci/install-cross`` unpacks it: ``<venv>/share/pytest-xtc/aarch64/lib``), or None."""
    for folder in (os.environ.get(OMP_ENV), Path(sys.prefix) / "share/pytest-xtc/aarch64/lib"):
        if folder and (Path(folder) / "libomp.so").is_file():
            return Path(folder)
    return None


def runner(folder: Path) -> Path:
    """``device_call`` built for AArch64 (once per source: cached in ``folder``)."""
    source = RUNNER_SOURCE.read_bytes()
    built = folder / f"device_call-{hashlib.sha256(source).hexdigest()[:16]}"
    if not built.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        partial = built.with_name(f".{built.name}.{os.getpid()}")
        done = subprocess.run([CC, "-O2", "-o", str(partial), str(RUNNER_SOURCE), "-ldl"],
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{CC} could not build device_call: {done.stderr.strip()}")
        os.replace(partial, built)
    return built


def needs_openmp(library: Path) -> bool:
    """Whether a kernel library names the OpenMP runtime (linked --as-needed: only
    kernels with parallel loops do); the device then loads it first."""
    return b"libomp.so" in library.read_bytes()


def elf_machine(path: Path) -> int:
    """An ELF file's e_machine (0 when it is not an ELF file)."""
    head = path.read_bytes()[:20]
    if head[:4] != b"\x7fELF":
        return 0
    return int.from_bytes(head[18:20], "little" if head[5] == 1 else "big")


@cache
def cross_compiler() -> type:
    """XTC's MLIR compiler for ``arch="aarch64"``, its link done by the cross compiler."""
    from xtc.backends.mlir import MlirCompiler
    from xtc.backends.mlir.MlirTarget.MlirLLVMTarget import MlirLLVMTarget

    class CrossLinkedTarget(MlirLLVMTarget):
        @property
        def cmd_cc(self) -> list[str]:
            return [CC]

        @property
        def shared_libs(self) -> list[str]:
            omp = openmp_dir()  # needed only by kernels with parallel loops
            return ["-Wl,--as-needed", str(omp / "libomp.so")] if omp else []

        @property
        def shared_path(self) -> list[str]:
            return []

        def execute_command(self, cmd: list[str], *args: Any, **kwargs: Any) -> Any:
            if cmd and cmd[0] == CC:  # XTC's link options say -march=native: the host's
                cmd = [f"-mcpu={self._config.cpu}" if c == "-march=native" else c for c in cmd]
            return super().execute_command(cmd, *args, **kwargs)

    class CrossCompiler(MlirCompiler):
        def __init__(self, backend: Any, **kwargs: Any) -> None:
            super().__init__(backend, target="llvmir", **kwargs)
            self._target = CrossLinkedTarget(self._config)

    return CrossCompiler
