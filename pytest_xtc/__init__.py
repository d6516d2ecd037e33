"""pytest-xtc: a pytest plugin and conformance suite for the compilation targets of XTC."""

from pytest_xtc.core.adapter import (
    Artifact,
    Capabilities,
    OptionSpec,
    Probe,
    RunResult,
    TargetAdapter,
    TargetSpec,
    Tier,
)

__version__ = "0.1.0"
SUITE_VERSION = "0.1.0"

__all__ = [
    "SUITE_VERSION",
    "Artifact",
    "Capabilities",
    "OptionSpec",
    "Probe",
    "RunResult",
    "TargetAdapter",
    "TargetSpec",
    "Tier",
    "__version__",
]
