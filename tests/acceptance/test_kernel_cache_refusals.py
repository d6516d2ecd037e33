"""The kernel cache keeps a compiler's refusal as it keeps a kernel, and nothing else that
fails: a compile raising ``CompileRejected`` (XTC's own diagnostic: the real host's
float64 relu, refused by XTC 0.3.2) fails the same way on the next run without compiling
again; any other failure of a compile (an exception of another type, an OSError, a
MemoryError) compiles again on every run; a refusal edited in the cache is never used."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_xtc import CompileRejected
from pytest_xtc.conformance import builtin_cases
from pytest_xtc.core.adapter import TargetSpec
from pytest_xtc.core.execution import kernels
from pytest_xtc.core.execution.runner import Settings, run_case
from pytest_xtc.core.outcome import Outcome, Status
from pytest_xtc.targets.host import HostTarget

BY_ID = {c.id: c for c in builtin_cases()}
REFUSED_BY_XTC = "relu-float64-1x1-tile"  # XTC <= 0.3.2: an f32 zero in a float64 relu
PASSING = "relu-float32-1x1-tile"


class Failing(HostTarget):
    """The host, whose compile fails with ``error`` (in process: its calls are counted)."""

    error: BaseException = CompileRejected("error: the compiler's own diagnostic")

    def __init__(self, spec: TargetSpec) -> None:
        super().__init__(spec)
        self.compiles = 0

    def compile(self, case: Any, workdir: Path) -> Any:
        self.compiles += 1
        raise self.error


def run(adapter: HostTarget, case_id: str, workdir: Path, store: Any,
        isolate: bool = False) -> Outcome:
    settings = Settings(0, perf=False, kernels=store, isolate=isolate)
    return run_case(adapter, BY_ID[case_id], workdir, settings)


def test_a_refusal_is_kept_and_the_next_run_fails_alike_without_compiling(
        kept, tmp_path) -> None:
    adapter = Failing(TargetSpec("refusing", "host"))
    first = run(adapter, PASSING, tmp_path / "first", kept)
    again = run(adapter, PASSING, tmp_path / "again", kept)
    assert (first.status, first.phase, first.kernel_cached) == (Status.FAILED, "compile", False)
    assert (again.status, again.phase, again.kernel_cached) == (Status.FAILED, "compile", True)
    assert adapter.compiles == 1
    assert again.message.startswith(first.message) and "not compiled again" in again.message
    assert str(again.kind) == str(first.kind) == "CompileRejected"


@pytest.mark.parametrize("error", [RuntimeError("error: a crash"), OSError(28, "disk full"),
                                   MemoryError()], ids=["other exception", "OSError",
                                                        "MemoryError"])
def test_no_other_failure_of_a_compile_is_ever_kept(kept, tmp_path, error) -> None:
    adapter = Failing(TargetSpec("failing", "host"))
    adapter.error = error
    outcomes = [run(adapter, PASSING, tmp_path / str(n), kept) for n in range(2)]
    assert adapter.compiles == 2
    assert [o.kernel_cached for o in outcomes] == [False, False]
    assert outcomes[0].status == outcomes[1].status != Status.PASSED
    assert not list(kept.folder.glob(f"*/*/files/{kernels.REFUSAL}"))


def test_a_refusal_edited_in_the_cache_is_never_used(kept, tmp_path) -> None:
    adapter = Failing(TargetSpec("refusing", "host"))
    run(adapter, PASSING, tmp_path / "first", kept)
    (refusal,) = kept.folder.glob(f"*/*/files/{kernels.REFUSAL}")
    refusal.write_text(refusal.read_text().replace("diagnostic", "diagnostiK"))
    again = run(adapter, PASSING, tmp_path / "again", kept)
    assert (again.status, again.kernel_cached, adapter.compiles) == (Status.FAILED, False, 2)
    assert "rebuilt, never loaded" in again.message and "diagnostiK" not in again.message


def test_xtcs_own_refusal_is_kept_and_a_kernel_of_the_same_family_still_passes(
        kept, tmp_path) -> None:
    adapter = HostTarget(TargetSpec("host", "host"))  # real XTC, forked workers
    first = run(adapter, REFUSED_BY_XTC, tmp_path / "first", kept, isolate=True)
    again = run(adapter, REFUSED_BY_XTC, tmp_path / "again", kept, isolate=True)
    assert (first.status, first.phase, first.kernel_cached) == (Status.FAILED, "compile", False)
    assert "linalg.yield" in first.message and str(first.kind) == "CompileError"
    assert (again.status, again.phase, again.kernel_cached) == (Status.FAILED, "compile", True)
    assert again.message.startswith(first.message) and str(again.kind) == "CompileError"
    passing = [run(adapter, PASSING, tmp_path / f"passing{n}", kept, isolate=True)
               for n in range(2)]
    assert [(o.status, o.kernel_cached) for o in passing] == [(Status.PASSED, False),
                                                               (Status.PASSED, True)]
