"""Every view of a run says the same of each case (report/rules/statuses.py): the
terminal's table, results.jsonl, report.json, summary.md, report.html, JUnit and the CI
job summary, on one real run with passes, failures, an expected failure, a waived
failure, skips, unsupported cases and infrastructure errors."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pytest_xtc.report import bundle, step_summary
from pytest_xtc.report.rules.statuses import FAILING, case_status

#: A vendor target: an infrastructure error (a missing linker) on tiled cases, a compile
#: failure on unrolled and parallelized ones (the unrolled one listed in its
#: expected-failure file), no pad (not supported); XTC's float64 relu bug is the suite's
#: waiver f64-relu-f32-zero.
MIXED = """
from pytest_xtc.core.adapter import Capabilities
from pytest_xtc.targets.host import HostTarget

class Mixed(HostTarget):
    def capabilities(self):
        caps = super().capabilities()
        return Capabilities(ops=caps.ops - {"pad"}, dtypes=caps.dtypes,
                            placements=caps.placements, schedules=caps.schedules)

    def compile(self, case, workdir):
        if case.id.endswith("-tile"):
            raise FileNotFoundError(2, "No such file or directory", "/opt/tc/bin/ld")
        if case.id.endswith(("-unroll", "-parallelize")):
            raise RuntimeError("miscompiled " + case.id)
        return super().compile(case, workdir)
"""
EXPECTED = """
- pattern: "matmul-float32-13x11x7-unroll"
  phase: compile
  reason: a known bug of mixed
  url: https://example.com/mixed/1
"""
CASES = ("matmul-float32-13x11x7-none", "matmul-float32-13x11x7-tile",
         "matmul-float32-13x11x7-unroll", "matmul-float32-13x11x7-parallelize",
         "relu-float64-5x7-none", "pad-float32-5x7-pad0:1-2_1:0-3-none")
WORDS = {  # the canonical word -> the terminal table's column header
    "passed": "passed", "failed": "failed", "error": "infra error", "invalid": "invalid case",
    "xfailed": "xfailed", "waived": "waived", "not-supported": "unsupported",
    "skipped": "skipped",
}


def terminal_counts(out: str) -> dict[str, Counter[str]]:
    """The XTC conformance table: target -> column header -> count."""
    lines = out[out.index("XTC conformance"):].splitlines()[1:]
    header = re.split(r"\s{2,}", lines[0].strip())
    found: dict[str, Counter[str]] = {}
    for line in lines[2:]:
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) != len(header) or not cells[1].isdigit():
            break
        found[cells[0]] = Counter({h: int(c) for h, c in zip(header[1:], cells[1:], strict=True)
                                   if int(c)})
    return found


def junit_words(path: Path) -> dict[str, str]:
    """Each JUnit testcase's word, from its element and properties."""
    found = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        key = f"{props['xtc_target']}-{props['xtc_case']}"
        skipped, failure = case.find("skipped"), case.find("failure")
        if failure is not None:
            found[key] = props["xtc_status"]
        elif skipped is not None and skipped.get("type") == "pytest.xfail":
            found[key] = "waived" if props.get("xtc_waived") else "xfailed"
        elif skipped is not None:
            found[key] = props.get("xtc_status", "skipped")
        else:
            found[key] = "passed"
    return found


@pytest.fixture
def mixed_run(vendor: Any, run: Any, pytester: pytest.Pytester,
              monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Path]:
    root = vendor("mixed_xtc", {"mixed": "mixed:Mixed", "gone": "gone:Gone"},
                  {"mixed": MIXED, "gone": "raise ImportError('libgone.so not found')\n"})
    (root / "mixed.expectations.yaml").write_text(EXPECTED)
    monkeypatch.setenv("COLUMNS", "200")  # the table on one line a row
    monkeypatch.setenv(step_summary.VARIABLE, str(pytester.path / "job.md"))
    result = run("--xtc-target=mixed,gone", "--xtc-report=rep", "--junitxml=j.xml",
                 *(f"--xtc-case={c}" for c in CASES))
    return result, pytester.path


def test_every_view_says_the_same_of_each_case(mixed_run: tuple[Any, Path]) -> None:
    result, root = mixed_run
    report, records, problems = bundle.read(root / "rep")
    assert problems == []
    words = {}
    for name, entry in report.targets.items():
        for record in entry.results or ():
            words[f"{name}-{record.case}"] = case_status(record, entry.waived or {})
    mixed = {k.removeprefix("mixed-"): w for k, w in words.items() if k.startswith("mixed-")}
    assert mixed == {  # the run has each status the issue names
        CASES[0]: "passed", CASES[1]: "error", CASES[2]: "xfailed", CASES[3]: "failed",
        CASES[4]: "waived", CASES[5]: "not-supported"}, mixed
    assert {w for k, w in words.items() if k.startswith("gone-")} == {"skipped"}
    # results.jsonl: the same records as report.json's
    lines = (root / "rep" / bundle.RESULTS).read_text().splitlines()
    assert sorted(json.loads(line)["case"] for line in lines) == sorted(r.case for r in records)
    # the terminal's table
    shown = terminal_counts(result.stdout.str())
    for name in report.targets:
        expected = Counter(WORDS[w] for k, w in words.items() if k.startswith(f"{name}-")
                           and k.removeprefix(f"{name}-") in CASES)
        assert shown[name] == expected, (name, shown, expected)
    # report.json's counts: a case counted once (waived, not also xfailed)
    counts = report.targets["mixed"].counts or {}
    assert (counts["waived"], counts["xfailed"], counts["error"]) == (1, 1, 1)
    assert counts["failed"] - counts["xfailed"] == 1  # "failed (1 xfailed)" in summary.md
    # summary.md's row for mixed: passed, compiled, failed, invalid, skipped, unsupported,
    # waived, missing
    text = (root / "rep" / "summary.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| mixed |"))
    assert "| 1 | 0 | 2 (1 xfailed) | 0 | 0 | 1 | 1 |" in row, row
    # JUnit
    assert junit_words(root / "j.xml") == words
    # the page: per target the same counts as report.json
    page = (root / "rep" / "report.html").read_text()
    assert ">1 waived<" in page and ">1 xfailed<" in page
    # the job summary: every failure of the run, nothing waived or expected
    job = (root / "job.md").read_text()
    failing = sorted(k for k, w in words.items() if w in FAILING)
    listed = sorted(re.findall(r"^- (\S+): \*\*", job, re.MULTILINE))
    assert listed == failing and "## Unused waivers" not in job
