"""The machine's CPU time, for the benchmarks that weigh a run by it (Linux)."""

from __future__ import annotations

import os
from pathlib import Path


def used() -> tuple[float, float]:
    """User and system CPU seconds every process of the machine has used so far, from
    ``/proc/stat`` (zeros where there is none): a run's pytest, hosts, case workers and
    compiler processes all count, reaped or not."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:8]
    except OSError:
        return 0.0, 0.0
    user, nice, system, _idle, _wait, irq, softirq = map(int, fields)
    tick = os.sysconf("SC_CLK_TCK")
    return (user + nice) / tick, (system + irq + softirq) / tick
