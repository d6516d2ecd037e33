"""The fuzz mode's selftest piece (selftest/fuzzing.py): a fault no catalog graph can show
(outputs left to XTC), found by fuzzing on the real host, then shrunk to a case file;
the real host passes the case that rejects it."""

from __future__ import annotations

from pathlib import Path

import yaml

from pytest_xtc.conformance import builtin_cases
from pytest_xtc.selftest import fuzzing


def test_the_catalog_cannot_see_the_fault_and_fuzzing_finds_it(tmp_path: Path) -> None:
    assert fuzzing.catalog_blind(builtin_cases()) == []
    found = fuzzing.find(0, 10, tmp_path)
    assert found.case and found.host_passed
    assert "exceed the bound" in found.cause or "out of bounds" in found.cause
    result = fuzzing.shrunk(found, tmp_path, attempts=15)
    assert result.reproduced and result.file is not None and result.file.is_file()
    data = yaml.safe_load(result.file.read_text())
    assert "fuzz" in result.file.name and data


def test_a_fault_the_catalog_sees_is_not_counted_blind() -> None:
    """catalog_blind can fail: a graph with two outputs is one the fault changes."""
    from pytest_xtc.exploration import fuzz

    two = next(c for c in fuzz.cases(50, 0) if c.op.endswith("twoout")
               and c.graph["outputs"][0]["uid"] != c.graph["nodes"][0]["uid"])
    assert fuzzing.catalog_blind([two]) == [two.id]
