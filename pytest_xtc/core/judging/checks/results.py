"""Every call's results against the reference, by each output's rule, and its inputs
left untouched (README, "When is a result right"). Records the first call's worst
error/bound ratio."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_xtc.core.judging import checking
from pytest_xtc.core.judging.checks.base import Finding, Seen
from pytest_xtc.core.judging.wrong_map import OUTPUTS


class Results:
    name = "results"

    def run(self, seen: Seen) -> Finding:
        problems: list[str] = []
        worst = 0.0
        maps: list[dict[str, Any]] = []  # the first wrong call's, for the report page
        for n, call in enumerate(seen.calls):
            said = checking.changed_inputs(seen.in_names, call.given, call.left)
            comparison = checking.compare(seen.out_names, call.outputs, seen.reference(call))
            said += [m.describe() for m in comparison.mismatches]
            if n == 0:
                worst = comparison.worst_ratio
            maps = maps or [m.wrong_map for m in comparison.mismatches[:OUTPUTS] if m.wrong_map]
            problems += [f"{call.label}: {line}" if call.label else line for line in said]
        facts: dict[str, Any] = {"worst_ratio": worst, "calls": len(seen.calls)}
        return Finding(problems, {**facts, "wrong_maps": maps} if maps else facts)

    def lines(self, target: str, facts: Sequence[Mapping[str, Any]]) -> list[str]:
        if not facts:
            return []
        calls = sum(int(f.get("calls", 0)) for f in facts)
        return [f"{target}: {calls} kernel calls checked over {len(facts)} runs, "
                "the timed ones included"]


CHECK = Results()
