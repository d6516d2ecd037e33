"""Verifying a bundle: checksums, reading limits, the installed suite's case sets,
completeness, and every derived figure recomputed from the results. No pytest.

What verify cannot see statically is a result rebuilt consistently (a failure turned into
a pass and every figure recomputed): ``xtc-conformance verify --rerun N`` re-runs cases on
this machine for that (:mod:`pytest_xtc.report.rerun`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_xtc.report import suitecheck
from pytest_xtc.report.bundle import REPORT, RESULTS, BundleError, load, read_text
from pytest_xtc.report.caseset import ids_hash
from pytest_xtc.report.formats import FORMATS
from pytest_xtc.report.records import record_key
from pytest_xtc.report.verdicts import assemble, run_not_certifying


def _complete(report: Mapping[str, Any], target: str) -> bool:
    """True when every required case of ``target`` should have a result."""
    entry = report["targets"][target]
    runs = [report["runs"][i] for i in entry["runs"]]
    return not any(r.get("filters") or r.get("interrupted") for r in runs)


def check(report: dict[str, Any], records: list[dict[str, Any]]) -> list[str]:
    """Internal consistency: results vs report, recomputed counts and verdicts,
    completeness against the recorded case set."""
    problems = []
    try:
        fresh = assemble(copy.deepcopy(report), records)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        return [f"{REPORT}: malformed ({type(exc).__name__}: {exc})"]
    for target in sorted({str(r["target"]) for r in records} - set(report["targets"])):
        problems.append(f"{RESULTS}: results for target {target} which the report lacks")
    if fresh["case_set"] != report.get("case_set"):
        problems.append(f"{REPORT}: case set hash does not match the cases it lists")
    if fresh["totals"] != report.get("totals"):
        problems.append(f"{REPORT}: totals differ from the results")
    for field in ("certifies", "not_certifying", "waivers_used"):
        if fresh[field] != report.get(field):
            problems.append(f"{REPORT}: {field} differs from what its runs and results give")
    version = str(report["suite"]["version"])
    for i, run in enumerate(report["runs"], 1):
        claimed = (run.get("settings") or {}).get("certifying")
        if claimed is not None and claimed != (not run_not_certifying(run, version)):
            problems.append(f"{REPORT}: run {i} claims certifying={claimed}, its settings "
                            "say otherwise")
    for target, entry in report["targets"].items():
        new = fresh["targets"][target]
        if entry["case_set"]["sha256"] != ids_hash(c["id"] for c in entry["case_set"]["cases"]):
            problems.append(f"{target}: case set hash does not match its cases")
        if sorted(map(record_key, entry["results"])) != sorted(map(record_key, new["results"])):
            problems.append(f"{target}: results in {REPORT} differ from {RESULTS}")
        for field in ("counts", "verdicts", "waived", "scope"):
            if entry.get(field) != new[field]:
                problems.append(
                    f"{target}: {field} in {REPORT} differ from those recomputed from {RESULTS}"
                )
        counts = new["counts"]
        if counts["extra"]:
            problems.append(
                f"{target}: {counts['extra']} results for cases outside its case set (or its shard)"
            )
        if counts["duplicate"]:
            problems.append(f"{target}: {counts['duplicate']} duplicated case results")
        if counts["missing"] and _complete(report, target):
            problems.append(
                f"{target}: {counts['missing']} required cases have no result "
                "although the run was neither filtered nor interrupted"
            )
    return problems


def verify(path: Path) -> list[str]:
    """Every problem of the bundle at ``path``, one line each; empty when it is sound."""
    try:
        report, records, problems = load(path)
    except BundleError as exc:
        return [exc.problem]
    foreign = suitecheck.version_problem(report)
    if foreign is not None:
        return [foreign]
    problems += check(report, records)
    if not problems:
        problems += suitecheck.check(report, records)
    for form in FORMATS:
        if form.checked and not problems and read_text(path, form.name) != form.render(
            report, records
        ):
            problems.append(f"{form.name} does not match {REPORT}")
    return problems


def load_verified(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    problems = verify(path)
    if problems:
        raise BundleError(
            f"{path}: does not verify: {problems[0]} (see xtc-conformance verify {path})"
        )
    report, records, _ = load(path)
    return report, records
