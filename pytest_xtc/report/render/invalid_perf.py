"""Performance records marked invalid (core/judging/plausibility.py): a kernel time the
device cannot physically make. Said in the terminal summary and in summary.md's
Performance section, never shown as a figure; never a verdict on results or conformance."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

EXAMPLES = 2  # cases named per target


def invalid_reason(perf: Mapping[str, Any] | None) -> str | None:
    """Why ``perf`` is invalid, or None (a valid record, or none)."""
    reason = perf.get("invalid") if isinstance(perf, Mapping) else None
    return str(reason) if reason else None


def invalid_lines(records: Iterable[tuple[str, str, Mapping[str, Any] | None]]) -> list[str]:
    """One line per target with invalid records (``records``: target, case, perf), naming
    how many and the first cases with their reasons."""
    found: dict[str, list[tuple[str, str]]] = defaultdict(list)
    timed: dict[str, int] = defaultdict(int)
    for target, case, perf in records:
        if isinstance(perf, Mapping) and perf.get("median_s") is not None:
            timed[target] += 1
        reason = invalid_reason(perf)
        if reason:
            found[target].append((case, reason))
    return [
        f"{target}: {len(bad)} of {timed[target]} performance records INVALID (kernel times "
        "the device cannot physically make; not shown as figures), e.g. "
        + "; ".join(f"{case}: {reason}" for case, reason in bad[:EXAMPLES])
        for target, bad in sorted(found.items())
    ]
