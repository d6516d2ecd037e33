"""Verdicts: is a target conformant to a profile, and does the bundle certify? No pytest.

A target is *conformant* to a profile when its declared capabilities meet the profile's
minimum (:data:`pytest_xtc.report.profiles.MINIMUM`; else the profile is *not
applicable*), every required case of the profile has exactly one result, each is passed,
not-supported (the adapter declares the capability absent) or failed but waived by the
suite's own waiver file, and at least one passed. It is *conformant with waivers* when
waivers were needed for that. A skip (the target cannot run here) is not a pass; neither
is an expected failure from a target's expectation file. A filtered, interrupted or
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
from dataclasses import dataclass, field
from typing import Any

from pytest_xtc.core.cases.selectors import Traits
from pytest_xtc.core.outcome import Status, Word
from pytest_xtc.report.caseset import case_set_hash, required
from pytest_xtc.report.profiles import PROFILES, applicable
from pytest_xtc.report.records import clean, record_key
from pytest_xtc.report.waivers import Waiver, waivers_from


class Verdict(Word):
    CONFORMANT = "conformant"
    CONFORMANT_WITH_WAIVERS = "conformant with waivers"
    NOT_CONFORMANT = "not conformant"
    NOT_APPLICABLE = "not applicable"


class Scope(Word):
    """How much of a target's case set the runs behind a bundle meant to cover."""

    FULL = "full"
    SHARD = "shard"  # some shards of a sharded run: merge the others for a verdict
    FILTERED = "filtered"  # -k, -m, node ids, --xtc-cases...: never conformant
    INTERRUPTED = "interrupted"  # Ctrl-C, -x, a crash of the session: never conformant


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


@dataclass
class Judgement:
    """One target's counts, verdict per profile, and the waivers that applied."""

    counts: dict[str, int]
    verdicts: dict[str, dict[str, Any]]
    waived: dict[str, str] = field(default_factory=dict)  # case id -> waiver id

    def to_dict(self) -> dict[str, Any]:
        return {"counts": self.counts, "verdicts": self.verdicts, "waived": self.waived}


def _examples(ids: Sequence[str], n: int = 3) -> str:
    shown = ", ".join(ids[:n])
    return shown + (f", ... ({len(ids) - n} more)" if len(ids) > n else "")


def _profile_verdict(
    required: Sequence[str],
    by_case: Mapping[str, list[Mapping[str, Any]]],
    waived: Mapping[str, str],
    run_problems: Sequence[str],
    unfit: str | None = None,
) -> dict[str, Any]:
    if not required:
        return {"verdict": NOT_APPLICABLE, "required": 0, "reasons": ["no required case"]}
    missing = [c for c in required if c not in by_case]
    duplicated = [c for c in required if len(by_case.get(c, ())) > 1]
    single = {c: by_case[c][0] for c in required if len(by_case.get(c, ())) == 1}
    skipped = [c for c, r in single.items() if r["status"] == "skipped"]
    failed = [c for c, r in single.items() if r["status"] == "failed" and c not in waived]
    odd = [c for c, r in single.items() if r["status"] not in STATUSES]
    reasons = list(run_problems)
    if missing:
        reasons.append(f"{len(missing)} required cases have no result: {_examples(missing)}")
    if duplicated:
        reasons.append(
            f"{len(duplicated)} cases have more than one result: {_examples(duplicated)}"
        )
    if skipped:
        why = Counter(single[c].get("message", "") for c in skipped).most_common(1)[0][0]
        reasons.append(
            f"{len(skipped)} required cases skipped (a skip is not a pass), "
            f"e.g. {skipped[0]}: {why}"
        )
    if failed:
        xfailed = sum(single[c].get("pytest_outcome") == "xfailed" for c in failed)
        note = f" ({xfailed} listed as expected failures, which do not count)" if xfailed else ""
        first = single[failed[0]]
        reasons.append(
            f"{len(failed)} cases failed{note}, e.g. {failed[0]} "
            f"[{first.get('phase')}]: {str(first.get('message', ''))[:200]}"
        )
    if odd:
        reasons.append(f"{len(odd)} results have an unknown status: {_examples(odd)}")
    if unfit is not None:  # the target does not claim enough to be judged on this profile
        return {"verdict": NOT_APPLICABLE, "required": len(required), "reasons": [unfit, *reasons]}
    passed = sum(r["status"] == "passed" for r in single.values())
    if not reasons and not passed:
        unsupported = sum(r["status"] == "not-supported" for r in single.values())
        reasons.append(f"no required case passed ({unsupported} of {len(required)} not "
                       "supported, the rest waived): nothing was shown to work")
    used = sorted(c for c in required if c in waived)
    verdict = NOT_CONFORMANT if reasons else (CONFORMANT_WITH_WAIVERS if used else CONFORMANT)
    found = {"verdict": verdict, "required": len(required), "reasons": reasons}
    if used and not reasons:
        found["waived"] = len(used)
    return found


def judge(
    target: str,
    required: Mapping[str, str],
    results: Iterable[Mapping[str, Any]],
    waivers: Sequence[Waiver],
    run_problems: Sequence[str] = (),
    *,
    traits: Mapping[str, Traits] | None = None,
    xtc_version: str | None = None,
    capabilities: Mapping[str, Any] | None = None,
) -> Judgement:
    """Counts and verdicts of one target. ``required``: case id -> profile of every case
    this bundle must hold; ``run_problems``: why the run itself cannot certify;
    ``traits``: what each case is (for waivers), ``xtc_version``: the XTC the target ran
    with; ``capabilities``: what it declared (None: not checked against the profiles)."""
    by_case: dict[str, list[Mapping[str, Any]]] = {}
    for result in results:
        by_case.setdefault(str(result["case"]), []).append(result)
    waived = {}
    for case_id, found in by_case.items():
        known = (traits or {}).get(case_id)
        if len(found) == 1 and found[0]["status"] == "failed" and known is not None:
            phase = found[0].get("phase")
            waiver = next(
                (w for w in waivers
                 if w.matches(target, known, xtc_version, str(phase) if phase else "")),
                None,
            )
            if waiver is not None:
                waived[case_id] = waiver.id
    counts = dict.fromkeys([*STATUSES, "waived", "xfailed", "missing", "duplicate", "extra"], 0)
    for case_id, found in by_case.items():
        for result in found:
            status = "waived" if case_id in waived else str(result["status"])
            counts[status] = counts.get(status, 0) + 1
            counts["xfailed"] += result.get("pytest_outcome") == "xfailed"
        counts["duplicate"] += len(found) - 1
        counts["extra"] += case_id not in required
    counts["missing"] = sum(c not in by_case for c in required)
    verdicts = {
        profile: _profile_verdict(
            [c for c, p in required.items() if p == profile], by_case, waived, run_problems,
            None if capabilities is None else applicable(profile, capabilities),
        )
        for profile in PROFILES
    }
    return Judgement(counts, verdicts, waived)


def scope(report: Mapping[str, Any], target: str) -> Scope:
    """The scope of the runs behind ``target``: interrupted or filtered first, then shard."""
    entry = report["targets"][target]
    runs = [report["runs"][i] for i in entry["runs"]]
    if any(r.get("interrupted") for r in runs):
        return Scope.INTERRUPTED
    if any(r.get("filters") for r in runs):
        return Scope.FILTERED
    return Scope.SHARD if entry.get("shards") else Scope.FULL


def run_problems(report: Mapping[str, Any], target: str) -> list[str]:
    """Why the runs behind ``target`` cannot certify it, whatever the results."""
    entry = report["targets"][target]
    problems = []
    for index in entry["runs"]:
        run = report["runs"][index]
        if run.get("filters"):
            problems.append(
                "filtered run (" + "; ".join(run["filters"]) + "): "
                "a filtered run cannot be conformant"
            )
        if run.get("interrupted"):
            problems.append(f"run interrupted ({run['interrupted']})")
    shards = entry.get("shards")
    if shards:
        have = ", ".join(map(str, shards["indices"]))
        problems.append(
            f"partial bundle: shard {have} of {shards['count']} only; "
            "merge every shard (xtc-conformance merge) for a verdict"
        )
    return problems


def _order(entry: Mapping[str, Any]) -> dict[str, int]:
    return {c["id"]: i for i, c in enumerate(entry["case_set"]["cases"])}


def run_not_certifying(run: Mapping[str, Any], suite_version: str) -> list[str]:
    """Why one run is not a certification run (empty when it is one)."""
    settings = run.get("settings") or {}
    reasons = []
    if not settings.get("strict"):
        reasons.append("not strict (--xtc-strict not given: a target this machine cannot "
                       "run is skipped instead of failing)")
    if not settings.get("ignore_expectations"):
        reasons.append("the targets' expected-failure files were honoured "
                       "(--xtc-ignore-expectations not given)")
    if settings.get("cases"):
        reasons.append("case files added (--xtc-cases): not the suite's case set")
    if run.get("filters"):
        reasons.append("filtered (" + "; ".join(map(str, run["filters"])) + ")")
    if settings.get("suite_version") != suite_version:
        reasons.append(f"run by suite {settings.get('suite_version')}, "
                       f"not {suite_version}")
    return reasons


def certification(report: Mapping[str, Any]) -> tuple[bool, list[str]]:
    """Whether the bundle certifies, and why not (one reason per run and problem)."""
    version = str(report["suite"]["version"])
    reasons = [
        f"run {i + 1}: {why}"
        for i, run in enumerate(report["runs"])
        for why in run_not_certifying(run, version)
    ]
    return not reasons, reasons


def _traits(entry: Mapping[str, Any]) -> dict[str, Traits]:
    return {c["id"]: Traits.from_dict(c) for c in entry["case_set"]["cases"] if "dtype" in c}


def assemble(report: dict[str, Any], records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Fill ``report`` (targets' results, counts, verdicts; totals; case set hash; whether
    it certifies; the waivers used) from the records; a record of a target the report
    does not know is left out."""
    waivers = waivers_from(report.get("waivers"), "report.json waivers")
    mine: dict[str, list[Mapping[str, Any]]] = {t: [] for t in report["targets"]}
    for record in records:
        mine.setdefault(str(record.get("target")), []).append(record)
    totals: Counter[str] = Counter()
    used: Counter[str] = Counter()
    for target, entry in report["targets"].items():
        order = _order(entry)
        results = sorted(
            mine[target], key=lambda r: (order.get(r["case"], len(order)), record_key(r))
        )
        judgement = judge(
            target, required(target, entry), results, waivers, run_problems(report, target),
            traits=_traits(entry),
            xtc_version=(entry.get("versions") or {}).get("xtc-tools"),
            capabilities=entry.get("capabilities") or {},
        )
        entry.update(
            judgement.to_dict(),
            results=[clean(r) for r in results],
            scope=scope(report, target).value,
        )
        totals.update(judgement.counts)
        used.update(judgement.waived.values())
    report["totals"] = dict(totals)
    report["case_set"] = case_set_hash(report["targets"])
    report["profiles"] = dict(PROFILES)
    report["waivers_used"] = {w.id: used[w.id] for w in waivers}
    report["certifies"], report["not_certifying"] = certification(report)
    return report
