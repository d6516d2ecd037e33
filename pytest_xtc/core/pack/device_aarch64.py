"""``aarch64-bare`` kernels for the device runner (and the ``aarch64`` adapter's own runs):
an AArch64 shared library called by ``device_call`` (``device_call.c``, built once with
the cross compiler: what a board with no Python runs), on this machine when it is an
AArch64 one, else under QEMU user mode (``qemu-aarch64``; ``QEMU_CPU`` and
``QEMU_LD_PREFIX`` from the environment say which CPU and which AArch64 C library).
Python 3 and numpy only.

Each operand travels with the memory its caller owns around it (:func:`region`: the guard
bands and the unwritten sentinel of ``guard.py``), and comes back whole: writes out of
bounds made on the device show in the caller's bands, where its own checks see them.
Times are the device's clock: under QEMU, the emulator's (never a hardware figure).
"""

from __future__ import annotations

import os
import platform
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

KIND = "aarch64-bare"
EMULATOR = "qemu-aarch64"
SYSROOT = "/usr/aarch64-linux-gnu"  # Debian's AArch64 C library (libc6-arm64-cross)
ALIGN = 256
#: At most this many bytes of the caller's memory around an operand travel with it (the
#: guard bands are at most 1 MiB each side): a bigger owner sends the operand alone.
MAX_AROUND = 2 * (1 << 20) + 2 * ALIGN


class DeviceFault(RuntimeError):
    """The kernel ended its process by a signal (an illegal instruction, a fault)."""


def native() -> bool:
    return platform.machine().lower() in ("aarch64", "arm64")


def emulator(cpu: str = "", sysroot: str = "") -> list[str]:
    """The command prefix that runs an AArch64 program here: none on an AArch64 machine,
    else QEMU user mode (``cpu``, ``sysroot``: its ``-cpu`` and ``-L``; empty: QEMU's
    environment variables, else its defaults)."""
    if native():
        return []
    command = [EMULATOR]
    if sysroot or not os.environ.get("QEMU_LD_PREFIX"):
        command += ["-L", sysroot or SYSROOT]
    if cpu:
        command += ["-cpu", cpu]
    return command


def region(array: np.ndarray) -> tuple[np.ndarray, int]:
    """The contiguous memory the caller owns around ``array`` (the array numpy says owns
    it, when it is a byte buffer of moderate size holding the array) and the byte offset
    of ``array`` in it; else ``array`` itself at offset 0."""
    owner = array.base
    while isinstance(owner, np.ndarray) and owner.base is not None and isinstance(
            owner.base, np.ndarray):
        owner = owner.base
    if (isinstance(owner, np.ndarray) and owner.flags["C_CONTIGUOUS"]
            and array.flags["C_CONTIGUOUS"]):
        start = array.ctypes.data - owner.ctypes.data
        if start >= 0 and start + array.nbytes <= owner.nbytes <= array.nbytes + MAX_AROUND:
            return owner.reshape(-1).view(np.uint8), start
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8), 0


def call(
    runner: Sequence[str],
    runtime: Sequence[Path],
    library: Path,
    entry: str,
    operands: Sequence[np.ndarray],
    timing: Mapping[str, Any],
    env: Mapping[str, str] | None = None,
    cpu_name: str = "",
    limit_s: float | None = None,
) -> list[float]:
    """One call of ``entry`` in ``library`` on ``operands`` (inputs, then outputs), by
    ``runner`` (the emulator prefix and ``device_call``); what the kernel wrote is in the
    operands and around them after. Returns the seconds per call. Raises
    :class:`DeviceFault` naming the signal and ``cpu_name``, RuntimeError otherwise."""
    with tempfile.TemporaryDirectory(prefix="xtc-aarch64-call-") as scratch:
        folder = Path(scratch)
        regions, args = [], []
        for n, array in enumerate(operands):
            memory, skip = region(array)
            path = folder / f"operand{n}"
            memory.tofile(path)
            regions.append((memory, array, skip, path))
            args += [str(path), str(memory.ctypes.data % ALIGN), str(skip)]
        times = folder / "times"
        command = [*runner, str(len(runtime)), *map(str, runtime), str(library), entry,
                   str(int(timing.get("repeat", 1))), str(int(timing.get("number", 1))),
                   str(float(timing.get("min_repeat_ms", 0))), str(times), *args]
        done = subprocess.run(command, capture_output=True, timeout=limit_s,
                              env={**os.environ, **(env or {})})
        said = (done.stderr or done.stdout).decode(errors="replace").strip()[-500:]
        if done.returncode < 0 or done.returncode in (128 + signal.SIGILL, 128 + signal.SIGSEGV,
                                                      128 + signal.SIGBUS):
            number = -done.returncode if done.returncode < 0 else done.returncode - 128
            name = signal.Signals(number).name
            what = {"SIGILL": "illegal instruction", "SIGSEGV": "segmentation fault",
                    "SIGBUS": "bus error"}.get(name, name)
            on = f" on {cpu_name}" if cpu_name else ""
            raise DeviceFault(f"the kernel died of {name} ({what}){on}"
                              + (f": {said}" if said else ""))
        if done.returncode != 0:
            raise RuntimeError(f"device_call exited with status {done.returncode}: {said}")
        for memory, array, skip, path in regions:
            back = np.fromfile(path, np.uint8)
            if back.size != memory.size:
                raise RuntimeError(f"device_call gave {back.size} bytes back for an operand "
                                   f"of {memory.size}")
            memory[...] = back
            if not np.shares_memory(memory, array):  # a non-contiguous operand: a copy went
                array[...] = back[skip : skip + array.nbytes].view(array.dtype).reshape(
                    array.shape)
        return [float(line) for line in times.read_text().split()]


class Aarch64Kernel:
    """The device runner's ``aarch64-bare`` kernel: ``runtime[0]`` of the call protocol is
    ``device_call``, the rest the libraries the kernel needs (OpenMP)."""

    def __init__(self, case_dir: Path, call_json: Mapping[str, Any], runtime: list[Path],
                 scratch: Path) -> None:
        runner = scratch.parent / ".libs" / f"{runtime[0].name}.exe"  # the runner's folder
        if not runner.is_file():
            runner.parent.mkdir(parents=True, exist_ok=True)
            partial = runner.with_name(f".{runner.name}.{os.getpid()}")
            shutil.copyfile(runtime[0], partial)
            partial.chmod(0o755)
            os.replace(partial, runner)
        self.runner = [*emulator(), str(runner)]
        self.runtime = runtime[1:]
        self.library = case_dir / call_json["library"]
        self.entry = str(call_json["entry"])
        self.cpu = os.environ.get("QEMU_CPU", "") if not native() else platform.machine()

    def __call__(self, operands: list[Any], timing: Mapping[str, Any]) -> list[float]:
        return call(self.runner, self.runtime, self.library, self.entry,
                    [o.view for o in operands], timing,
                    cpu_name=self.cpu)
