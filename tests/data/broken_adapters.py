"""Adapters broken in each adapter method that can fail, registered as entry points by
tests/unit/core/adapters/test_registry.py beside the healthy host target: each must fail its own
target alone, once, and leave every other target's results as a clean run gives them.

``BROKEN_HANG_S`` (environment) is how long a hanging method sleeps (default 600 s).
"""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path

from pytest_xtc.core.adapter import Capabilities, Probe, TargetSpec
from pytest_xtc.targets.host import HostTarget


def _hang() -> None:
    deadline = time.monotonic() + float(os.environ.get("BROKEN_HANG_S", "600"))
    while time.monotonic() < deadline:
        time.sleep(0.5)


def factory_returns_none(spec: TargetSpec) -> None:
    """An entry-point factory that gives nothing."""
    return None


def factory_raises(spec: TargetSpec) -> HostTarget:
    raise RuntimeError("factory cannot find libwidget")


class ConstructorRaises(HostTarget):
    def __init__(self, spec: TargetSpec) -> None:
        raise ValueError("constructor rejects this machine")


class ProbeCrashes(HostTarget):
    def probe(self) -> Probe:
        ctypes.string_at(0)  # segfault
        raise AssertionError("unreachable")


class CapabilitiesHang(HostTarget):
    def capabilities(self) -> Capabilities:
        _hang()
        return super().capabilities()


class PrepareCrashes(HostTarget):
    def prepare(self, workdir: Path) -> None:
        ctypes.string_at(0)


class PrepareHangs(HostTarget):
    def prepare(self, workdir: Path) -> None:
        _hang()


class ExpectationsRaise(HostTarget):
    def expectations_file(self) -> Path | None:
        raise OSError("expectations share not mounted")


class TimeLimitsRaise(HostTarget):
    def time_limits(self) -> tuple[float, float]:
        raise RuntimeError("limits table missing")


#: target name -> entry-point value (module ``broken_adapters``), and what each case of that
#: target must say.
BROKEN = {
    "none-factory": ("broken_adapters:factory_returns_none", "entry point gave NoneType"),
    "raising-factory": ("broken_adapters:factory_raises", "factory cannot find libwidget"),
    "raising-init": ("broken_adapters:ConstructorRaises", "constructor rejects this machine"),
    "crashing-probe": ("broken_adapters:ProbeCrashes", "SIGSEGV"),
    "hanging-caps": ("broken_adapters:CapabilitiesHang", "capabilities"),
    "crashing-prepare": ("broken_adapters:PrepareCrashes", "SIGSEGV"),
    "hanging-prepare": ("broken_adapters:PrepareHangs", "timed out"),
    "raising-expectations": (
        "broken_adapters:ExpectationsRaise",
        "expectations share not mounted",
    ),
    "raising-limits": ("broken_adapters:TimeLimitsRaise", "limits table missing"),
}
