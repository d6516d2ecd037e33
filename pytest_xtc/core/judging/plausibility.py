"""Is a performance record physically possible? No pytest, no XTC.

A kernel time is a claim of the target, like its outputs. A time that implies more work
per second than the device can physically do is not a fast kernel but a wrong clock (a
runtime timing the wrong thing, a unit slip, a timer read once for ``number`` calls): the
record is marked *invalid*, with why, and shows so wherever performance is shown. It is
never a wrong-results verdict (the outputs were checked apart), and it never decides
conformance (docs/correctness-values-and-performance.md).

Three bounds, each from the device's physics (:class:`Ceilings`), checked on the
*fastest* call time of the record (``min_s``: every repeat must be possible):

* **arithmetic**: the case's FLOPs (2MNK per matmul, ...) over the time must not exceed
  ``flops_per_s``, the most the device's arithmetic units can do, all cores together;
* **memory traffic**: every output byte is written once, and at least as many input bytes
  are read as outputs written (or all of the inputs, when fewer): those compulsory bytes
  over the time must not exceed ``bytes_per_s``, the most the device's nearest memory (the
  first-level caches, all cores together) moves;
* **one cycle**: no call takes less than ``min_call_s`` (one cycle at the fastest clock).

A target declares its device's ceilings (``TargetAdapter.physical_limits``); one that
does not gets :func:`default_ceilings`: its declared peak FLOP/s times
:data:`PEAK_MARGIN`, and bounds no device reaches (:data:`ANY_DEVICE`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: A declared peak is a figure from a data sheet or a short measurement (turbo clocks,
#: a busy core): a time is called impossible only above twice that.
PEAK_MARGIN = 2.0
#: Ten times the largest first-level cache bandwidth of any device shipped by 2025 (an
#: NVIDIA H200: 132 SMs x 128 B/cycle x 1.98 GHz = 33 TB/s; 1/0.1 GHz = one cycle of a
#: 10 GHz clock): bounds that no device reaches, for targets that declare none.
ANY_DEVICE_BYTES_PER_S = 330e12
ANY_DEVICE_MIN_CALL_S = 0.1e-9


@dataclass(frozen=True)
class Ceilings:
    """What a device cannot exceed (None: not bounded): FLOP/s, bytes/s and the shortest
    call, with where the figures come from (shown with an invalid record)."""

    flops_per_s: float | None = None
    bytes_per_s: float | None = None
    min_call_s: float | None = None
    basis: str = ""


ANY_DEVICE = Ceilings(None, ANY_DEVICE_BYTES_PER_S, ANY_DEVICE_MIN_CALL_S,
                      "bounds no device reaches (330 TB/s, 0.1 ns a call)")


def default_ceilings(peak_flops: float | None) -> Ceilings:
    """For a target declaring no physical limits: its peak (where it has one) times
    :data:`PEAK_MARGIN`, and :data:`ANY_DEVICE`'s traffic and cycle bounds."""
    if not peak_flops:
        return ANY_DEVICE
    return Ceilings(peak_flops * PEAK_MARGIN, ANY_DEVICE.bytes_per_s, ANY_DEVICE.min_call_s,
                    f"{PEAK_MARGIN:g} x the declared peak {peak_flops / 1e9:.4g} GFLOP/s; "
                    + ANY_DEVICE.basis)


def compulsory_bytes(input_bytes: int, output_bytes: int) -> int:
    """Bytes any correct kernel moves: its outputs written, and as many input bytes read
    (all of them when the inputs are smaller)."""
    return output_bytes + min(input_bytes, output_bytes)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def invalid(perf: Mapping[str, Any], ceilings: Ceilings) -> str | None:
    """Why the record ``perf`` (perf.py: ``min_s``, ``flops``, ``bytes``) is physically
    impossible under ``ceilings``, or None when it is possible."""
    fastest = _number(perf.get("min_s"))
    if fastest is None:
        return None
    if not math.isfinite(fastest) or fastest <= 0:
        return f"a kernel time of {fastest!r} s is not a positive number"
    basis = f" ({ceilings.basis})" if ceilings.basis else ""
    if ceilings.min_call_s and fastest < ceilings.min_call_s:
        return (f"a call of {fastest:.3g} s is shorter than one cycle "
                f"({ceilings.min_call_s:.3g} s){basis}")
    flops = _number(perf.get("flops"))
    if ceilings.flops_per_s and flops and flops / fastest > ceilings.flops_per_s:
        return (f"{flops:.4g} FLOPs in {fastest:.3g} s is {flops / fastest / 1e9:.4g} GFLOP/s, "
                f"over the device's ceiling of {ceilings.flops_per_s / 1e9:.4g}{basis}")
    moved = _number(perf.get("bytes"))
    if ceilings.bytes_per_s and moved and moved / fastest > ceilings.bytes_per_s:
        return (f"{moved:.4g} bytes moved in {fastest:.3g} s is {moved / fastest / 1e9:.4g} "
                f"GB/s, over the device's ceiling of {ceilings.bytes_per_s / 1e9:.4g}{basis}")
    return None
