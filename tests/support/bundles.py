"""A bundle read as JSON data, for tests that alter or compare its contents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_xtc.report import bundle


def load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    """:func:`pytest_xtc.report.bundle.read`, as JSON data."""
    report, records, problems = bundle.read(path)
    return report.to_dict(), [r.to_dict() for r in records], problems
