"""A bundle's verdicts as the CLI prints them, and whether the profiles a run claims hold.
No pytest."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_xtc.report.parts.model import Report, Scope
from pytest_xtc.report.parts.reasons import ReasonCode
from pytest_xtc.report.render.text import visible
from pytest_xtc.report.rules.profiles import PROFILES


def claims_hold(report: Report, profiles: Sequence[str], partial_ok: bool) -> bool:
    """The bundle certifies and every target is conformant (with or without waivers) to
    every claimed profile (a shard: nothing but its being one shard of a run stands
    against it)."""
    if not report.certifies:
        return False
    for entry in report.targets.values():
        shard_only = partial_ok and entry.scope is Scope.SHARD
        excused = {ReasonCode.PARTIAL_SHARD} if shard_only else set()
        for profile in profiles:
            verdict = entry.verdict(profile)
            reasons = [c for c in verdict.codes if c not in excused]
            if reasons or (not verdict.verdict.holds and not shard_only):
                return False
    return True


def format_certification(report: Report) -> str:
    if report.certifies:
        return "certifies: yes (certification runs only)"
    return visible("certifies: no (" + "; ".join(report.not_certifying or ["unknown"]) + ")")


def format_verdicts(report: Report) -> str:
    lines = [format_certification(report)]
    for name, entry in report.targets.items():
        for profile in PROFILES:
            verdict = entry.verdict(profile)
            why = "; ".join(verdict.texts) if not verdict.verdict.holds else ""
            if verdict.waived:
                why = f"{verdict.waived} cases waived"
            lines.append(visible(f"{name} {profile}: {verdict.verdict.value}"
                                 + (f" ({why})" if why else "")))
    return "\n".join(lines)
