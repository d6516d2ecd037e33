"""The fuzz mode's selftest piece (selftest/fuzzing.py): a fault no catalog case can show
(conv2d results read back by odd-window arithmetic), found by fuzzing on the real host,
then shrunk to a case file; the real host passes the case that rejects it."""

from __future__ import annotations

from pathlib import Path

from pytest_xtc.conformance import builtin_cases
from pytest_xtc.core.adapter import TargetSpec
from pytest_xtc.core.cases.case import load_case_file
from pytest_xtc.core.execution.runner import Settings, run_case
from pytest_xtc.core.outcome import Status
from pytest_xtc.exploration import fuzz
from pytest_xtc.selftest import fuzzing
from pytest_xtc.targets.host import HostTarget


def test_the_catalog_cannot_see_the_fault_and_fuzzing_finds_and_shrinks_it(
        tmp_path: Path) -> None:
    lines: list[str] = []
    assert fuzzing.run(tmp_path, lines.append, seed=1, count=2)
    blind, found, shrunk = lines
    every = len(builtin_cases())
    assert f"the catalog's {every} graphs are read back whole by the fault in {every} (" \
        in blind
    assert "fuzzing (seed 1) REJECTED it at case 1" in found
    assert "never written" in found
    file = Path(shrunk.rsplit(": ", 1)[1])
    [case] = load_case_file(file)  # the shrunk case: a window side of 2 kept
    assert fuzzing.catalog_blind([case]) == [case.id]
    host = HostTarget(TargetSpec("host", "host"))
    fault = fuzzing.ConvWindowAssumedOdd(TargetSpec(fuzzing.FAULT, "host"))
    settings = Settings(0, perf=False)
    assert run_case(host, case, tmp_path / "host", settings).status is Status.PASSED
    assert run_case(fault, case, tmp_path / "fault", settings).status is Status.FAILED


def test_a_fault_the_catalog_sees_is_not_counted_blind() -> None:
    """catalog_blind can fail: a conv2d with a window side of 2 is one the fault reads
    back short, and only those are."""
    drawn = fuzz.cases(60, 0)
    short = [c.id for c in drawn if any(
        n["expr"]["op"]["name"] == "conv2d" and 2 in c.graph["inputs"][1]["expr"]["type"]
        ["shape"][:2] for n in c.graph["nodes"])]
    blind = fuzzing.catalog_blind(drawn)
    assert blind and set(blind) <= set(short)
