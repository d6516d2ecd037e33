"""Text for people: every string shown made harmless (:func:`visible` for terminals and
XML, :func:`markdown` for summary.md), tables that fit the terminal, times in human units,
the registered targets and their status.

Names, messages and reasons come from case files, adapters and bundles written elsewhere:
shown raw, a newline forges a line of its own ("552 passed"), an escape sequence moves the
cursor or recolours, U+202E reverses what follows, a ``|`` adds a table cell. Every writer
of text for people passes such strings through here.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_xtc.core.adapter import TargetAdapter

#: How a newline is shown inside one line.
NEWLINE = "\u23ce"
_NAMED = {"\n": NEWLINE, "\r": "\\r", "\t": "\\t"}
#: Markdown's inline syntax (code, emphasis, links, HTML and entities, table cells,
#: strikethrough), escaped with a backslash wherever untrusted text lands in summary.md.
_MARKDOWN = re.compile(r"([\\`*_\[\]<>|~&])")

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


def _escape(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else (
        f"\\U{code:08x}")


def visible(text: object) -> str:
    """``text`` on one line, every character that is not printable (controls, escape
    sequences, bidi and zero-width marks, line separators) shown as its escape (``\\x1b``,
    ``\\u202e``), a newline as ⏎."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


class Markdown(str):
    """Text already safe for summary.md (escaped, or written by this package)."""


def markdown(text: object) -> Markdown:
    """``text`` for summary.md: :func:`visible`, then Markdown's inline syntax escaped, so
    that it reads as the same characters and adds no line, cell, link or emphasis."""
    if isinstance(text, Markdown):
        return text
    return Markdown(_MARKDOWN.sub(r"\\\1", visible(text)))


def _widths(header: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> list[int]:
    """Column widths: each column's widest cell, the widest columns narrowed until the
    table fits ``width`` (never below a column's header word or MIN_COLUMN)."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    floors = [
        min(w, max([MIN_COLUMN, *(len(word) for word in str(h).split())]))
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
    header = [visible(h) for h in header]
    rows = [[visible(c) for c in row] for row in rows]
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
