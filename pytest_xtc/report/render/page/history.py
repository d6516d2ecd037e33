"""The history page (``xtc-conformance history``): the verdicts of several bundles side by
side, then a row per kernel (target and case) with its status and median time in each
bundle and a small trend line, searchable, filterable and sortable with the report page's
script (:mod:`.cases`). Bundles are shown in the order given (oldest first, as a trend
reads)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_xtc.report.parts.model import Report
from pytest_xtc.report.parts.records import CaseRecord
from pytest_xtc.report.render.page import cases
from pytest_xtc.report.render.page.sections import shown_status, table
from pytest_xtc.report.render.page.style import CSS, esc, status_class, status_sort
from pytest_xtc.report.render.text import human_time
from pytest_xtc.report.rules.profiles import PROFILES


@dataclass(frozen=True)
class Loaded:
    """One bundle as the history reads it."""

    name: str  # as given on the command line
    report: Report
    records: list[CaseRecord]

    @property
    def started(self) -> str:
        return min((r.started for r in self.report.runs if r.started), default="-")


def median_of(record: CaseRecord) -> float | None:
    value = (record.perf or {}).get("median_s")
    if isinstance(value, (int, float)) and math.isfinite(value) and value > 0:
        return float(value)
    return None


def statuses(bundle: Loaded) -> dict[tuple[str, str], str]:
    """(target, case) -> the status the bundle counts the case under."""
    entries = bundle.report.targets
    return {(r.target, r.case): shown_status(r, entries[r.target]) if r.target in entries
            else r.status for r in bundle.records}


def medians(bundle: Loaded) -> dict[tuple[str, str], float]:
    return {(r.target, r.case): m for r in bundle.records if (m := median_of(r)) is not None}


def trend_svg(values: Sequence[float | None]) -> str:
    """A line through the medians (log scale), a dot where a bundle has none."""
    known = [v for v in values if v]
    if len(known) < 2:
        return ""
    low, high = math.log(min(known)), math.log(max(known))
    span = high - low or 1.0
    step = 80 / max(1, len(values) - 1)
    points = [(i * step, 22 - 20 * (math.log(v) - low) / span) for i, v in enumerate(values) if v]
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    return (f'<svg class="trend" width="84" height="24" viewBox="-2 0 84 24" role="img">'
            f"<title>median times, oldest first</title>"
            f'<polyline points="{line}" fill="none" stroke="#0969da" stroke-width="1.5"/></svg>')


def _count(status: str, count: int, filtered: bool) -> str:
    """A status count; a filtered run's missing cases are "not selected", in grey."""
    if status == "missing" and filtered:
        return f'<span class="skip">{count} not selected</span>'
    return f'<span class="{status_class(status)}">{count} {esc(status)}</span>'


def _verdicts(bundles: Sequence[Loaded]) -> list[str]:
    targets = sorted({t for b in bundles for t in b.report.targets})
    header = ["bundle", "started", "results", *map(esc, targets)]
    rows = []
    for i, found in enumerate(bundles, 1):
        cells = [f"#{i} <span class=mono>{esc(found.name)}</span>", esc(found.started),
                 str(len(found.records))]
        for name in targets:
            entry = found.report.targets.get(name)
            if entry is None:
                cells.append("-")
                continue
            shown = []
            for profile in PROFILES:
                verdict = (entry.verdicts or {}).get(profile)
                if verdict is not None:
                    word = verdict.verdict.value
                    shown.append(f'{esc(profile)}: <span class="verdict v-{word.replace(" ", "-")}"'
                                 f">{esc(word)}</span>")
            counts = entry.counts or {}
            filtered = any(r.filters for r in found.report.runs_of(name))
            shown.append(", ".join(_count(s, counts[s], filtered)
                                   for s in status_sort(counts) if counts[s]))
            cells.append("<br>".join(shown))
        rows.append(cells)
    return table(header, rows)


def _row(key: tuple[str, str], seen: list[dict[tuple[str, str], str]],
         timed: list[dict[tuple[str, str], float]]) -> str:
    target, case = key
    marks = [s.get(key) for s in seen]
    latest = next((m for m in reversed(marks) if m), "-")
    values = [t.get(key) for t in timed]
    known = [v for v in values if v]
    ratio = known[-1] / known[0] if len(known) > 1 else None
    status_cells = " ".join(f'<span class="{status_class(m)}" title="#{i}: {esc(m)}">'
                            f"{esc(m[:4])}</span>" if m else '<span class="muted">-</span>'
                            for i, m in enumerate(marks, 1))
    times = "".join(f'<td class="n" data-v="{v if v else "Infinity"}">'
                    f"{esc(human_time(v)) if v else '-'}</td>" for v in values)
    ratio_cell = (f'<td class="n" data-v="{ratio!r}">{ratio:.2f}x</td>' if ratio is not None
                  else '<td class="n" data-v="Infinity">-</td>')
    words = " ".join([target, case, latest, *filter(None, marks)]).lower()
    return (f'<tr data-status="{esc(latest)}" data-key="{esc(words)}"><td>{esc(target)}</td>'
            f"<td class=mono>{esc(case)}</td><td>{status_cells}</td>{times}{ratio_cell}"
            f"<td>{trend_svg(values)}</td></tr>")


def render(bundles: Sequence[Loaded]) -> str:
    """The history page of ``bundles`` (oldest first)."""
    seen = [statuses(b) for b in bundles]
    timed = [medians(b) for b in bundles]
    keys = sorted({k for s in seen for k in s})
    latest = {next((s[k] for s in reversed(seen) if k in s), "-") for k in keys}
    options = "".join(f'<option value="{esc(s)}">{esc(s)}</option>' for s in status_sort(latest))
    head = ["target", "case", "status, oldest first",
            *(f"median #{i}" for i in range(1, len(bundles) + 1)), "last/first", "trend"]
    title = f"XTC conformance history: {len(bundles)} bundles"
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f'<meta http-equiv="Content-Security-Policy" content="{cases.csp()}">',
             f"<title>{esc(title)}</title><style>{CSS}</style></head><body>",
             f"<h1>{esc(title)}</h1>",
             f"<p class=muted>{len(keys)} cases, {len(set().union(*timed))} of them timed; "
             "bundles in the order given.</p>",
             '<h2 id="verdicts">Verdicts</h2>', *_verdicts(bundles),
             '<h2 id="kernels">Cases and median times</h2>',
             '<div class="controls"><label>Search <input id="search" type="search" '
             'placeholder="words of the case id, status" autocomplete="off"></label> '
             f'<label>Latest status <select id="status"><option value="">all</option>{options}'
             f'</select></label> <span id="shown" class="muted">{len(keys)} cases</span></div>',
             '<div class="scroll"><table id="cases" class="cases"><thead><tr>'
             + "".join(f'<th scope="col">{esc(h)}</th>' for h in head) + "</tr></thead><tbody>",
             *(_row(k, seen, timed) for k in keys), "</tbody></table></div>",
             "<p class=muted>last/first: the last bundle's median over the first's that timed "
             "the case (above 1: slower). A median alone is no comparison: xtc-conformance diff "
             "tests two bundles against their noise.</p>",
             f"<script>{cases.SCRIPT}</script></body></html>"]
    return "\n".join(parts) + "\n"
