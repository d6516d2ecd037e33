"""The libraries XTC's kernels need, found where XTC's wheels put them: the OpenMP runtime
(made findable before XTC is imported: :func:`bootstrap`), XTC's host runtime, the MLIR
and LLVM libraries of its CUDA runtime. :mod:`.xtc_env` re-exports these names."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import sys
import sysconfig
import tempfile
from functools import cache
from pathlib import Path

from pytest_xtc.core.xtc import runtime_cache


def _omp_dirs() -> list[Path]:
    roots = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *sys.path}
    return [Path(root) / "cmeel.prefix" / "lib" for root in roots if root]


@cache
def bootstrap() -> str | None:
    """Make the OpenMP runtime findable; the directory used, or None if none was needed."""
    if ctypes.util.find_library("omp"):
        return None
    for directory in _omp_dirs():
        lib = directory / "libomp.so"
        if lib.is_file():
            for var in ("LD_LIBRARY_PATH", "LIBRARY_PATH"):
                parts = [str(directory), *filter(None, os.environ.get(var, "").split(os.pathsep))]
                os.environ[var] = os.pathsep.join(parts)
            ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)  # kernels then resolve libomp.so
            return str(directory)
    return None


def openmp_libraries() -> tuple[Path, ...]:
    """The OpenMP runtime this process loaded (kernels with parallel loops call it)."""
    bootstrap()
    with contextlib.suppress(OSError), open("/proc/self/maps") as maps:
        found = {line.split()[-1] for line in maps if "libomp" in line.rsplit("/", 1)[-1]}
        return tuple(Path(p) for p in sorted(found) if Path(p).is_file())
    return ()


def host_runtime_library(directory: Path) -> Path:
    """XTC's host runtime (its ``evaluate_perf`` timing loop) as a file in ``directory``,
    built by XTC's own build (through the suite's cache)."""
    bootstrap()  # XTC's modules need the OpenMP runtime found first
    runtime_cache.install()  # built through the suite's cache
    from xtc.runtimes.host import runtime

    out = directory / "xtc-host-runtime.so"
    with tempfile.TemporaryDirectory() as scratch:
        runtime._compile_runtime(str(out), scratch, runtime.RuntimeType.HOST)
    return out


def mlir_prefix() -> str:
    """The MLIR installation XTC compiles with (its ``lib/`` holds the runtimes)."""
    bootstrap()  # XTC's modules need the OpenMP runtime found first
    from xtc.backends.mlir.MlirConfig import MlirConfig

    return str(MlirConfig().mlir_install_dir)


def llvm_library() -> Path:
    """``libLLVM.so`` of the LLVM wheel XTC uses (XTC's CUDA runtime library needs it)."""
    import llvm  # type: ignore[import-not-found]

    roots = [Path(p) for p in getattr(llvm, "__path__", [])]
    for root in roots:
        if (root / "lib" / "libLLVM.so").is_file():
            return root / "lib" / "libLLVM.so"
    raise FileNotFoundError(f"libLLVM.so not found under {', '.join(map(str, roots))}")
