"""A failure's wrong elements drawn: per output, the map its record holds
(``checks.results.wrong_maps``, :mod:`pytest_xtc.core.judging.wrong_map`) as a small
inline SVG, one square per block of elements, the darker the larger its share of wrong
elements. Rows are the output's dimensions but the last, folded; columns its last."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_xtc.report.parts.records import CaseRecord
from pytest_xtc.report.render.page.style import esc

#: Pixels of a picture's longer side.
SIZE = 120
#: Fill of a block by its digit (0: no element wrong; 9: all).
SHADES = ["#dafbe1", *(f"rgb(207,{34 + (9 - d) * 22},{46 + (9 - d) * 20})" for d in range(1, 10))]


def maps_of(record: CaseRecord) -> list[Mapping[str, Any]]:
    """The wrong-element maps a record holds (none for records written before them)."""
    found = ((record.checks or {}).get("results") or {}).get("wrong_maps")
    if not isinstance(found, Sequence):
        return []
    return [m for m in found if isinstance(m, Mapping) and _blocks(m)]


def _blocks(found: Mapping[str, Any]) -> list[str]:
    blocks = found.get("blocks")
    if not isinstance(blocks, list) or not blocks or not all(isinstance(b, str) for b in blocks):
        return []
    width = len(blocks[0])
    ok = width and all(len(b) == width and b.isdigit() for b in blocks)
    return blocks if ok else []


def _runs(line: str) -> list[tuple[int, int, str]]:
    """(start, length, digit) of each run of one digit in ``line``."""
    found: list[tuple[int, int, str]] = []
    for x, digit in enumerate(line):
        if found and found[-1][2] == digit:
            start, length, _ = found[-1]
            found[-1] = (start, length + 1, digit)
        else:
            found.append((x, 1, digit))
    return found


def picture(found: Mapping[str, Any]) -> str:
    """One output's map as an inline SVG with its caption."""
    blocks = _blocks(found)
    rows, cols = len(blocks), len(blocks[0])
    cell = max(2, SIZE // max(rows, cols))
    squares = "".join(  # on a background of "none wrong", one rect per run of a shade
        f'<rect x="{x * cell}" y="{y * cell}" width="{n * cell}" height="{cell}" '
        f'fill="{SHADES[int(d)]}"/>'
        for y, line in enumerate(blocks) for x, n, d in _runs(line) if d != "0")
    shape = "x".join(str(n) for n in found.get("shape") or []) or "scalar"
    title = (f"output {found.get('output')}: {found.get('wrong')} wrong of shape {shape}, "
             f"{found.get('rows')} rows x {found.get('cols')} columns in {rows}x{cols} blocks")
    svg = (f'<svg class="wrong" role="img" width="{cols * cell}" height="{rows * cell}" '
           f'viewBox="0 0 {cols * cell} {rows * cell}"><title>{esc(title)}</title>'
           f'<rect width="100%" height="100%" fill="{SHADES[0]}"/>{squares}</svg>')
    return (f'<figure class="wrongmap">{svg}<figcaption>{esc(found.get("output"))} '
            f"[{esc(shape)}]: {esc(found.get('wrong'))} wrong</figcaption></figure>")


def pictures(record: CaseRecord) -> list[str]:
    """The record's pictures, one per mapped output (none where it holds no map)."""
    found = maps_of(record)
    if not found:
        return []
    return ['<div class="wrongmaps">', *map(picture, found),
            '<span class="muted">Where the wrong elements lie (red: all of a block wrong, '
            "green: none; rows: every dimension but the last).</span></div>"]
