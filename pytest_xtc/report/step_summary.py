"""CI job summaries: a finished bundle's summary.md appended to the file that
``$GITHUB_STEP_SUMMARY`` names (GitHub Actions shows it on the run's page; the text is
summary.md's, whose outside strings are already escaped: :func:`.text.markdown`).
Nothing is written when the variable is unset or empty."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pytest_xtc.report.render import summary

VARIABLE = "GITHUB_STEP_SUMMARY"


def append(bundle_dir: Path, environ: Mapping[str, str] = os.environ) -> Path | None:
    """Append ``bundle_dir``'s summary.md to $GITHUB_STEP_SUMMARY; the file written, or
    None when the variable is unset. Raises OSError when it cannot be written."""
    target = environ.get(VARIABLE, "")
    if not target:
        return None
    text = (bundle_dir / summary.NAME).read_text(encoding="utf-8")
    with open(target, "a", encoding="utf-8") as out:
        out.write(text if text.endswith("\n") else text + "\n")
    return Path(target)
