"""Two tool processes XTC starts on every compile, answered in the compiling process.

XTC's LLVM targets print the lowered module and pipe it to ``mlir-translate
--mlir-to-llvmir``: a process whose start (loading libMLIR and libLLVM, resolving their
symbols) is ~40 ms of a ~150 ms host compile, a fifth of a cold catalog's CPU. The same
translation ships in MLIR's Python bindings, of the same build and already loaded
(``mlir.dialects.llvm.translate_module_to_llvmir``). :func:`in_process` has an XTC target
answer exactly that command itself: it parses the very text XTC pipes and writes the
file the tool would, byte for byte (``tests/unit/core/xtc/test_translation.py`` compares
them). Any other command, any other option, and any failure of its own run the command
as XTC would, so a refusal reads as XTC's.

The host's target triple: XTC asks ``llvm-config --host-target`` once per target object,
so once per compile; the answer is the LLVM install's. :func:`prepare` asks XTC's own
property once in the template process, and each target made after (in the workers forked
from it) is given that answer.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

#: The one command answered here: ``mlir-translate`` with exactly these options.
TRANSLATE = ("mlir-translate", ("--mlir-to-llvmir",))

_context: Any = None  # this process's MLIR context for translations: no thread, ever
_triples: dict[str, str] = {}  # LLVM install -> XTC's answer for its host ("": none)


def prepare() -> None:
    """In the template process: the translation context made and the host's triple asked,
    so that each worker forked for a case finds both (no thread is started)."""
    from xtc.backends.mlir.MlirConfig import MlirConfig
    from xtc.backends.mlir.MlirTarget.MlirLLVMTarget import MlirLLVMTarget

    _shared_context()
    target = MlirLLVMTarget(MlirConfig())
    install = _native_install(target)
    if install is not None and install not in _triples:
        try:
            _triples[install] = target._native_target_triple or ""  # XTC asks llvm-config
        except Exception:  # each compile asks it then, as XTC does
            return


def in_process(target: Any) -> Any:
    """Have ``target``, an XTC LLVM CPU target (``MlirLLVMTarget`` or a subclass: others
    are left as they are), translate MLIR to LLVM IR in this process, and take the host's
    triple :func:`prepare` asked; returns it."""
    from xtc.backends.mlir.MlirTarget.MlirLLVMTarget import MlirLLVMTarget

    if not isinstance(target, MlirLLVMTarget):
        return target
    run = target.execute_command

    def execute(cmd: list[str], input_pipe: str | None = None,
                pipe_stdoutput: bool = True) -> subprocess.CompletedProcess[Any]:
        written = _output(cmd)
        if input_pipe is not None and written is not None and translated(input_pipe, written):
            return subprocess.CompletedProcess(cmd, 0, "" if pipe_stdoutput else None)
        return run(cmd, input_pipe, pipe_stdoutput)

    target.execute_command = execute  # type: ignore[method-assign]  # this one only
    install = _native_install(target)
    if install in _triples and not hasattr(target, "_native_target_triple_cache"):
        target._native_target_triple_cache = _triples[install]  # XTC's cache of its answer
    return target


def _native_install(target: Any) -> str | None:
    """The LLVM install whose host triple ``target`` asks, where it asks one (XTC 0.3.2:
    ``arch`` native; its private cache, else None)."""
    config = getattr(target, "_config", None)
    if (getattr(config, "arch", None) != "native"
            or not hasattr(type(target), "_native_target_triple")):
        return None
    return str(getattr(config, "llvm_install_dir", "")) or None


def _output(cmd: list[str]) -> Path | None:
    """The file ``cmd`` would write, where it is the translation answered here."""
    tool, options = TRANSLATE
    if (len(cmd) != len(options) + 3 or Path(cmd[0]).name != tool
            or tuple(cmd[1:-2]) != options or cmd[-2] != "-o"):
        return None
    return Path(cmd[-1])


def _shared_context() -> Any:
    global _context
    if _context is None:
        from mlir import ir

        context = ir.Context()
        context.enable_multithreading(False)  # safe to fork: no thread pool behind it
        _context = context
    return _context


def translated(text: str, written: Path) -> bool:
    """Translate the MLIR ``text`` into LLVM IR at ``written``; False (nothing written)
    where this process cannot: the bindings lack the function, or MLIR refuses."""
    try:
        from mlir import ir
        from mlir.dialects.llvm import translate_module_to_llvmir
    except ImportError:
        return False
    try:
        with _shared_context():
            module = ir.Module.parse(text)
            llvm_ir = translate_module_to_llvmir(module.operation)
            del module  # its operations freed now, not with the context
    except Exception:  # MLIR's refusal: the tool says it, in XTC's words
        return False
    if not llvm_ir:
        return False
    written.write_text(llvm_ir, encoding="utf-8")
    return True
