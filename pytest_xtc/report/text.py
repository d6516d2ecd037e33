"""Text for people: tables that fit the terminal, times in human units, the registered
targets and their status."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_xtc.core.adapter import TargetAdapter

WIDTH = 80
GAP = "  "
#: The narrowest a column is squeezed to before the widest one is wrapped further.
MIN_COLUMN = 8
#: How the kernel-to-numpy time ratio is named wherever it is shown.
RATIO_HEADER = "time/numpy"
RATIO_NOTE = (
    "time/numpy: the kernel's median time over numpy's for the same graph "
    "(above 1: slower than numpy)"
)


def _widths(header: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> list[int]:
    """Column widths: each column's widest cell, the widest columns narrowed until the
    table fits ``width`` (never below a column's header word or MIN_COLUMN)."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    floors = [
        min(w, max(MIN_COLUMN, *(len(word) for word in str(h).split())))
        for w, h in zip(widths, header, strict=True)
    ]
    while sum(widths) + len(GAP) * (len(widths) - 1) > width:
        slack = [w - f for w, f in zip(widths, floors, strict=True)]
        if max(slack) <= 0:
            break
        widths[slack.index(max(slack))] -= 1
    return widths


def table_lines(
    header: Sequence[str], rows: Sequence[Sequence[str]], width: int = WIDTH
) -> list[list[str]]:
    """The table's lines, grouped per row (the header first, then its rule): cells too
    wide for their column continue on the next lines, within the column."""
    widths = _widths(header, rows, width)
    groups: list[list[str]] = []
    for row in [header, ["-" * w for w in widths], *rows]:
        cells = [
            textwrap.wrap(str(c), w, break_on_hyphens=False) or [""]
            for c, w in zip(row, widths, strict=True)
        ]
        height = max(len(c) for c in cells)
        lines = []
        for i in range(height):
            parts = [(c[i] if i < len(c) else "").ljust(w) for c, w in zip(cells, widths,
                                                                          strict=True)]
            lines.append(GAP.join(parts).rstrip())
        groups.append(lines)
    return groups


def table(header: Sequence[str], rows: Sequence[Sequence[str]], width: int = WIDTH) -> str:
    """Columns aligned to their widest cell, wrapped within ``width`` columns."""
    return "\n".join(line for group in table_lines(header, rows, width) for line in group)


def human_time(seconds: float | None) -> str:
    """``0.000000412`` -> ``412 ns``; three significant digits, ns to s."""
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def format_targets(adapters: Sequence[TargetAdapter], width: int = WIDTH) -> str:
    rows = []
    for adapter in adapters:
        probe = adapter.status()
        versions = ", ".join(f"{k} {v}" for k, v in probe.versions.items()) or "-"
        rows.append([adapter.name, probe.tier.value, probe.reason or "-", versions])
    return table(["target", "status", "reason", "versions found"], rows, width)
