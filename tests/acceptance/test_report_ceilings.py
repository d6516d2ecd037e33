"""Performance plausibility on this machine (targets/host.py: cpu_ceilings): the host's
ceilings follow the CPU (the cores this process may use, its vector width, its FMA
ports) and reach the cases through the adapter's isolated host; the faulty variant
reporting times 1000 times too short is flagged, the real host is not."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from pytest_xtc.targets.host import cpu_ceilings

CASES = "matmul-float32-64x64x64-vectorize or relu-float32-6x5"  # 1000x: beyond any CPU


def test_the_ceilings_follow_this_cpu() -> None:
    cores = len(os.sched_getaffinity(0))
    found = cpu_ceilings("float32")
    assert found.basis.startswith(f"{cores} cores at ")
    assert found.flops_per_s == 2 * cpu_ceilings("float64").flops_per_s  # twice the lanes
    assert found.min_call_s and found.flops_per_s and found.bytes_per_s


def test_times_too_short_flagged_and_the_host_not(run: Any, pytester: pytest.Pytester) -> None:
    run("--xtc-target=host,selftest-times-too-short", "--xtc-report=rep", "-k", CASES)
    flagged: dict[str, list[bool]] = {"host": [], "selftest-times-too-short": []}
    for line in (pytester.path / "rep" / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        perf = record.get("perf") or {}
        if perf.get("median_s"):
            flagged[record["target"]].append(bool(perf.get("invalid")))
    assert flagged["host"] and not any(flagged["host"]), flagged
    assert flagged["selftest-times-too-short"] and all(flagged["selftest-times-too-short"])
