"""The formats a bundle is written in, besides its data (results.jsonl, report.json).

Each is a file rendered from the report and the records. Adding a format is one module
that renders it and one line here: the bundle writer, the manifest, verify and merge
take it from this list. A ``checked`` format is rendered again by ``verify`` and must
match byte for byte (summary.md); an unchecked one is covered by its checksum only (the
chart and report.html, whose bytes depend on the plotting library's version).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pytest_xtc.report.parts.model import Report
from pytest_xtc.report.parts.records import CaseRecord
from pytest_xtc.report.render import chart, page, summary

Render = Callable[[Report, Sequence[CaseRecord]], "str | None"]


@dataclass(frozen=True)
class Format:
    name: str  # the file's name in the bundle
    render: Render  # its text, or None when there is nothing to show
    required: bool  # every bundle holds it
    checked: bool  # verify renders it again and compares


FORMATS: tuple[Format, ...] = (
    Format(summary.NAME, lambda report, records: summary.render(report), True, True),
    Format(chart.PLOT, lambda report, records: chart.render(records),
           False, False),
    # always written; not required (bundles of earlier versions have none), not checked
    # (it holds the chart, whose bytes depend on matplotlib's version)
    Format(page.NAME, page.render, False, False),
)
