"""The report page's case table: a row per case (target, case, status, phase, seconds to
compile and run, pytest's duration, the kernel's median time and time/numpy, the worst
error/bound ratio), with a search box, a status filter and sortable columns.

The one script of the page (:data:`SCRIPT`) does the searching, filtering and sorting in
the browser. It is inline, allowed by its SHA-256 in the page's Content-Security-Policy
(:func:`csp`) and nothing else is: no other script, no script from anywhere. Without it
(scripts off) the table is whole and readable."""

from __future__ import annotations

import base64
import hashlib
import math
from collections.abc import Mapping, Sequence

from pytest_xtc.report.parts.model import Report
from pytest_xtc.report.parts.records import CaseRecord
from pytest_xtc.report.render.page.sections import FAILING, shown_status
from pytest_xtc.report.render.page.style import esc, status_class, status_sort
from pytest_xtc.report.render.text import human_time

#: Search (every word of the box in the row's key), status filter, sort by a column's
#: ``data-v`` (numbers) or text; "N of M cases shown". Rows of ``table.cases``.
SCRIPT = """(function () {
  var table = document.getElementById("cases");
  if (!table) { return; }
  var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
  var box = document.getElementById("search"), pick = document.getElementById("status");
  var said = document.getElementById("shown");
  function apply() {
    var words = box.value.toLowerCase().split(/\\s+/).filter(Boolean), want = pick.value;
    var count = 0;
    rows.forEach(function (row) {
      var key = row.getAttribute("data-key");
      var ok = (!want || row.getAttribute("data-status") === want) &&
        words.every(function (w) { return key.indexOf(w) >= 0; });
      row.hidden = !ok;
      count += ok ? 1 : 0;
    });
    said.textContent = count + " of " + rows.length + " cases shown";
  }
  function value(row, i) {
    var cell = row.cells[i], v = cell.getAttribute("data-v");
    return v === null ? cell.textContent.toLowerCase() : parseFloat(v);
  }
  function sort(th, i) {
    var up = th.getAttribute("aria-sort") !== "ascending";
    Array.prototype.forEach.call(th.parentNode.cells, function (c) {
      c.removeAttribute("aria-sort");
    });
    th.setAttribute("aria-sort", up ? "ascending" : "descending");
    rows.sort(function (a, b) {
      var x = value(a, i), y = value(b, i);
      var order = x < y ? -1 : x > y ? 1 : 0;
      return up ? order : -order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  }
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
    th.tabIndex = 0;
    th.addEventListener("click", function () { sort(th, i); });
    th.addEventListener("keydown", function (e) { if (e.key === "Enter") { sort(th, i); } });
  });
  box.addEventListener("input", apply);
  pick.addEventListener("change", apply);
  apply();
})();
"""


def csp() -> str:
    """The page's Content-Security-Policy: nothing loaded, inline styles, data images, and
    :data:`SCRIPT` alone by its hash."""
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    return (f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
            f"script-src 'sha256-{digest}'")


def _number(value: object) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _cell(value: float | None, text: str) -> str:
    """A numeric cell: its text, its value for sorting (unknown values after the largest)."""
    key = "1e999" if value is None else "1e308" if math.isinf(value) else repr(value)
    return f'<td class="n" data-v="{key}">{esc(text)}</td>'


def _seconds(value: object) -> str:
    found = _number(value)
    return _cell(found, human_time(found) if found is not None else "-")


def _case(record: CaseRecord, status: str) -> str:
    """The case id; a link to its entry among the failures where it has one."""
    if status not in (*FAILING, "waived", "xfailed"):
        return esc(record.case)
    return f'<a href="#f-{esc(record.key)}">{esc(record.case)}</a>'


def row(record: CaseRecord, status: str) -> str:
    perf: Mapping[str, object] = record.perf or {}
    median, ratio = _number(perf.get("median_s")), _number(perf.get("time_vs_numpy"))
    worst = float("inf") if record.worst_ratio == "inf" else _number(record.worst_ratio)
    key = " ".join([record.target, record.case, status, record.phase or ""]).lower()
    return (f'<tr data-status="{esc(status)}" data-key="{esc(key)}">'
            f"<td>{esc(record.target)}</td><td class=mono>{_case(record, status)}</td>"
            f'<td><span class="{status_class(status)}">{esc(status)}</span></td>'
            f"<td>{esc(record.phase or '-')}</td>"
            + _seconds(record.compile_s) + _seconds(record.run_s) + _seconds(record.duration)
            + _seconds(median)
            + _cell(ratio, f"{ratio:.3g}" if ratio is not None else "-")
            + _cell(worst, f"{worst:.3g}" if worst is not None else "-") + "</tr>")


HEADER = ("target", "case", "status", "phase", "compile", "run", "duration", "median",
          "time/numpy", "error/bound")


def cases(report: Report, records: Sequence[CaseRecord]) -> list[str]:
    """The controls and the table of every case."""
    if not records:
        return ["<p class=muted>No case ran.</p>"]
    entries = report.targets
    shown = [(r, shown_status(r, entries[r.target]) if r.target in entries else r.status)
             for r in records]
    statuses = status_sort({s for _, s in shown})
    options = "".join(f'<option value="{esc(s)}">{esc(s)}</option>' for s in statuses)
    head = "".join(f'<th scope="col">{esc(h)}</th>' for h in HEADER)
    return ['<div class="controls"><label>Search <input id="search" type="search" '
            'placeholder="words of the case id, status, phase" autocomplete="off"></label> '
            f'<label>Status <select id="status"><option value="">all</option>{options}'
            f'</select></label> <span id="shown" class="muted">{len(records)} cases</span>'
            "</div>",
            '<div class="scroll"><table id="cases" class="cases"><thead><tr>' + head
            + "</tr></thead><tbody>", *(row(r, s) for r, s in shown), "</tbody></table></div>",
            '<p class="muted">Compile, run: the runner\'s seconds; duration: pytest\'s (setup '
            "and call); median: the kernel's median time; time/numpy: over numpy's for the "
            "same graph (above 1: slower); error/bound: the worst output's. Click a column "
            "to sort.</p>"]
