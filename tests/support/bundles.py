"""Bundles for tests: one written by a real host run, and one read as JSON data for tests
that alter or compare its contents."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from pytest_xtc.report import bundle


def load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    """:func:`pytest_xtc.report.bundle.read`, as JSON data."""
    report, records, problems = bundle.read(path)
    return report.to_dict(), [r.to_dict() for r in records], problems


#: a few host cases; relu float64 fails (XTC's known bug, with expectations ignored)
FEW = "relu-float32-5x7 or matmul-float32-13x11x7-tile or relu-float64-5x7-none"


def host_bundle(work: Path, keyword: str = FEW) -> Path:
    """The bundle of a real host run of the cases ``-k keyword`` selects (:data:`FEW`),
    written in ``work``."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--xtc-target=host",
         "--xtc-ignore-expectations", "--xtc-report=rep", "-k", keyword],
        cwd=work, capture_output=True, text=True, timeout=600, check=False)
    assert (work / "rep" / bundle.MANIFEST).is_file(), done.stdout[-3000:] + done.stderr
    return work / "rep"
