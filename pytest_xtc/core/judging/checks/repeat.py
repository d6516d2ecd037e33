"""``--xtc-repeat-check``: the first call run again on the same inputs must give the same
bits (a nondeterministic parallel reduction fails it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_xtc.core.judging import checking
from pytest_xtc.core.judging.checks.base import Finding, Seen


class Repeat:
    name = "repeat"

    def run(self, seen: Seen) -> Finding | None:
        if seen.second is None or not seen.calls:
            return None
        first = seen.calls[0].outputs
        return Finding(checking.unstable_outputs(seen.out_names, first, seen.second), {})

    def lines(self, target: str, facts: Sequence[Mapping[str, Any]]) -> list[str]:
        return [f"{target}: repeat check on {len(facts)} runs"] if facts else []


CHECK = Repeat()
