"""Verifying a bundle: checksums, reading limits, the installed suite's case sets,
completeness, and every derived figure recomputed from the results. No pytest.

What verify cannot see statically is a result rebuilt consistently (a failure turned into
a pass and every figure recomputed): ``xtc-conformance verify --rerun N`` re-runs cases on
this machine for that (:mod:`pytest_xtc.report.audit`).
"""

from __future__ import annotations

from pathlib import Path

from pytest_xtc.report import suitecheck
from pytest_xtc.report.bundle import REPORT, RESULTS, BundleError, read, read_text
from pytest_xtc.report.parts.model import Report
from pytest_xtc.report.parts.records import CaseRecord, record_key
from pytest_xtc.report.parts.schema import SchemaError, to_json
from pytest_xtc.report.render.formats import FORMATS
from pytest_xtc.report.rules.caseset import ids_hash
from pytest_xtc.report.rules.verdicts import assemble_report, run_not_certifying


def _complete(report: Report, target: str) -> bool:
    """True when every required case of ``target`` should have a result."""
    return not any(r.filters or r.interrupted for r in report.runs_of(target))


def _report_problems(report: Report, fresh: Report) -> list[str]:
    """The report-wide figures that differ from those recomputed."""
    problems = []
    if to_json(fresh.case_set) != to_json(report.case_set):
        problems.append(f"{REPORT}: case set hash does not match the cases it lists")
    if to_json(fresh.totals) != to_json(report.totals):
        problems.append(f"{REPORT}: totals differ from the results")
    for name in ("certifies", "not_certifying", "waivers_used"):
        if to_json(getattr(fresh, name)) != to_json(getattr(report, name)):
            problems.append(f"{REPORT}: {name} differs from what its runs and results give")
    for i, run in enumerate(report.runs, 1):
        claimed = run.settings.certifying
        if claimed is not None and claimed != (not run_not_certifying(run, report.suite.version)):
            problems.append(f"{REPORT}: run {i} claims certifying={claimed}, its settings "
                            "say otherwise")
    return problems


def _target_problems(report: Report, fresh: Report, target: str) -> list[str]:
    """One target's figures that differ from those recomputed, and what is incomplete."""
    problems = []
    entry, new = report.targets[target], fresh.targets[target]
    if entry.case_set.sha256 != ids_hash(entry.case_set.ids):
        problems.append(f"{target}: case set hash does not match its cases")
    if sorted(map(record_key, entry.results or ())) != sorted(map(record_key, new.results or ())):
        problems.append(f"{target}: results in {REPORT} differ from {RESULTS}")
    for name in ("counts", "verdicts", "waived", "scope"):
        if to_json(getattr(entry, name)) != to_json(getattr(new, name)):
            problems.append(
                f"{target}: {name} in {REPORT} differ from those recomputed from {RESULTS}"
            )
    counts = new.counts or {}
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


#: The phases a record names when the machinery, not the target, ended its case: pytest's
#: own set-up (its temporary folder gone, a full disk, a fixture that raised).
MACHINERY_PHASES = ("pytest-setup",)


def machinery_problems(records: list[CaseRecord]) -> list[str]:
    """Records claiming ``failed`` (a verdict on the target) for a case whose phase says
    the machinery failed: such a case is an infrastructure error, never the target's."""
    wrong = [r for r in records if r.status == "failed" and r.phase in MACHINERY_PHASES]
    if not wrong:
        return []
    first = wrong[0]
    more = f" and {len(wrong) - 1} more" if len(wrong) > 1 else ""
    return [f"{RESULTS}: {first.target} {first.case}{more} claimed failed in phase "
            f"{first.phase}, where the machinery failed, not the target (an infrastructure "
            "error)"]


def check(report: Report, records: list[CaseRecord]) -> list[str]:
    """Internal consistency: results vs report, recomputed counts and verdicts,
    completeness against the recorded case set."""
    try:
        fresh = assemble_report(report, records)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        why = str(exc) if isinstance(exc, SchemaError) else f"{type(exc).__name__}: {exc}"
        return [f"{REPORT}: malformed ({why})"]
    problems = [f"{RESULTS}: results for target {t} which the report lacks"
                for t in sorted({r.target for r in records} - set(report.targets))]
    problems += machinery_problems(records)
    problems += _report_problems(report, fresh)
    for target in report.targets:
        problems += _target_problems(report, fresh, target)
    return problems


def inspect(path: Path) -> tuple[list[str], Report | None, list[CaseRecord]]:
    """Every problem of the bundle at ``path``, one line each (empty when it is sound),
    with what was read: the bundle is read and its checksums checked once."""
    try:
        report, records, problems = read(path)
    except BundleError as exc:
        return [exc.problem], None, []
    foreign = suitecheck.version_problem(report)
    if foreign is not None:
        return [foreign], report, records
    problems += check(report, records)
    if not problems:
        problems += suitecheck.check(report, records)
    for form in FORMATS:
        if form.checked and not problems and read_text(path, form.name) != form.render(
            report, records
        ):
            problems.append(f"{form.name} does not match {REPORT}")
    return problems, report, records


def verify(path: Path) -> list[str]:
    """Every problem of the bundle at ``path``, one line each; empty when it is sound."""
    return inspect(path)[0]


def load_verified(path: Path) -> tuple[Report, list[CaseRecord]]:
    problems, report, records = inspect(path)
    if problems or report is None:
        why = problems[0] if problems else "unreadable"
        raise BundleError(f"{path}: does not verify: {why} (see xtc-conformance verify {path})")
    return report, records
