"""CI job summaries: a run's report as Markdown, appended to the file that
``$GITHUB_STEP_SUMMARY`` names (GitHub Actions shows it on the run's page).

Written whenever the variable is set, with or without ``--xtc-report`` (without, the
plugin assembles the report in a temporary folder it removes). The text is summary.md's
(outside strings escaped: :func:`.text.markdown`) without the suite's unused waivers
(every job would repeat them), then every failure: failed, infrastructure error or
invalid, neither waived nor an expected failure, one line each with its phase and
message, at most :data:`FAILURES_SHOWN` and a count of the rest. Nothing is written when
the variable is unset or empty."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pytest_xtc.core.cases.identity import test_id
from pytest_xtc.report.parts.model import Report
from pytest_xtc.report.render import summary
from pytest_xtc.report.render.text import markdown
from pytest_xtc.report.rules.statuses import FAILING, case_status

VARIABLE = "GITHUB_STEP_SUMMARY"
FAILURES_SHOWN = 100
MESSAGE_CHARS = 200


def failures(report: Report) -> list[str]:
    """One Markdown line per failure of the report (every target), then how many more."""
    found = []
    for name, entry in report.targets.items():
        for record in entry.results or ():
            status = case_status(record, entry.waived or {})
            if status in FAILING:
                message = " ".join((record.message or "").split())[:MESSAGE_CHARS]
                found.append(f"- {markdown(test_id(name, record.case))}: **{status}** "
                             f"[{markdown(record.phase or '?')}] {markdown(message)}")
    if not found:
        return []
    more = len(found) - FAILURES_SHOWN
    shown = found[:FAILURES_SHOWN]
    if more > 0:
        shown.append(f"- ... and {more} more (the bundle's results.jsonl has them all)")
    return ["", f"## Failures ({len(found)})", "", *shown]


def render(report: Report) -> str:
    """The job summary of an assembled report."""
    return summary.render(report, unused_waivers=False) + "\n".join(failures(report)) + "\n"


def append(report: Report, environ: Mapping[str, str] = os.environ) -> Path | None:
    """Append ``report``'s job summary to $GITHUB_STEP_SUMMARY; the file written, or
    None when the variable is unset. Raises OSError when it cannot be written."""
    target = environ.get(VARIABLE, "")
    if not target:
        return None
    with open(target, "a", encoding="utf-8") as out:
        out.write(render(report))
    return Path(target)
