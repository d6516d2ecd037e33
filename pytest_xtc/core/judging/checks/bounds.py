"""Writes out of bounds: what the guard bands around the operands saw (execution/guard.py),
for targets that work in place on the given buffers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_xtc.core.judging.checks.base import Finding, Seen


class GuardBands:
    name = "guard"

    def run(self, seen: Seen) -> Finding:
        problems = [
            f"{call.label}: {line}" if call.label else line
            for call in seen.calls
            for line in call.guard
        ]
        return Finding(problems, {"guarded": seen.guarded})

    def lines(self, target: str, facts: Sequence[Mapping[str, Any]]) -> list[str]:
        if not facts:
            return []
        guarded = sum(bool(f.get("guarded")) for f in facts)
        return [f"{target}: guard bands checked on {guarded} of {len(facts)} runs"]


CHECK = GuardBands()
