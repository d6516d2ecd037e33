"""Verdicts: is a target conformant to a profile, and does the bundle certify? No pytest.

A target is *conformant* to a profile when its declared capabilities meet the profile's
minimum (:data:`pytest_xtc.report.rules.profiles.MINIMUM`; else the profile is *not
applicable*), every required case of the profile has exactly one result, each is passed,
not-supported (the adapter declares the capability absent) or failed but waived by the
suite's own waiver file, and at least one passed. It is *conformant with waivers* when
waivers were needed for that. A skip (the target cannot run here) is not a pass; neither
is a case only compiled (``compiled``: a compile-only tier ran nothing) nor an expected
failure from a target's expectation file. A filtered, interrupted or
partial (one shard) run is never conformant: its ``scope`` says so.

Certification is a property of the whole bundle, apart from the verdict words: a bundle
*certifies* (top-level ``certifies: true``) only when every run behind it was a
certification run (strict, the targets' expected-failure files ignored, the suite's case
set unfiltered and unextended) of this bundle's suite version. A development run keeps its
verdict words, for information, with ``certifies: false`` and the reasons in
``not_certifying``; ``xtc-conformance verify`` and ``summary.md`` say so, and ``run``
fails on it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_xtc.core.cases.selectors import Traits
from pytest_xtc.core.outcome import Status
from pytest_xtc.report.parts.facts import CapabilitiesRecord
from pytest_xtc.report.parts.model import (
    CaseSetHash,
    ProfileVerdict,
    Report,
    Run,
    Scope,
    Target,
    Verdict,
    read_report,
)
from pytest_xtc.report.parts.reasons import Reason, ReasonCode
from pytest_xtc.report.parts.records import CaseRecord, read_record, record_key
from pytest_xtc.report.parts.schema import Part, to_json
from pytest_xtc.report.rules.caseset import case_set_hash, required
from pytest_xtc.report.rules.profiles import PROFILES, applicable
from pytest_xtc.report.rules.waivers import Waiver, waivers_from

CONFORMANT, CONFORMANT_WITH_WAIVERS, NOT_CONFORMANT, NOT_APPLICABLE = (
    Verdict.CONFORMANT.value,
    Verdict.CONFORMANT_WITH_WAIVERS.value,
    Verdict.NOT_CONFORMANT.value,
    Verdict.NOT_APPLICABLE.value,
)
#: The verdicts that hold a claim.
HOLDS = (CONFORMANT, CONFORMANT_WITH_WAIVERS)
STATUSES = tuple(
    s.value for s in (Status.PASSED, Status.FAILED, Status.SKIPPED, Status.NOT_SUPPORTED)
)
#: Compiled and inspected, never run (a compile-only tier): known, never a pass. Counted
#: only where present, so that a bundle written before it assembles to the same bytes.
COMPILED = Status.COMPILED.value
#: The keys assemble derives, of a target and of the report.
DERIVED = ("counts", "verdicts", "waived", "results", "scope")
REPORT_DERIVED = ("totals", "case_set", "profiles", "waivers_used", "certifies",
                  "not_certifying")


@dataclass
class Judgement:
    """One target's counts, verdict per profile, and the waivers that applied."""

    counts: dict[str, int]
    verdicts: dict[str, ProfileVerdict]
    waived: dict[str, str] = field(default_factory=dict)  # case id -> waiver id

    def to_dict(self) -> dict[str, Any]:
        return {"counts": self.counts, "verdicts": to_json(self.verdicts), "waived": self.waived}


def _examples(ids: Sequence[str], n: int = 3) -> str:
    shown = ", ".join(ids[:n])
    return shown + (f", ... ({len(ids) - n} more)" if len(ids) > n else "")


def _case_reasons(
    required: Sequence[str], by_case: Mapping[str, list[CaseRecord]], waived: Mapping[str, str]
) -> tuple[list[Reason], dict[str, CaseRecord]]:
    """What stands against the results of a profile's required cases, and those results."""
    missing = [c for c in required if c not in by_case]
    duplicated = [c for c in required if len(by_case.get(c, ())) > 1]
    single = {c: by_case[c][0] for c in required if len(by_case.get(c, ())) == 1}
    skipped = [c for c, r in single.items() if r.status == "skipped"]
    compiled = [c for c, r in single.items() if r.status == COMPILED]
    failed = [c for c, r in single.items() if r.status == "failed" and c not in waived]
    odd = [c for c, r in single.items() if r.status not in (*STATUSES, COMPILED)]
    reasons = []
    if missing:
        reasons.append(Reason(ReasonCode.MISSING, f"{len(missing)} required cases have no "
                              f"result: {_examples(missing)}"))
    if duplicated:
        reasons.append(Reason(ReasonCode.DUPLICATED, f"{len(duplicated)} cases have more "
                              f"than one result: {_examples(duplicated)}"))
    if skipped:
        why = Counter(single[c].message or "" for c in skipped).most_common(1)[0][0]
        reasons.append(Reason(ReasonCode.SKIPPED, f"{len(skipped)} required cases skipped "
                              f"(a skip is not a pass), e.g. {skipped[0]}: {why}"))
    if compiled:
        reasons.append(Reason(ReasonCode.COMPILED, f"{len(compiled)} required cases compiled, "
                              f"not run (compiled is not a pass), e.g. {compiled[0]}: "
                              f"{single[compiled[0]].message or ''}"))
    if failed:
        xfailed = sum(single[c].pytest_outcome == "xfailed" for c in failed)
        note = f" ({xfailed} listed as expected failures, which do not count)" if xfailed else ""
        first = single[failed[0]]
        reasons.append(Reason(ReasonCode.FAILED, f"{len(failed)} cases failed{note}, e.g. "
                              f"{failed[0]} [{first.phase}]: {(first.message or '')[:200]}"))
    if odd:
        reasons.append(Reason(ReasonCode.UNKNOWN_STATUS, f"{len(odd)} results have an "
                              f"unknown status: {_examples(odd)}"))
    return reasons, single


def _profile_verdict(
    required: Sequence[str],
    by_case: Mapping[str, list[CaseRecord]],
    waived: Mapping[str, str],
    run_problems: Sequence[Reason],
    unfit: Reason | None = None,
) -> ProfileVerdict:
    if not required:
        return ProfileVerdict(verdict=Verdict.NOT_APPLICABLE, required=0, present=frozenset(),
                              reasons=(Reason(ReasonCode.NO_REQUIRED_CASE, "no required case"),))
    found, single = _case_reasons(required, by_case, waived)
    reasons = [*run_problems, *found]
    if unfit is not None:  # the target does not claim enough to be judged on this profile
        return ProfileVerdict(verdict=Verdict.NOT_APPLICABLE, required=len(required),
                              reasons=(unfit, *reasons), present=frozenset())
    passed = sum(r.status == "passed" for r in single.values())
    if not reasons and not passed:
        unsupported = sum(r.status == "not-supported" for r in single.values())
        reasons.append(Reason(ReasonCode.NONE_PASSED, f"no required case passed ({unsupported}"
                              f" of {len(required)} not supported, the rest waived): nothing "
                              "was shown to work"))
    used = sorted(c for c in required if c in waived)
    verdict = (Verdict.NOT_CONFORMANT if reasons
               else Verdict.CONFORMANT_WITH_WAIVERS if used else Verdict.CONFORMANT)
    counted = bool(used and not reasons)
    return ProfileVerdict(verdict=verdict, required=len(required), reasons=tuple(reasons),
                          waived=len(used) if counted else None,
                          present=frozenset({"waived"} if counted else ()))


def _unfit(profile: str, capabilities: CapabilitiesRecord | None) -> Reason | None:
    why = applicable(profile, capabilities)
    if why is None:
        return None
    if capabilities is None:
        return Reason(ReasonCode.CAPABILITIES_UNKNOWN, why)
    return Reason(ReasonCode.CAPABILITIES_SHORT, why)


def _waived(
    target: str, by_case: Mapping[str, list[CaseRecord]], waivers: Sequence[Waiver],
    traits: Mapping[str, Traits], xtc_version: str | None,
) -> dict[str, str]:
    """Case id -> the waiver covering its one result, a failure."""
    waived = {}
    for case_id, found in by_case.items():
        known = traits.get(case_id)
        if len(found) == 1 and found[0].status == "failed" and known is not None:
            phase = found[0].phase or ""
            waiver = next((w for w in waivers if w.matches(target, known, xtc_version, phase)),
                          None)
            if waiver is not None:
                waived[case_id] = waiver.id
    return waived


def judge(
    target: str,
    required: Mapping[str, str],
    results: Iterable[CaseRecord | Mapping[str, Any]],
    waivers: Sequence[Waiver],
    run_problems: Sequence[Reason] = (),
    *,
    traits: Mapping[str, Traits] | None = None,
    xtc_version: str | None = None,
    capabilities: CapabilitiesRecord | None = None,
) -> Judgement:
    """Counts and verdicts of one target. ``required``: case id -> profile of every case
    this bundle must hold; ``run_problems``: why the run itself cannot certify;
    ``traits``: what each case is (for waivers), ``xtc_version``: the XTC the target ran
    with; ``capabilities``: what it declared (None: not checked against the profiles)."""
    by_case: dict[str, list[CaseRecord]] = {}
    for result in results:
        record = result if isinstance(result, CaseRecord) else read_record(result, "result")
        by_case.setdefault(record.case, []).append(record)
    waived = _waived(target, by_case, waivers, traits or {}, xtc_version)
    counts = dict.fromkeys([*STATUSES, "waived", "xfailed", "missing", "duplicate", "extra"], 0)
    for case_id, found in by_case.items():
        for record in found:
            status = "waived" if case_id in waived else record.status
            counts[status] = counts.get(status, 0) + 1
            # one word a case (rules/statuses.py): a waived case is not also xfailed
            counts["xfailed"] += record.pytest_outcome == "xfailed" and case_id not in waived
        counts["duplicate"] += len(found) - 1
        counts["extra"] += case_id not in required
    counts["missing"] = sum(c not in by_case for c in required)
    verdicts = {
        profile: _profile_verdict(
            [c for c, p in required.items() if p == profile], by_case, waived, run_problems,
            None if capabilities is None else _unfit(profile, capabilities),
        )
        for profile in PROFILES
    }
    return Judgement(counts, verdicts, waived)


def scope(report: Report, target: str) -> Scope:
    """The scope of the runs behind ``target``: interrupted or filtered first, then shard."""
    runs = report.runs_of(target)
    if any(r.interrupted for r in runs):
        return Scope.INTERRUPTED
    if any(r.filters for r in runs):
        return Scope.FILTERED
    return Scope.SHARD if report.targets[target].shards else Scope.FULL


def run_problems(report: Report, target: str) -> list[Reason]:
    """Why the runs behind ``target`` cannot certify it, whatever the results."""
    problems = []
    for run in report.runs_of(target):
        if run.filters:
            problems.append(Reason(ReasonCode.RUN_FILTERED, "filtered run (" + "; ".join(
                run.filters) + "): a filtered run cannot be conformant"))
        if run.interrupted:
            problems.append(Reason(ReasonCode.RUN_INTERRUPTED,
                                   f"run interrupted ({run.interrupted})"))
    shards = report.targets[target].shards
    if shards:
        have = ", ".join(map(str, shards.indices))
        problems.append(Reason(ReasonCode.PARTIAL_SHARD,
                               f"partial bundle: shard {have} of {shards.count} only; "
                               "merge every shard (xtc-conformance merge) for a verdict"))
    return problems


def run_not_certifying(run: Run | Mapping[str, Any], suite_version: str) -> list[str]:
    """Why one run is not a certification run (empty when it is one)."""
    run = run if isinstance(run, Run) else Run.from_dict(run, "run")
    settings = run.settings
    reasons = []
    if not settings.strict:
        reasons.append("not strict (--xtc-strict not given: a target this machine cannot "
                       "run is skipped instead of failing)")
    if not settings.ignore_expectations:
        reasons.append("the targets' expected-failure files were honoured "
                       "(--xtc-ignore-expectations not given)")
    if settings.cases:
        reasons.append("case files added (--xtc-cases): not the suite's case set")
    if run.filters:
        reasons.append("filtered (" + "; ".join(run.filters) + ")")
    if settings.suite_version != suite_version:
        reasons.append(f"run by suite {settings.suite_version}, not {suite_version}")
    return reasons


def certification(report: Report) -> tuple[bool, list[str]]:
    """Whether the bundle certifies, and why not (one reason per run and problem)."""
    reasons = [
        f"run {i + 1}: {why}"
        for i, run in enumerate(report.runs)
        for why in run_not_certifying(run, report.suite.version)
    ]
    return not reasons, reasons


def _traits(entry: Target) -> dict[str, Traits]:
    return {c["id"]: Traits.from_dict(c) for c in entry.case_set.cases if "dtype" in c}


def with_keys(part: Part, names: Iterable[str]) -> frozenset[str] | None:
    """``part``'s present keys and ``names`` (None stays None: every key)."""
    return None if part.present is None else part.present | set(names)


def assemble_report(report: Report, records: Iterable[CaseRecord]) -> Report:
    """``report`` with its derived parts filled (targets' results, counts, verdicts,
    scope; totals; case set hash; whether it certifies; the waivers used) from the
    records; a record of a target the report does not know is left out. The targets come
    out sorted by name, whatever order the command line gave them in: report.json is
    written with sorted keys, and every rendering (summary.md, verify's) follows this."""
    waivers = waivers_from([dict(w) for w in report.waivers], "report.json waivers")
    mine: dict[str, list[CaseRecord]] = {t: [] for t in report.targets}
    for record in records:
        mine.setdefault(record.target, []).append(record)
    totals: Counter[str] = Counter()
    used: Counter[str] = Counter()
    targets = {}
    for name, entry in sorted(report.targets.items()):  # one canonical order: by name
        order = {c: i for i, c in enumerate(entry.case_set.ids)}
        results = sorted(mine[name], key=lambda r: (order.get(r.case, len(order)), record_key(r)))
        judgement = judge(
            name, required(name, entry), results, waivers, run_problems(report, name),
            traits=_traits(entry), xtc_version=(entry.versions or {}).get("xtc-tools"),
            capabilities=entry.capabilities or {},
        )
        targets[name] = replace(
            entry, counts=judgement.counts, verdicts=judgement.verdicts,
            waived=judgement.waived, results=tuple(results), scope=scope(report, name),
            present=with_keys(entry, DERIVED),
        )
        totals.update(judgement.counts)
        used.update(judgement.waived.values())
    certifies, why = certification(report)
    return replace(
        report, targets=targets, totals=dict(totals),
        case_set=CaseSetHash(**case_set_hash(targets)), profiles=dict(PROFILES),
        waivers_used={w.id: used[w.id] for w in waivers}, certifies=certifies,
        not_certifying=tuple(why), present=with_keys(report, REPORT_DERIVED),
    )


def assemble(
    report: dict[str, Any], records: Iterable[CaseRecord | Mapping[str, Any]]
) -> dict[str, Any]:
    """:func:`assemble_report` on report.json's data, filled in place and returned (for
    code that reads the report as JSON data). Raises schema.SchemaError on a part that
    breaks the schema."""
    typed = [r if isinstance(r, CaseRecord) else read_record(r, "results.jsonl")
             for r in records]
    filled = assemble_report(read_report(report), typed).to_dict()
    report.clear()
    report.update(filled)
    return report
