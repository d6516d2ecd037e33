"""Tallies of explored schedules per XTC search strategy, for the terminal and reports:
how many passed, failed, were refused by XTC, not supported or not applicable. No pytest."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from pytest_xtc.exploration.explore import REFUSED, strategy_of

NOT_APPLICABLE = "not applicable"
TALLY_COLUMNS = ("passed", "failed", "expected failure", "XTC refused", "not-supported",
                 "skipped", NOT_APPLICABLE)


def column(status: str, message: str, pytest_column: str | None = None) -> str:
    """The tally column of one explored case's outcome."""
    if status == "not-supported" and message.startswith(REFUSED):
        return "XTC refused"
    if pytest_column is not None and pytest_column in TALLY_COLUMNS:
        return pytest_column
    if pytest_column == "infrastructure error" or status == "error":
        return "failed"
    return status if status in TALLY_COLUMNS else "failed"


def tally(
    rows: Iterable[tuple[str, str, str] | tuple[str, str, str, str]],
    not_applicable: Mapping[str, int] | None = None,
) -> dict[str, Counter[str]]:
    """Per strategy, how many explored schedules landed in each of :data:`TALLY_COLUMNS`.
    ``rows``: (case id, status, message[, the pytest column the summary shows]) of every
    outcome; cases that were not explored are left out. ``not_applicable``: per strategy,
    the base cases it does not apply to (:meth:`Plan.counts`)."""
    table: dict[str, Counter[str]] = {}
    for row in rows:
        strategy = strategy_of(row[0])
        if strategy is None:
            continue
        shown = row[3] if len(row) > 3 else None  # type: ignore[misc]
        table.setdefault(strategy, Counter())[column(row[1], row[2], shown)] += 1
    for strategy, count in (not_applicable or {}).items():
        if count:
            table.setdefault(strategy, Counter())[NOT_APPLICABLE] += count
    return dict(sorted(table.items()))


def tally_outcomes(outcomes: Iterable[Any], not_applicable: Mapping[str, int] | None = None
                   ) -> dict[str, Counter[str]]:
    """:func:`tally` over :class:`~pytest_xtc.core.outcome.Outcome` records (or their dicts)."""
    rows = []
    for o in outcomes:
        get = o.get if isinstance(o, Mapping) else lambda k, o=o: getattr(o, k)
        rows.append((str(get("case")), str(get("status")), str(get("message"))))
    return tally(rows, not_applicable)


def format_tally(table: Mapping[str, Counter[str]]) -> list[str]:
    """One line per strategy: ``tile_oo: 12 passed, 1 failed, 2 XTC refused, 3 not
    applicable`` (columns with no case left out)."""
    lines = []
    for strategy, counts in table.items():
        parts = [f"{counts[c]} {c}" for c in TALLY_COLUMNS if counts.get(c)]
        lines.append(f"{strategy}: {', '.join(parts) or 'nothing'}")
    return lines
