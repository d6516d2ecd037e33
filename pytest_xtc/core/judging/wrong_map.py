"""Where an output's wrong elements lie, small enough for every failure's record: the
output folded to rows (every dimension but the last) x columns (the last), cut into at
most :data:`SIDE` x :data:`SIDE` blocks, each block the share of its elements that are
wrong as one digit (0: none, 1 to 9: up to all). The report page draws it
(:mod:`pytest_xtc.report.render.page.pictures`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: Blocks per side at most: a map is at most SIDE * SIDE digits (576 bytes).
SIDE = 24
#: Outputs mapped per failed call at most (the others are still named in the message).
OUTPUTS = 4


def _edges(length: int) -> np.ndarray:
    """Block boundaries along an axis of ``length`` elements (at most SIDE blocks)."""
    return np.linspace(0, length, min(length, SIDE) + 1).round().astype(int)


def wrong_map(name: str, wrong: np.ndarray) -> dict[str, Any]:
    """``wrong`` (True where an element of output ``name`` is wrong) as a map: its shape,
    the block grid's size and one string of digits per block row."""
    cols = wrong.shape[-1] if wrong.ndim else 1
    flat = wrong.reshape(-1, cols) if wrong.size else np.zeros((0, 0), bool)
    rows_at, cols_at = _edges(flat.shape[0]), _edges(flat.shape[1])
    # the wrong elements per block: sums over row blocks, then column blocks
    counts = np.add.reduceat(flat.astype(np.int64), rows_at[:-1], axis=0) if flat.size else flat
    if flat.size:
        counts = np.add.reduceat(counts, cols_at[:-1], axis=1)
    sizes = np.outer(np.diff(rows_at), np.diff(cols_at))
    digits = ["".join(str(math.ceil(9 * int(n) / int(s))) for n, s in zip(row, size, strict=True))
              for row, size in zip(counts, sizes, strict=True)]
    return {"output": name, "shape": list(wrong.shape), "wrong": int(wrong.sum()),
            "rows": flat.shape[0], "cols": flat.shape[1], "blocks": digits}
