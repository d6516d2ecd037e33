"""What the checks saw, per target: how many runs were guard-checked for writes out of
bounds, and the effective mantissa bits of its contractions, pooled per dtype over the
random-input cases (core/judging/precision.py). For the terminal summary and summary.md."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_xtc.core.judging.precision import Terms, pool


@dataclass
class TargetChecks:
    ran: int = 0  # cases whose kernel ran and was checked
    guarded: int = 0  # of those, run inside guard bands
    bits: dict[str, tuple[float, int]] = field(default_factory=dict)  # dtype -> (bits, n)

    def lines(self, target: str) -> list[str]:
        """One line for the guards, one per dtype for the precision."""
        if not self.ran:
            return []
        found = [f"{target}: guard bands checked on {self.guarded} of {self.ran} runs"]
        found += [
            f"{target}: effective mantissa bits, {dtype}: {bits:.1f} over {n} elements"
            for dtype, (bits, n) in sorted(self.bits.items())
        ]
        return found


def by_target(records: Iterable[Mapping[str, Any]]) -> dict[str, TargetChecks]:
    """Each target's checks from its results (records or Outcome dicts)."""
    found: dict[str, TargetChecks] = defaultdict(TargetChecks)
    terms: dict[str, list[Terms]] = defaultdict(list)
    for record in records:
        if record.get("guarded") is None:
            continue  # never ran (compile-only, skipped, failed before running)
        target = str(record["target"])
        found[target].ran += 1
        found[target].guarded += bool(record["guarded"])
        if isinstance(record.get("precision"), Mapping):
            terms[target].append(Terms.from_dict(dict(record["precision"])))
    for target, mine in terms.items():
        found[target].bits = {d: (t.bits, t.n) for d, t in pool(mine).items()}
    return dict(found)
