"""``report.html``: a bundle's report as one self-contained page for people. No pytest.

One HTML file with its stylesheet, its one script and the performance chart (perf.svg)
inline: it loads nothing (no script, font, image or stylesheet from anywhere; the
Content-Security-Policy says so and allows the inline script by its hash), so it opens from
a CI artifact, a mail attachment or a machine without network. Sections: per target a
verdict per profile and the counts; every case as a row (status, phase, seconds,
time/numpy) to search, filter and sort (:mod:`.cases`); a matrix of ops x dtypes x
placements with each cell's counts per status, coloured by the worst; every failure with
its message, rerun line and a picture of where its wrong elements lie (:mod:`.pictures`;
folded where a target has many, so that 5,000 cases stay readable); the chart; what the
catalog covers; the environment of every run, as tables. Readable down to a 420 px wide
screen (wide tables scroll on their own). Given a comparison with a baseline bundle
(:mod:`pytest_xtc.report.rules.comparison`), the changes come first.

Plain standard-library string building (``html.escape``): a template engine (Jinja2)
would be a dependency of every install for one page.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pytest_xtc.report.parts.model import Report
from pytest_xtc.report.parts.records import CaseRecord
from pytest_xtc.report.render import chart
from pytest_xtc.report.render.page import cases, sections
from pytest_xtc.report.render.page.style import CSS, esc

if TYPE_CHECKING:
    from pytest_xtc.report.rules.comparison import Comparison

NAME = "report.html"


def inline_svg(svg: str) -> str:
    """matplotlib's SVG without its XML prologue and DOCTYPE (inline SVG in HTML5)."""
    start = svg.find("<svg")
    return svg[start:] if start >= 0 else ""


def _results(report: Report, records: Sequence[CaseRecord]) -> list[CaseRecord]:
    """Every case's record: those given, else those the report's targets hold."""
    return list(records) or [r for e in report.targets.values() for r in e.results or ()]


def render(report: Report, records: Sequence[CaseRecord],
           comparison: Comparison | None = None) -> str:
    """The page of an assembled report (and its comparison with a baseline, if given)."""
    suite, case_set = report.suite, report.case_set
    title = f"XTC conformance: {', '.join(report.targets) or 'no target'}"
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f'<meta http-equiv="Content-Security-Policy" content="{cases.csp()}">',
             f"<title>{esc(title)}</title><style>{CSS}</style></head><body>",
             f"<h1>{esc(title)}</h1>",
             f"<p class=muted>Suite {esc(suite.name)} {esc(suite.version)}, case set "
             f"<code>{esc(case_set.sha256[:16]) if case_set else '-'}</code> "
             f"({case_set.count if case_set else 0} cases), {len(records)} results.</p>"]
    nav = [("verdicts", "Verdicts"), ("cases-list", "Cases"), ("matrix", "Matrix"),
           ("failures", "Failures"),
           ("performance", "Performance"), ("coverage", "Coverage"),
           ("environment", "Environment")]
    if comparison is not None:
        nav.insert(0, ("changes", "Changes"))
    parts.append("<nav>" + "".join(f'<a href="#{k}">{v}</a>' for k, v in nav) + "</nav>")
    if comparison is not None:
        from pytest_xtc.report.render.page.changes import changes

        parts += ['<h2 id="changes">Changes since the baseline</h2>', *changes(comparison)]
    parts += ['<h2 id="verdicts">Verdicts</h2>', *sections.verdicts(report)]
    parts += ['<h2 id="cases-list">Cases</h2>', *cases.cases(report, _results(report, records))]
    parts.append('<h2 id="matrix">Ops x dtypes x placements</h2>')
    for name, entry in report.targets.items():
        parts += [f"<h3>{esc(name)}</h3>", *sections.matrix(name, entry)]
    parts += ['<h2 id="failures">Failures</h2>', *sections.failures(report)]
    parts.append('<h2 id="performance">Performance</h2>')
    svg = chart.render(records) if records else None
    if svg:
        # its own text: matplotlib escapes the labels (case ids) it writes
        parts.append(f'<div class="chart">{inline_svg(svg)}</div>')
    else:
        parts.append("<p class=muted>No chart: no performance figures, or matplotlib is "
                     "not installed (pip install 'pytest-xtc[report]').</p>")
    parts += ['<h2 id="coverage">Coverage of the catalog</h2>', *sections.coverage(report)]
    parts += ['<h2 id="environment">Environment</h2>', *sections.environment(report)]
    parts.append(f"<script>{cases.SCRIPT}</script></body></html>")
    return "\n".join(parts) + "\n"
