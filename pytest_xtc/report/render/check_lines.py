"""What the checks saw, per target, for the terminal summary and summary.md: each per-case
check's own lines (core/judging/checks: the one list), from the facts the results carry.
A record written before the list existed (``guarded``, ``precision`` fields only) is read
as the guard-band and precision checks' facts."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_xtc.core.judging.checks import summary_lines


@dataclass
class TargetChecks:
    records: list[dict[str, Any]] = field(default_factory=list)  # one per case that ran

    @property
    def ran(self) -> int:
        return len(self.records)

    def lines(self, target: str) -> list[str]:
        """Every check's lines, in the list's order."""
        return summary_lines(target, self.records) if self.records else []


def _facts(record: Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(record.get("checks"), Mapping):
        return {"checks": dict(record["checks"])}
    found: dict[str, Any] = {"guard": {"guarded": bool(record["guarded"])}}
    if isinstance(record.get("precision"), Mapping):
        found["precision"] = dict(record["precision"])
    return {"checks": found}


def by_target(records: Iterable[Mapping[str, Any]]) -> dict[str, TargetChecks]:
    """Each target's checks from its results (records or Outcome dicts)."""
    found: dict[str, TargetChecks] = defaultdict(TargetChecks)
    for record in records:
        if record.get("guarded") is None and not record.get("checks"):
            continue  # never ran (compile-only, skipped, failed before running)
        found[str(record["target"])].records.append(_facts(record))
    return dict(found)
