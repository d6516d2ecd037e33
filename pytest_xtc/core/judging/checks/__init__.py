"""The per-case checks: one object each, in one list (:data:`CHECKS`). No pytest.

A check reads what a case's kernel calls left (:class:`Seen`) and says what is wrong
(:class:`Finding`: failure lines, and the facts it records on the outcome under its
name); :meth:`Check.lines` says what the report and the terminal show of those facts,
per target. The runner runs the list in order, the report and the terminal read it.
Adding a check is one module with one object and one line in :data:`CHECKS`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_xtc.core.judging.checks import bounds, precision, repeat, results
from pytest_xtc.core.judging.checks.base import Call, Check, Finding, Seen, references

__all__ = ["CHECKS", "Call", "Check", "Finding", "Seen", "judge", "references", "summary_lines"]

#: Every per-case check, in the order they run (precision reads the others' problems).
CHECKS: list[Check] = [results.CHECK, bounds.CHECK, repeat.CHECK, precision.CHECK]


def judge(seen: Seen) -> dict[str, Any]:
    """Run every check on ``seen``; the failure lines gather in ``seen.problems``, and the
    checks' facts come back by check name."""
    facts: dict[str, Any] = {}
    for check in CHECKS:
        found = check.run(seen)
        if found is None:
            continue
        seen.problems += found.problems
        if found.facts is not None:
            facts[check.name] = found.facts
    return facts


def summary_lines(target: str, records: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every check's lines for one target, from its records' ``checks`` facts."""
    found: list[str] = []
    for check in CHECKS:
        facts = [
            r["checks"][check.name]
            for r in records
            if isinstance(r.get("checks"), Mapping) and check.name in r["checks"]
        ]
        found += check.lines(target, facts)
    return found
