"""Faulty host variants that assume aligned operands (issue 33): an input or output off the
boundary is read or written from its address rounded down. Real XTC kernels."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

import numpy as np

from pytest_xtc.core.cases import values
from pytest_xtc.selftest.tampered import Tampered


def _aligned_down(array: np.ndarray, boundary: int) -> tuple[int, int]:
    address = array.ctypes.data
    return address - address % boundary, address % boundary


class AlignedLoads(Tampered):
    """Vector loads assume 16-byte aligned inputs: an input that is not is read from its
    address rounded down to 16 bytes (its elements shifted)."""

    BOUNDARY = 16

    def feed(self, inputs: Sequence[np.ndarray]) -> Sequence[np.ndarray]:
        fed = []
        for a in inputs:
            start, off = _aligned_down(a, self.BOUNDARY)
            if off and a.flags["C_CONTIGUOUS"]:
                raw = ctypes.string_at(start, a.nbytes)
                a = np.frombuffer(raw, a.dtype).reshape(a.shape).copy()
            fed.append(a)
        return fed


class AlignedStores(Tampered):
    """Vector stores assume 16-byte aligned outputs: an output that is not is written at
    its address rounded down to 16 bytes (before its start; its last bytes unwritten)."""

    BOUNDARY = 16

    def spoil(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        for out in outputs:
            start, off = _aligned_down(out, self.BOUNDARY)
            if off and out.flags["C_CONTIGUOUS"]:
                data = out.tobytes()
                values.fill_unwritten(out)
                ctypes.memmove(start, data, len(data))


class Aligned64Loads(AlignedLoads):
    """AVX-512 loads assume 64-byte aligned inputs (a cache line): an input that is not is
    read from its address rounded down to 64 bytes."""

    BOUNDARY = 64
