"""The report page's look: one inline stylesheet (no font, image or script fetched), the
colour of each status, and the HTML escaping every outside string goes through."""

from __future__ import annotations

import html

from pytest_xtc.report.render.text import visible

#: Status -> CSS class; a status not listed here (a newer writer's) gets ``other``.
STATUS_CLASS = {
    "passed": "ok", "waived": "waived", "xfailed": "xfail", "failed": "bad",
    "error": "infra", "invalid": "invalid", "skipped": "skip", "not-supported": "skip",
    "missing": "bad",
}
#: The order statuses are shown in, worst first; others follow alphabetically.
STATUS_ORDER = ("failed", "missing", "error", "invalid", "xfailed", "waived", "passed",
                "not-supported", "skipped")

CSS = """
:root { --ok:#1a7f37; --bad:#cf222e; --warn:#9a6700; --skip:#6e7781; --ink:#1f2328;
  --line:#d0d7de; --soft:#f6f8fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink);
  margin: 0 auto; max-width: 1280px; padding: 16px 24px 48px; }
h1 { font-size: 22px; margin: 8px 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px;
  border-bottom: 1px solid var(--line); padding-bottom: 4px; } h3 { font-size: 15px; }
nav a { margin-right: 12px; } code, .mono { font: 12px/1.4 ui-monospace, monospace; }
table { border-collapse: collapse; margin: 6px 0 12px; }
th, td { border: 1px solid var(--line); padding: 3px 7px; text-align: left;
  vertical-align: top; } th { background: var(--soft); position: sticky; top: 0; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.verdict { font-weight: 600; padding: 1px 6px; border-radius: 4px; }
.v-conformant, .v-conformant-with-waivers { background: #dafbe1; color: var(--ok); }
.v-not-conformant { background: #ffebe9; color: var(--bad); }
.v-not-applicable { background: var(--soft); color: var(--skip); }
.ok { color: var(--ok); } .bad { color: var(--bad); font-weight: 600; }
.infra, .invalid { color: var(--warn); font-weight: 600; } .xfail, .waived { color: #8250df; }
.skip, .other { color: var(--skip); }
td.cell { min-width: 92px; } td.c-ok { background: #dafbe1; } td.c-bad { background: #ffebe9; }
td.c-warn { background: #fff8c5; } td.c-skip { background: var(--soft); }
td.c-none { background: #fff; color: #aaa; }
.cell span { display: inline-block; margin-right: 6px; white-space: nowrap; }
details { margin: 6px 0; } summary { cursor: pointer; font-weight: 600; }
.fail { border-left: 4px solid var(--bad); padding: 4px 10px; margin: 8px 0;
  background: #fffafa; } .fail pre { white-space: pre-wrap; margin: 4px 0; }
.banner { padding: 8px 12px; border-radius: 6px; margin: 8px 0; }
.b-yes { background: #dafbe1; } .b-no { background: #fff8c5; }
svg { max-width: 100%; height: auto; } .muted { color: var(--skip); }
.scroll { max-width: 100%; overflow-x: auto; } .scroll table { margin: 0; }
.scroll + *, .scroll { margin-bottom: 12px; }
.controls { display: flex; flex-wrap: wrap; gap: 8px 16px; align-items: center;
  margin: 6px 0; } .controls input { width: 22em; max-width: 100%; font: inherit; }
#cases { font-size: 13px; } #cases th { cursor: pointer; white-space: nowrap; }
#cases th[aria-sort=ascending]::after { content: " \\25B2"; }
#cases th[aria-sort=descending]::after { content: " \\25BC"; }
.scroll:has(#cases) { max-height: 70vh; overflow-y: auto; }
.wrongmaps { display: flex; flex-wrap: wrap; gap: 12px; align-items: flex-end;
  margin: 6px 0; } .wrongmap { margin: 0; } .wrongmap figcaption { font-size: 12px; }
svg.wrong { border: 1px solid var(--line); image-rendering: pixelated; }
nav { display: flex; flex-wrap: wrap; gap: 4px 12px; } nav a { margin: 0; }
code, pre { overflow-wrap: anywhere; }
@media (max-width: 600px) {
  body { padding: 8px 10px 32px; font-size: 13px; }
  h1 { font-size: 18px; } h2 { font-size: 16px; }
  th, td { padding: 2px 4px; } td.cell { min-width: 0; }
  .controls input { width: 100%; }
}
"""


def esc(text: object) -> str:
    """Outside text for the page: on one line (:func:`visible`), HTML-escaped."""
    return html.escape(visible(text), quote=True)


def esc_block(text: object) -> str:
    """Outside text that may span lines (messages), each line made visible and escaped."""
    return "\n".join(esc(line) for line in str(text).splitlines())


def status_class(status: str) -> str:
    return STATUS_CLASS.get(status, "other")


def status_sort(statuses: object) -> list[str]:
    found = list(statuses)  # type: ignore[call-overload]
    known = [s for s in STATUS_ORDER if s in found]
    return known + sorted(s for s in found if s not in STATUS_ORDER)


def cell_class(counts: dict[str, int]) -> str:
    """A matrix cell's colour: red where a case failed, amber for infrastructure errors
    and invalid cases, grey where nothing ran, green where everything that ran passed."""
    if not counts:
        return "c-none"
    if counts.get("failed") or counts.get("missing"):
        return "c-bad"
    if counts.get("error") or counts.get("invalid"):
        return "c-warn"
    ran = sum(n for s, n in counts.items() if s not in ("skipped", "not-supported"))
    return "c-ok" if ran else "c-skip"
