"""Time limits and memory budgets: what a valid one is."""

from __future__ import annotations

import math

DEFAULT_MAX_CASE_BYTES = 1 << 30  # operands and reference of one case: 1 GiB


def check_limit(name: str, value: object) -> float:
    """``value`` as seconds when it is a finite, positive number; a ValueError naming the
    limit otherwise (nan, inf, 0 and negative numbers never reach a timer)."""
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a number of seconds, got {value!r}") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{name}: must be a finite number of seconds above 0, got {value!r}")
    return seconds


def check_budget(name: str, value: object) -> int:
    """``value`` as a byte count when it is a positive integer; a ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name}: must be a positive number of bytes, got {value!r}")
    return value


def worker_memory_limit(adapter: object) -> int | None:
    """An adapter's ``memory_limit()`` (RLIMIT_AS of its workers) when it sets a valid one."""
    try:
        limit = adapter.memory_limit()  # type: ignore[attr-defined]
        return None if limit is None else check_budget("memory_limit()", limit)
    except Exception:
        return None
