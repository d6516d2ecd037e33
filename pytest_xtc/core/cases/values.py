"""Input values and the bit patterns the checks rely on. No pytest, no XTC.

* **Unwritten sentinel.** Output buffers (and guard bands, :mod:`guard`) are filled with a
  signalling-NaN bit pattern with a fixed payload (float32 ``0x7FA5A5A5``, float64
  ``0x7FF5A5A5A5A5A5A5``). No arithmetic produces a signalling NaN (IEEE 754 §6.2: every
  operation on one delivers a quiet NaN), and the suite's inputs hold none, so an output
  element that still has these exact bits after a run was never written. Compared by bits,
  never by "is NaN": a legitimate NaN result is not "unwritten".
* **Input kinds** (``Case.values``): ``random`` (uniform in [-1, 1)), ``exact`` (small
  integers: every product and sum exact), ``special`` (random, with IEEE special values
  put at a few positions of every input: NaN, +-Inf, -0.0, +0.0, subnormals, the smallest
  normal, large magnitudes). What each op must do with them is its module's ``ieee`` rule
  (README, "Special values").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

KINDS = ("random", "exact", "special")
#: The specials every ``special`` input holds (where it has room): the first of
#: :func:`specials`.
ALWAYS = 4

_UNWRITTEN = {
    "float16": (np.uint16, 0x7D5A),
    "float32": (np.uint32, 0x7FA5A5A5),
    "float64": (np.uint64, 0x7FF5A5A5A5A5A5A5),
}


def _pattern(dtype: np.dtype | str) -> tuple[type, int]:
    name = np.dtype(dtype).name
    if name not in _UNWRITTEN:
        raise ValueError(f"no unwritten sentinel for dtype {name}")
    return _UNWRITTEN[name]


def unwritten(shape: Sequence[int], dtype: np.dtype | str) -> np.ndarray:
    """An array of ``shape`` whose every element holds the unwritten sentinel."""
    array = np.empty(tuple(shape), dtype)
    fill_unwritten(array)
    return array


def fill_unwritten(array: np.ndarray) -> None:
    """Set every element of ``array`` (any float array, a view included) to the sentinel."""
    uint, bits = _pattern(array.dtype)
    array.view(uint)[...] = bits


def unwritten_mask(array: np.ndarray) -> np.ndarray:
    """True where ``array`` still holds the sentinel bits."""
    uint, bits = _pattern(array.dtype)
    return np.ascontiguousarray(array).view(uint) == uint(bits)


def specials(dtype: np.dtype | str) -> np.ndarray:
    """The special values put into ``special`` inputs, in ``dtype``."""
    info = np.finfo(dtype)
    tiny = info.smallest_subnormal
    big = np.ldexp(1.0, int(info.maxexp) // 2)  # its square overflows; times 1 it does not
    values = [
        np.nan, np.inf, -np.inf, -0.0, 0.0,
        tiny, -tiny, info.tiny * 0.375, -info.tiny * 0.625,  # subnormals
        info.tiny, -info.tiny,  # smallest normals
        big, -big, info.max / 2, -info.max / 2,  # large magnitudes
    ]
    return np.array(values, dtype=dtype)


def special_array(shape: Sequence[int], dtype: str, rng: np.random.Generator) -> np.ndarray:
    """Uniform values in [-1, 1) with special values at a few positions: about one element
    in eight, at least the first ``ALWAYS`` specials (NaN, +Inf, -Inf, -0.0) wherever
    the array has room for them, so that whether a case meets a NaN never depends on the
    seed; the others in a seeded order."""
    array = rng.uniform(-1.0, 1.0, size=tuple(shape)).astype(dtype)
    pool = specials(dtype)
    count = min(array.size, len(pool), max(ALWAYS, array.size // 8))
    where = rng.choice(array.size, size=count, replace=False)
    order = np.concatenate([np.arange(ALWAYS), ALWAYS + rng.permutation(len(pool) - ALWAYS)])
    array.flat[where] = pool[order[:count]]
    return array
