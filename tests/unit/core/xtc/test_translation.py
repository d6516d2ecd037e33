"""XTC's translation to LLVM IR answered in the compiling process (translation.py): the
same bytes as XTC's own ``mlir-translate`` on the same text, no tool started for it, and
everything else (another command, another option, a text MLIR refuses, a C target) left
to XTC as it was."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from pytest_xtc.conformance import builtin_cases
from pytest_xtc.core.xtc import translation, xtc_env

#: A parallel loop (OpenMP ops translated), vectors, a convolution, padding, float64.
CASES = ("matmul-float64-16x16x1-parallelize", "matmul-float64-1x17x8-vectorize",
         "conv2d-float32-1x8x8x3-3x3x4-s1-p0-tile", "relu-float32-9x65537-vectorize")


def _tool() -> str:
    return str(Path(xtc_env.mlir_prefix(), "bin", "mlir-translate"))


class Recorder:
    """A target's ``execute_command`` that records each command and does nothing."""

    def __init__(self) -> None:
        self.commands: list[list[str]] = []

    def __call__(self, cmd: list[str], input_pipe: str | None = None,
                 pipe_stdoutput: bool = True) -> subprocess.CompletedProcess[str]:
        self.commands.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "")


def _xtc_target(**config: Any) -> Any:
    """XTC's own LLVM target, as XTC makes it (not answered in process)."""
    xtc_env.bootstrap()
    from xtc.backends.mlir.MlirConfig import MlirConfig
    from xtc.backends.mlir.MlirTarget.MlirLLVMTarget import MlirLLVMTarget

    return MlirLLVMTarget(MlirConfig(**config))


def _llvm_target(recorder: Recorder | None = None) -> Any:
    target = _xtc_target()
    if recorder is not None:
        target.execute_command = recorder
    return translation.in_process(target)


def started(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """From now on, the names of the programs ``subprocess.run`` starts (each still run)."""
    names: list[str] = []
    real_run = subprocess.run

    def run(cmd: Any, *args: Any, **kwargs: Any) -> Any:
        names.append(Path(cmd[0]).name)
        return real_run(cmd, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", run)
    return names


@pytest.mark.parametrize("case_id", CASES)
def test_the_llvm_ir_is_the_tools_byte_for_byte(case_id: str, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A real compile through ``compile_case``: the translation answered here, never by a
    started ``mlir-translate``, and its file what the tool writes from the same text."""
    seen: list[tuple[str, str]] = []
    answered = translation.translated

    def recorded(text: str, written: Path) -> bool:
        done = answered(text, written)
        seen.append((text, written.read_text() if done else ""))
        return done

    monkeypatch.setattr(translation, "translated", recorded)
    names = started(monkeypatch)
    case = next(c for c in builtin_cases() if c.id == case_id)
    module = xtc_env.compile_case(case, tmp_path, "llvmir")
    monkeypatch.undo()
    assert Path(module.file_name).is_file()
    assert "llc" in names and "mlir-translate" not in names
    [(text, mine)] = seen
    tool = subprocess.run([_tool(), "--mlir-to-llvmir"], input=text, capture_output=True,
                          text=True, check=True)
    assert mine and mine == tool.stdout


def test_other_commands_and_options_run_as_xtc_runs_them(tmp_path: Path) -> None:
    recorder = Recorder()
    target = _llvm_target(recorder)
    text = '"llvm.func"() <{function_type = !llvm.func<void ()>, sym_name = "f"}> ({}) : () -> ()'
    others = ([_tool(), "--mlir-to-llvmir", "--mlir-print-debuginfo", "-o", "x.ll"],
              [_tool(), "--mlir-to-cpp", "-o", str(tmp_path / "x.cpp")],
              ["opt", "-O2", "in.ll", "-o", "out.bc"])
    for cmd in others:
        target.execute_command(cmd, input_pipe=text)
    target.execute_command([_tool(), "--mlir-to-llvmir", "-o", str(tmp_path / "y.ll")])
    assert recorder.commands == [*others, [_tool(), "--mlir-to-llvmir", "-o",
                                           str(tmp_path / "y.ll")]]
    assert not (tmp_path / "x.cpp").exists() and not (tmp_path / "y.ll").exists()


def test_a_text_mlir_refuses_goes_to_the_tool_nothing_written(tmp_path: Path) -> None:
    recorder = Recorder()
    target = _llvm_target(recorder)
    cmd = [_tool(), "--mlir-to-llvmir", "-o", str(tmp_path / "k.ll")]
    target.execute_command(cmd, input_pipe="func.func @broken( {")
    assert recorder.commands == [cmd] and not (tmp_path / "k.ll").exists()


def test_an_empty_module_is_translated_here(tmp_path: Path) -> None:
    recorder = Recorder()
    target = _llvm_target(recorder)
    cmd = [_tool(), "--mlir-to-llvmir", "-o", str(tmp_path / "k.ll")]
    done = target.execute_command(cmd, input_pipe="module {}")
    assert done.returncode == 0 and recorder.commands == []
    tool = subprocess.run(cmd[:2], input="module {}", capture_output=True, text=True, check=True)
    assert (tmp_path / "k.ll").read_text() == tool.stdout


def test_a_c_target_is_left_as_it_is() -> None:
    xtc_env.bootstrap()
    from xtc.backends.mlir.MlirConfig import MlirConfig
    from xtc.backends.mlir.MlirTarget.MlirCTarget import MlirCTarget

    target = MlirCTarget(MlirConfig())
    assert "execute_command" not in vars(translation.in_process(target))


def _threads() -> int:
    return len(list(Path("/proc/self/task").iterdir()))


def test_prepared_a_compile_starts_no_llvm_config_and_no_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After ``prepare`` (the template process's), a compile asks the host's triple of
    nobody: XTC's own answer, asked once, which a fresh XTC target still gives; and
    preparing started no thread (workers are forked from that process)."""
    xtc_env.bootstrap()
    before = _threads()
    translation.prepare()
    assert _threads() == before
    names = started(monkeypatch)
    case = next(c for c in builtin_cases() if c.id == CASES[0])
    xtc_env.compile_case(case, tmp_path, "llvmir")
    monkeypatch.undo()
    assert "llc" in names and "llvm-config" not in names and "mlir-translate" not in names
    fresh = _xtc_target()._native_target_triple  # XTC asks llvm-config
    assert fresh and translation.in_process(_xtc_target())._native_target_triple == fresh


def test_a_cross_target_asks_no_host_triple() -> None:
    translation.prepare()
    target = translation.in_process(_xtc_target(arch="aarch64"))
    assert not hasattr(target, "_native_target_triple_cache")
