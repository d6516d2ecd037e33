"""The kernel cache cannot change a verdict (real XTC, the host target, forked workers):
a case run again takes its kept kernel and gets the same outputs; the second of a pair
differing in one thing the compile reads (an attribute, a dtype, a shape, a schedule
parameter, an environment variable) compiles afresh and passes; a kernel file edited in
the cache is rebuilt, said in the case's notes; a faulty target's kernel cache keyed
without attributes, dtype or shapes is still rejected with the suite's cache on; a pytest
run records per case whether its kernel came from the cache, and a certification says it
used none."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pytest_xtc.conformance import builtin_cases
from pytest_xtc.core.adapter import TargetSpec
from pytest_xtc.core.execution.runner import Settings, run_case
from pytest_xtc.core.outcome import Outcome, Status
from pytest_xtc.selftest import faults
from pytest_xtc.targets.host import HostTarget

BY_ID = {c.id: c for c in builtin_cases()}
CASE = "conv2d-float32-1x9x9x3-3x3x8-s2-p1-tile"


def run(case, tmp_path: Path, store, name: str, adapter=None) -> Outcome:
    adapter = adapter or HostTarget(TargetSpec("host", "host"))
    return run_case(adapter, case, tmp_path / name, Settings(0, perf=False, kernels=store))


def test_a_case_run_again_takes_its_kept_kernel_with_the_same_outputs(kept, tmp_path) -> None:
    adapter = HostTarget(TargetSpec("host", "host"))
    first = run(BY_ID[CASE], tmp_path, kept, "first", adapter)
    again = run(BY_ID[CASE], tmp_path, kept, "again", adapter)
    assert (first.status, first.kernel_cached) == (Status.PASSED, False)
    assert (again.status, again.kernel_cached) == (Status.PASSED, True)
    assert again.output_digest == first.output_digest
    assert again.compile_s < first.compile_s


def _changed_attribute(case):
    graph = copy.deepcopy(case.graph)
    conv = next(n for n in graph["nodes"] if n["expr"]["op"]["name"] == "conv2d")
    conv["expr"]["op"]["attrs"]["stride"] = [1, 1]
    return dataclasses.replace(case, graph=graph)


def _changed_dtype(case):
    graph = copy.deepcopy(case.graph)
    for operand in graph["inputs"]:
        operand["expr"]["type"]["dtype"] = "float64"
    return dataclasses.replace(case, graph=graph, dtype="float64")


def _changed_tile(case):
    steps = tuple((p, tuple({k: v + 1 for k, v in a.items()} if isinstance(a, dict) else a
                            for a in args)) for p, args in case.schedule.steps)
    return dataclasses.replace(case, schedule=dataclasses.replace(case.schedule, steps=steps))


@pytest.mark.parametrize("differs", ["attribute", "dtype", "shape", "schedule parameter"])
def test_the_second_of_a_pair_differing_in_one_thing_compiles_afresh(
        kept, tmp_path, differs: str) -> None:
    pairs = {  # (first, second): two cases of the catalog where they exist
        "shape": ("matmul-float32-13x11x7-tile", "matmul-float32-64x64x64-tile"),
    }
    if differs in pairs:
        first, second = (BY_ID[i] for i in pairs[differs])
    else:
        first = BY_ID["matmul-float32-13x11x7-tile" if differs == "dtype" else CASE]
        second = {"attribute": _changed_attribute, "dtype": _changed_dtype,
                  "schedule parameter": _changed_tile}[differs](first)
    adapter = HostTarget(TargetSpec("host", "host"))
    assert run(first, tmp_path, kept, "first", adapter).kernel_cached is False
    outcome = run(second, tmp_path, kept, "second", adapter)
    assert (outcome.status, outcome.kernel_cached) == (Status.PASSED, False), outcome.message


def test_an_environment_variable_xtc_reads_compiles_afresh(kept, tmp_path, monkeypatch) -> None:
    assert run(BY_ID[CASE], tmp_path, kept, "first").kernel_cached is False
    monkeypatch.setenv("XTC_MLIR_TARGET", "llvmir")  # read by XTC's get_compiler
    outcome = run(BY_ID[CASE], tmp_path, kept, "second")  # a new adapter: asked again
    assert (outcome.status, outcome.kernel_cached) == (Status.PASSED, False)


def test_a_kernel_file_edited_in_the_cache_is_rebuilt(kept, tmp_path) -> None:
    adapter = HostTarget(TargetSpec("host", "host"))
    run(BY_ID[CASE], tmp_path, kept, "first", adapter)
    (library,) = kept.folder.glob("*/*/files/kernel.so")
    data = bytearray(library.read_bytes())
    data[len(data) // 2] ^= 0xFF
    library.write_bytes(bytes(data))
    outcome = run(BY_ID[CASE], tmp_path, kept, "second", adapter)
    assert (outcome.status, outcome.kernel_cached) == (Status.PASSED, False)
    assert "rebuilt, never loaded: kernel.so: its contents changed" in outcome.message
    assert run(BY_ID[CASE], tmp_path, kept, "third", adapter).kernel_cached is True


def _computes_otherwise(case, twin) -> bool:
    """Whether ``twin``'s graph, given ``case``'s inputs, gives outputs ``case``'s check
    rejects (beyond the reference's bounds)."""
    from pytest_xtc.core.judging.checks.base import evaluate

    inputs = case.make_inputs(case.seed(0))
    mine, theirs = evaluate(case, inputs), evaluate(twin, inputs)
    for want, got, bound in zip(mine.values, theirs.values, mine.bounds, strict=True):
        if want.shape != got.shape:
            return True
        with np.errstate(invalid="ignore"):
            same = (want == got) | (np.abs(want - got) <= bound) | (np.isnan(want) & np.isnan(got))
        if not same.all():
            return True
    return False


@pytest.mark.parametrize("variant", ["cache-without-attributes", "cache-without-dtype",
                                     "cache-without-shapes"])
def test_a_target_caching_kernels_by_too_little_is_rejected_with_the_cache_on(
        kept, tmp_path, variant: str) -> None:
    """Twice: cold (its kernels kept by the suite's cache), then warm (taken from it). The
    case's twin computes other numbers than the case (two spellings of one attribute,
    ``stride=1`` and ``stride=[1, 1]``, share a kernel rightly: that case must pass)."""
    from pytest_xtc.core.cases import twins

    kind = variant.removeprefix("cache-without-")
    case = next(c for c in builtin_cases() if c.twin is not None
                and twins.structure(c, kind) == twins.structure(c.twin, kind)
                and (kind != "attributes" or _computes_otherwise(c, c.twin)))
    for rerun in ("cold", "warm"):
        outcome = run(case, tmp_path, kept, rerun, faults.make(variant))
        assert outcome.status is Status.FAILED, (rerun, outcome.message)


def test_a_twin_spelling_its_attributes_otherwise_shares_its_kernel_and_passes(
        kept, tmp_path) -> None:
    """The other direction: ``stride=1`` and ``stride=[1, 1]`` are one kernel, so a cache
    keyed without attributes serves a right one and the case passes (not a false fault)."""
    from pytest_xtc.core.cases import twins

    case = next(c for c in builtin_cases() if c.twin is not None
                and twins.structure(c) == twins.structure(c.twin)
                and not _computes_otherwise(c, c.twin))
    outcome = run(case, tmp_path, kept, "cold", faults.make("cache-without-attributes"))
    assert outcome.status is Status.PASSED, outcome.message


def _records(report: Path) -> list[dict]:
    return [json.loads(line) for line in (report / "results.jsonl").read_text().splitlines()]


def _settings(report: Path) -> dict:
    return json.loads((report / "report.json").read_text())["runs"][0]["settings"]


def test_a_pytest_run_says_per_case_whether_its_kernel_came_from_the_cache(
        run, pytester, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XTC_KERNEL_CACHE", str(tmp_path / "kernels"))
    chosen = ("-k", "host-matmul-float32-13x11x7-tile]")  # and its -exact twin: one kernel
    found = []
    for n in range(2):
        result = run("--xtc-target=host", *chosen, f"--xtc-report={tmp_path / str(n)}", "-q")
        assert result.ret == 0, result.stdout.str()
        found.append(sorted(r.get("kernel_cached") for r in _records(tmp_path / str(n))))
        assert _settings(tmp_path / str(n))["compile_cache"] == "on"
    assert found[1] == [True] * len(found[1]) and False in found[0]
    result.stdout.fnmatch_lines([f"host: kernels from the cache {len(found[1])}, compiled 0"])
    off = run("--xtc-target=host", *chosen, "--xtc-compile-cache=off", "-q",
              f"--xtc-report={tmp_path / 'off'}")
    assert off.ret == 0 and {r.get("kernel_cached") for r in _records(tmp_path / "off")} == {None}
    assert _settings(tmp_path / "off")["compile_cache"] == "off"
    bad = run("--xtc-target=host", *chosen, "--xtc-cache-size=big")
    assert bad.ret == 4 and "--xtc-cache-size=big: expected a size" in bad.stderr.str()


CERTIFY = """
import sys
from pathlib import Path
from pytest_xtc import cli
from pytest_xtc.conformance import SUITE_MODULE
report = Path(sys.argv[1])
cli.pytest_args = lambda args: [str(SUITE_MODULE), "--xtc-target=host", "--xtc-case=%s",
                                f"--xtc-report={report}", "-p", "no:cacheprovider", "-q"]
cli.main(["run", "--target", "host", "--report", str(report)])
"""


def test_a_certification_never_uses_the_kernel_cache_and_says_so(tmp_path: Path) -> None:
    kept = tmp_path / "kernels"
    env = {**os.environ, "XTC_KERNEL_CACHE": str(kept)}
    env.pop("PYTEST_ADDOPTS", None)
    for _ in range(2):  # the second would take the first's kernel, were it kept
        subprocess.run([sys.executable, "-c", CERTIFY % f"host-{CASE}", str(tmp_path / "rep")],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
        assert [r.get("kernel_cached") for r in _records(tmp_path / "rep")] == [None]
        assert _settings(tmp_path / "rep")["compile_cache"] == "off"
        shutil.rmtree(tmp_path / "rep")
    assert not kept.exists() or not any(p.is_file() for p in kept.rglob("*"))
