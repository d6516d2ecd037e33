"""A bundle checked against the installed suite: its version, each target's case set, and
its results against the capabilities the target declared. No pytest.

A bundle cannot choose its own case set: for each target it must list exactly the cases
this installed suite generates for it (the built-in catalog, each case in every placement
variant when the target declares device placement), with the profile and traits the suite
gives them. A run that added case files (``--xtc-cases``) lists more: those extra cases
cannot be checked here, and such a run is filtered, never conformant. A bundle written by
another suite version is refused whole: verify it with that version.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from pytest_xtc import SUITE_VERSION, __version__
from pytest_xtc.core.adapter import Capabilities
from pytest_xtc.core.cases.case import DEVICE, Case, placements
from pytest_xtc.report.parts.model import Report, Run, Target
from pytest_xtc.report.parts.records import CaseRecord
from pytest_xtc.report.rules.caseset import case_entry

SUITE_NAME = "pytest-xtc"


def version_problem(report: Report) -> str | None:
    """Why this installed suite cannot verify ``report``, or None."""
    name, version = report.suite.name, report.suite.version
    if name != SUITE_NAME:
        return f"bundle written by suite {name!r}, not {SUITE_NAME}"
    if version != SUITE_VERSION:
        return (
            f"bundle written by suite {version}; this is pytest-xtc {__version__} "
            f"(suite {SUITE_VERSION}): install pytest-xtc=={version} to verify it"
        )
    return None


def suite_cases(declared_placements: Iterable[str]) -> list[Case]:
    """The cases this suite generates for a target declaring these placements (the same
    expansion as :func:`pytest_xtc.core.execution.suite.cases_for`)."""
    from pytest_xtc.conformance import builtin_cases

    if DEVICE not in set(declared_placements):
        return list(builtin_cases())
    return [case.place(p) for case in builtin_cases() for p in placements(case.graph)]


def capabilities_of(entry: Target) -> Capabilities | None:
    """The capabilities a target declared, as recorded in its bundle entry."""
    caps = entry.capabilities
    if not isinstance(caps, Mapping):
        return None
    schedules = caps.get("schedules")
    return Capabilities(
        ops=frozenset(caps.get("ops") or ()),
        dtypes=frozenset(caps.get("dtypes") or ()),
        placements=frozenset(caps.get("placements") or ()),
        schedules=None if schedules is None else frozenset(schedules),
    )


def _examples(ids: Sequence[str], n: int = 3) -> str:
    shown = ", ".join(ids[:n])
    return shown + (f", ... ({len(ids) - n} more)" if len(ids) > n else "")


def check_target(
    name: str, entry: Target, runs: Sequence[Run], records: Sequence[CaseRecord]
) -> list[str]:
    """The problems of one target's entry against the installed suite."""
    problems = []
    caps = capabilities_of(entry)
    declared = sorted(caps.placements) if caps is not None else list(entry.placements)
    if caps is not None and sorted(entry.placements) != declared:
        problems.append(f"{name}: placements {list(entry.placements)} differ from the "
                        f"declared capabilities' {declared}")
    cases = {c.id: c for c in suite_cases(declared)}
    expected = {i: case_entry(c) for i, c in cases.items()}
    listed = {str(c.get("id")): c for c in entry.case_set.cases}
    user_cases = any(r.settings.cases for r in runs)
    dropped = [i for i in expected if i not in listed]
    if dropped:
        problems.append(
            f"{name}: case set lacks {len(dropped)} of the {len(expected)} cases this suite "
            f"has for it: {_examples(dropped)}"
        )
    unknown = [i for i in listed if i not in expected]
    if unknown and not user_cases:
        problems.append(
            f"{name}: case set has {len(unknown)} cases this suite does not have: "
            f"{_examples(unknown)}"
        )
    changed = [i for i in expected if i in listed and dict(listed[i]) != expected[i]]
    if changed:
        problems.append(
            f"{name}: {len(changed)} case set entries (profile, traits) differ from this "
            f"suite's: {_examples(changed)}"
        )
    if caps is None:
        return problems
    wrong = []
    for record in records:
        case = cases.get(record.case)
        if case is None:
            continue
        missing = caps.missing(case)
        status = record.status
        if status == "not-supported" and missing is None:
            wrong.append(f"{case.id} is not-supported but within the declared capabilities")
        elif status in ("passed", "failed") and missing is not None:
            wrong.append(f"{case.id} is {status} but the declared capabilities exclude it "
                         f"({missing})")
    if wrong:
        problems.append(
            f"{name}: {len(wrong)} results contradict the declared capabilities: "
            f"{_examples(wrong, 2)}"
        )
    return problems


def check(report: Report, records: Sequence[CaseRecord]) -> list[str]:
    """Every problem of ``report`` against the installed suite (its version first: a
    bundle of another version gets that one problem only)."""
    problem = version_problem(report)
    if problem is not None:
        return [problem]
    problems = []
    for name, entry in report.targets.items():
        mine = [r for r in records if r.target == name]
        problems += check_target(name, entry, report.runs_of(name), mine)
    return problems
