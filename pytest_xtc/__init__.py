"""pytest-xtc: a pytest plugin and conformance suite for the compilation targets of XTC.

The vendor API (docs/vendor-guide.md) is the names below; they are imported on first use,
so that a pytest session that does not use XTC pays nothing for them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_xtc.core.adapter import (
        ONCE,
        Artifact,
        Capabilities,
        CompileRejected,
        ExportedKernel,
        InfrastructureError,
        KernelCache,
        OptionSpec,
        Probe,
        RunResult,
        TargetAdapter,
        TargetSpec,
        Tier,
        Timing,
    )
    from pytest_xtc.core.cases.case import Case, Schedule
    from pytest_xtc.core.xtc import xtc_env

__version__ = "0.2.0"
SUITE_VERSION = "0.2.0"

_EXPORTS = {
    **dict.fromkeys(
        ("ONCE", "Artifact", "Capabilities", "CompileRejected", "ExportedKernel",
         "InfrastructureError",
         "KernelCache", "OptionSpec", "Probe", "RunResult", "TargetAdapter", "TargetSpec",
         "Tier", "Timing"),
        "pytest_xtc.core.adapter",
    ),
    "Case": "pytest_xtc.core.cases.case",
    "Schedule": "pytest_xtc.core.cases.case",
}

__all__ = [
    "ONCE",
    "SUITE_VERSION",
    "Artifact",
    "Capabilities",
    "Case",
    "CompileRejected",
    "ExportedKernel",
    "InfrastructureError",
    "KernelCache",
    "OptionSpec",
    "Probe",
    "RunResult",
    "Schedule",
    "TargetAdapter",
    "TargetSpec",
    "Tier",
    "Timing",
    "__version__",
    "xtc_env",
]


def __getattr__(name: str) -> Any:
    if name == "xtc_env":
        return importlib.import_module("pytest_xtc.core.xtc.xtc_env")
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'pytest_xtc' has no attribute {name!r}")
