"""The README's deliberately faulty run (``pytest --xtc-target=selftest-<variant> ...``):
its command line and what its output must say, for the tests that run it."""

from __future__ import annotations

import re

from tests import ROOT


def faulty_target_line() -> str:
    """The README's ``$ pytest --xtc-target=selftest-...`` line, without its prompt."""
    text = (ROOT / "README.md").read_text()
    line = re.search(r"^\$ (pytest --xtc-target=selftest-\S+ .+)$", text, re.M)
    assert line, "README.md shows no selftest variant run as a target"
    return line[1]


def assert_failure_explained(returncode: int, stdout: str) -> None:
    """Red (exit 1), the wrong elements counted against the bound, a rerun line."""
    assert returncode == 1, stdout[-2000:]
    assert re.search(r"^\[check\] wrong results \(seed \d+\): output C: ", stdout, re.M), (
        stdout[-2000:])
    assert re.search(r"^rerun alone: pytest 'pytest_xtc/conformance/", stdout, re.M), (
        stdout[-2000:])
