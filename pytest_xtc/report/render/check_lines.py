"""What the checks saw, per target, for the terminal summary and summary.md: each per-case
check's own lines (core/judging/checks: the one list), from the facts the results carry.
A record written before the list existed (``guarded``, ``precision`` fields only) is read
as the guard-band and precision checks' facts."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from pytest_xtc.core.judging.checks import summary_lines

#: one case's facts, by check name (what core/judging/checks' summary lines read)
Facts = Mapping[str, Mapping[str, object]]


class CheckedResult(Protocol):
    """What a result says of its checks: a report's CaseRecord or the terminal's Result."""

    @property
    def target(self) -> str: ...
    @property
    def guarded(self) -> bool | None: ...
    @property
    def precision(self) -> Mapping[str, object] | None: ...
    @property
    def checks(self) -> Mapping[str, object] | None: ...


@dataclass
class TargetChecks:
    records: list[dict[str, Facts]] = field(default_factory=list)  # one per case that ran

    @property
    def ran(self) -> int:
        return len(self.records)

    def lines(self, target: str) -> list[str]:
        """Every check's lines, in the list's order."""
        return summary_lines(target, self.records) if self.records else []


def _facts(result: CheckedResult) -> dict[str, Facts]:
    if isinstance(result.checks, Mapping):
        return {"checks": {k: v for k, v in result.checks.items() if isinstance(v, Mapping)}}
    found: dict[str, Mapping[str, object]] = {"guard": {"guarded": bool(result.guarded)}}
    if isinstance(result.precision, Mapping):
        found["precision"] = dict(result.precision)
    return {"checks": found}


def by_target(results: Iterable[CheckedResult]) -> dict[str, TargetChecks]:
    """Each target's checks from its results."""
    found: dict[str, TargetChecks] = defaultdict(TargetChecks)
    for result in results:
        if result.guarded is None and not result.checks:
            continue  # never ran (compile-only, skipped, failed before running)
        found[str(result.target)].records.append(_facts(result))
    return dict(found)
