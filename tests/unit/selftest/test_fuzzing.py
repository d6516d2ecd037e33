"""The fuzz mode's selftest piece (selftest/fuzzing.py): a fault no catalog graph can show
(outputs left to XTC), found by fuzzing on the real host, then shrunk to a case file;
the real host passes the case that rejects it."""

from __future__ import annotations

from pathlib import Path

import yaml

from pytest_xtc.conformance import builtin_cases
from pytest_xtc.selftest import fuzzing


def test_the_catalog_cannot_see_the_fault_and_fuzzing_finds_and_shrinks_it(
        tmp_path: Path) -> None:
    lines: list[str] = []
    assert fuzzing.run(tmp_path, lines.append, count=3)
    blind, found, shrunk = lines
    every = len(builtin_cases())
    assert f"the catalog's {every} graphs compile to the host's own functions in {every} (" \
        in blind
    assert "fuzzing (seed 0) REJECTED it at case 1" in found
    assert "exceed the bound" in found or "out of bounds" in found
    file = Path(shrunk.rsplit(": ", 1)[1])
    data = yaml.safe_load(file.read_text())  # the shrunk case file, both outputs kept
    assert len(data["outputs"]) == 2 and len(data["nodes"]) == 2


def test_a_fault_the_catalog_sees_is_not_counted_blind() -> None:
    """catalog_blind can fail: a graph with two outputs is one the fault changes."""
    from pytest_xtc.exploration import fuzz

    two = next(c for c in fuzz.cases(50, 0) if c.op.endswith("twoout")
               and c.graph["outputs"][0]["uid"] != c.graph["nodes"][0]["uid"])
    assert fuzzing.catalog_blind([two]) == [two.id]
