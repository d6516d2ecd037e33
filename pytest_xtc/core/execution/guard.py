"""Guard bands: operands handed to a kernel inside larger buffers, so that writes out of
bounds show. No pytest, no XTC.

Each operand's data lies 256-byte aligned (XTC's own ``CNDArray`` alignment), or as far
past that as the case's ``align`` says (:func:`offset`: one element, or an odd number of
bytes, as users' numpy views often are), inside a
buffer whose bands before and after it hold the unwritten sentinel (``values.py``: a
signalling NaN no arithmetic produces). After the run, any band element whose bits
changed is a write out of bounds: "wrote 11 elements past the end of C". Only adapters
whose runtime works in place on the given arrays (``TargetAdapter.guarded_buffers``)
are guarded: a runtime that copies operands into buffers of its own would make the bands
meaningless. Guards see writes, not reads; a write that jumps further than the band is
not seen. A band is one plane of the operand (its last dimension times the one before),
at least one row and 4 KiB, at most 1 MiB: a write running on from either end is seen
whatever its length, one jumping a whole band is not, and a large operand's buffer is
not three times its size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pytest_xtc.core.cases import values

ALIGN = 256  # XTC's CNDArray allocation alignment (its cndarray.c)
#: A case's operand alignments (``Case.align``): each operand's data starts this far past
#: a 256-byte boundary; ``FIRST_then_LATER`` changes it after the first call.
ALIGNMENTS, THEN, for_call = values.ALIGNMENTS, values.THEN, values.for_call


def offset(align: str, itemsize: int, operand: int, call: int = 0) -> int:
    """Bytes past a 256-byte boundary where operand number ``operand`` (inputs, then
    outputs) starts in call number ``call``: 0 (``aligned``), one element (``element``),
    or an odd byte count that differs from one operand to the next, 1, 3, 5, 7 (``odd``;
    one element where the dtype has one byte); per call for ``FIRST_then_LATER``
    (:func:`for_call`). ValueError for an alignment it does not know."""
    align = for_call(align, call)
    if align == "aligned":
        return 0
    if align == "element" or itemsize == 1:
        return itemsize
    return 2 * (operand % 4) + 1


def at_offset(array: np.ndarray, shift: int) -> np.ndarray:
    """A copy of ``array`` whose data starts ``shift`` bytes past a 256-byte boundary."""
    size = array.size * array.dtype.itemsize
    raw = np.empty(size + ALIGN + shift, np.uint8)
    start = (-raw.ctypes.data) % ALIGN + shift
    copy = raw[start : start + size].view(array.dtype).reshape(array.shape)
    np.copyto(copy, array)
    return copy
MIN_BAND_BYTES = 4096
MAX_BAND_BYTES = 1 << 20


@dataclass
class Guarded:
    """One operand inside a guarded buffer: ``view`` is what the kernel gets."""

    name: str
    buffer: np.ndarray  # the whole buffer, in the operand's dtype
    lead: int  # elements before the view
    view: np.ndarray

    def violations(self) -> list[str]:
        """What was written outside the view, one line per side."""
        size = self.view.size
        before = values.unwritten_mask(self.buffer[: self.lead])
        after = values.unwritten_mask(self.buffer[self.lead + size :])
        found = []
        if not before.all():
            changed = np.flatnonzero(~before)
            first = self.lead - int(changed[0])
            found.append(
                f"wrote {changed.size} element(s) before the start of {self.name} "
                f"(up to {first} before it)"
            )
        if not after.all():
            changed = np.flatnonzero(~after)
            found.append(
                f"wrote {changed.size} element(s) past the end of {self.name} "
                f"(up to {int(changed[-1]) + 1} past it)"
            )
        return found


def band_elements(shape: Sequence[int], itemsize: int) -> int:
    """Guard band length in elements: one plane of the operand (its last dimension times
    the one before), at most 1 MiB, at least one row and 4 KiB, rounded up to keep the
    data aligned."""
    plane = int(np.prod(shape[-2:])) if len(shape) else 1
    row = int(shape[-1]) if len(shape) else 1
    elements = max(min(plane, MAX_BAND_BYTES // itemsize), row, -(-MIN_BAND_BYTES // itemsize))
    per_align = ALIGN // itemsize
    return -(-elements // per_align) * per_align


def place(name: str, array: np.ndarray, band: int | None = None, shift: int = 0) -> Guarded:
    """A guarded copy of ``array``: sentinel bands around a view holding it, ``shift``
    bytes past a 256-byte boundary (the bands move with it)."""
    dtype = array.dtype
    band = band_elements(array.shape, dtype.itemsize) if band is None else band
    total = 2 * band + array.size
    raw = np.empty(total * dtype.itemsize + ALIGN + shift, np.uint8)
    start = (-raw.ctypes.data) % ALIGN + shift
    buffer = raw[start : start + total * dtype.itemsize].view(dtype)
    values.fill_unwritten(buffer)
    view = buffer[band : band + array.size].reshape(array.shape)
    np.copyto(view, array)
    return Guarded(name, buffer, band, view)


def check(guarded: Sequence[Guarded]) -> list[str]:
    """Every write out of bounds, over all operands."""
    return [line for g in guarded for line in g.violations()]
