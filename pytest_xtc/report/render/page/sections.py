"""The report page's sections, each a list of HTML lines: verdicts and counts per target,
the ops x dtypes x placements matrix, the failures with their rerun lines, coverage and
the environment. Every string from a bundle goes through :func:`.style.esc`."""

from __future__ import annotations

import shlex
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_xtc.core.cases.identity import test_id
from pytest_xtc.report.parts.model import Report, Target
from pytest_xtc.report.parts.records import CaseRecord
from pytest_xtc.report.render.page.pictures import pictures
from pytest_xtc.report.render.page.style import (
    cell_class,
    esc,
    esc_block,
    status_class,
    status_sort,
)
from pytest_xtc.report.rules.profiles import PROFILES

#: Statuses listed among the failures (xfailed and waived ones in their own lists).
FAILING = ("failed", "error", "invalid")
#: Above this many failures of a target, its list starts folded.
FOLD = 50


def table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: int = 0) -> list[str]:
    """A table of already-escaped cells; the last ``numeric`` columns right-aligned."""
    head = "".join(f"<th>{h}</th>" for h in header)
    lines = [f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>']
    for row in rows:
        first = len(row) - numeric
        cells = "".join(f'<td class="n">{c}</td>' if i >= first else f"<td>{c}</td>"
                        for i, c in enumerate(row))
        lines.append(f"<tr>{cells}</tr>")
    return [*lines, "</tbody></table></div>"]


def shown_status(record: CaseRecord, entry: Target) -> str:
    """The status a case is counted under: waived and xfailed before the raw status."""
    if record.case in (entry.waived or {}):
        return "waived"
    return "xfailed" if record.pytest_outcome == "xfailed" else record.status


def verdicts(report: Report) -> list[str]:
    """The certification banner, then per target its tier, counts and verdict per profile."""
    if report.certifies:
        lines = ['<div class="banner b-yes"><b>Certifies</b>: every run was a certification '
                 "run (strict, expected-failure files ignored, the full case set).</div>"]
    else:
        why = "; ".join(report.not_certifying or ["unknown"])
        lines = ['<div class="banner b-no"><b>Does not certify</b> (development run: the '
                 f"verdicts are for information only): {esc(why)}</div>"]
    counted = sorted({k for e in report.targets.values() for k, n in (e.counts or {}).items()
                      if n})
    columns = status_sort(counted)
    filtered = {n for n in report.targets if any(r.filters for r in report.runs_of(n))}
    header = ["target", "tier", "device", *(esc(p) for p in PROFILES),
              *(_missing_label(filtered, report) if c == "missing" else esc(c) for c in columns)]
    rows = []
    for name, entry in report.targets.items():
        cells = [f'<b id="t-{esc(name)}">{esc(name)}</b>', esc(entry.tier),
                 esc(entry.device or "-")]
        for profile in PROFILES:
            found = (entry.verdicts or {}).get(profile)
            if found is None:
                cells.append("-")
                continue
            word = found.verdict.value
            why = "; ".join(found.texts)
            cells.append(f'<span class="verdict v-{word.replace(" ", "-")}" title="{esc(why)}">'
                         f"{esc(word)}</span>")
        counts = entry.counts or {}
        cells += [f'<span class="{_count_class(s, name in filtered, counts.get(s, 0))}">'
                  f"{counts.get(s, 0)}</span>" for s in columns]
        rows.append(cells)
    lines += table(header, rows, numeric=len(columns))
    for name, entry in report.targets.items():
        reasons = [(p, r) for p, v in (entry.verdicts or {}).items() for r in v.texts]
        if reasons:
            lines.append(f"<details><summary>{esc(name)}: why not conformant "
                         f"({len(reasons)})</summary><ul>")
            lines += [f"<li>{esc(p)}: {esc(r)}</li>" for p, r in reasons]
            lines.append("</ul></details>")
    return lines


def _missing_label(filtered: set[str], report: Report) -> str:
    """The header of the required cases with no result: "not selected" where every
    target's run was filtered (-k, --xtc-case...), "missing" where none was."""
    if not filtered:
        return "missing"
    return "not selected" if filtered == set(report.targets) else "missing / not selected"


def _count_class(status: str, filtered: bool, count: int) -> str:
    """A count's colour: its status's, grey for 0 and for a filtered run's missing."""
    return "skip" if not count or (status == "missing" and filtered) else status_class(status)


def matrix(name: str, entry: Target) -> list[str]:
    """Ops x (dtype, placement): each cell's counts per status, coloured by the worst."""
    kinds = {str(c.get("id")): c for c in entry.case_set.cases}
    cells: dict[tuple[str, str, str], Counter[str]] = defaultdict(Counter)
    for record in entry.results or ():
        kind = kinds.get(record.case) or dict(record.traits or {})
        ops = kind.get("ops")
        joined = "+".join(map(str, ops)) if isinstance(ops, (list, tuple)) else ""
        op = str(kind.get("op") or joined or record.case.split("-")[0])
        key = (op, str(kind.get("dtype", "-")), str(kind.get("placement", "-")))
        cells[key][shown_status(record, entry)] += 1
    if not cells:
        return [f"<p class=muted>{esc(name)}: no results.</p>"]
    columns = sorted({(d, p) for _, d, p in cells})
    ops = sorted({o for o, _, _ in cells})
    header = ["op", *(f"{esc(d)}<br><span class=muted>{esc(p)}</span>" for d, p in columns),
              "all"]
    lines = [f'<div class="scroll"><table class="matrix" data-target="{esc(name)}"><thead><tr>'
             + "".join(f"<th>{h}</th>" for h in header) + "</tr></thead><tbody>"]
    for op in ops:
        row = [f"<th>{esc(op)}</th>"]
        total: Counter[str] = Counter()
        for dtype, place in columns:
            found = cells.get((op, dtype, place), Counter())
            total += found
            row.append(_cell(found))
        row.append(_cell(total))
        lines.append("<tr>" + "".join(row) + "</tr>")
    return [*lines, "</tbody></table></div>"]


def _cell(counts: Mapping[str, int]) -> str:
    spans = " ".join(f'<span class="{status_class(s)}">{counts[s]} {esc(s)}</span>'
                     for s in status_sort(counts))
    return f'<td class="cell {cell_class(dict(counts))}">{spans or "-"}</td>'


def rerun_line(report: Report, name: str, record: CaseRecord) -> str:
    """One command line that reruns the case alone, as the run behind it did."""
    runs = report.runs_of(name)
    settings = runs[0].settings if runs else None
    parts = ["pytest", f"--xtc-target={name}", f"--xtc-case={test_id(name, record.case)}"]
    if settings is not None:
        parts += [f"--xtc-seed={settings.seed}"] if settings.seed is not None else []
        parts += ["--xtc-strict"] if settings.strict else []
        parts += ["--xtc-ignore-expectations"] if settings.ignore_expectations else []
        parts += [f"--xtc-cases={c}" for c in settings.cases]
        parts += [f"--xtc-{k}={v}" for k, v in (settings.adapter_options or {}).items()
                  if v is not None]  # as report.replay.option_flags
    return shlex.join(parts)


def failures(report: Report) -> list[str]:
    """Every failed, infra-error and invalid case (then the waived and xfailed ones),
    each with its phase, message and rerun line."""
    lines: list[str] = []
    for name, entry in report.targets.items():
        groups: dict[str, list[CaseRecord]] = defaultdict(list)
        for record in entry.results or ():
            status = shown_status(record, entry)
            if status in (*FAILING, "waived", "xfailed"):
                groups[status].append(record)
        for status in status_sort(groups):
            found = groups[status]
            opened = " open" if len(found) <= FOLD and status in FAILING else ""
            lines.append(f'<details{opened} data-target="{esc(name)}" data-status="{esc(status)}">'
                         f"<summary>{esc(name)}: {len(found)} {esc(status)}</summary>")
            for record in found:
                lines.append(f'<div class="fail" id="f-{esc(record.key)}">'
                             f'<b class="mono">{esc(record.key)}</b>'
                             f' <span class="{status_class(status)}">{esc(status)}</span>'
                             f" in {esc(record.phase or '?')}")
                if record.message:
                    lines.append(f"<pre>{esc_block(record.message[:4000])}</pre>")
                lines += pictures(record)
                lines.append(f"rerun: <code>{esc(rerun_line(report, name, record))}</code></div>")
            lines.append("</details>")
    return lines or ["<p>No case failed.</p>"]


def coverage(report: Report) -> list[str]:
    """What the catalog covers of each op's parameters (values, pairs of values)."""
    found: Mapping[str, Any] = report.suite.coverage or {}
    if not found:
        return ["<p class=muted>No coverage recorded.</p>"]
    rows = []
    for family, facts in sorted(found.items()):
        if not isinstance(facts, Mapping):
            continue  # a newer writer's shape: left out, not guessed
        values = facts.get("values")
        values = values if isinstance(values, Mapping) else {}
        shown = "; ".join(f"{p}: " + (", ".join(f"{v} ({n})" for v, n in c.items())
                                       if isinstance(c, Mapping) else str(c))
                          for p, c in values.items())
        complete = "complete" if facts.get("complete") else "<b class=bad>incomplete</b>"
        rows.append([esc(family), esc(facts.get("cases")),
                     f"{esc(facts.get('pairs_covered'))} of {esc(facts.get('pairs_feasible'))}",
                     complete, esc(shown)])
    return table(["op family", "cases", "pairs covered", "all-pairs", "values (cases)"], rows)


def _facts(facts: Sequence[tuple[str, Any]]) -> list[str]:
    """Name-value rows; a value that is a mapping (packages, devices) a table of its own."""
    rows = []
    for key, value in facts:
        if value is None:
            continue
        if isinstance(value, Mapping):
            inner = [[esc(k), f"<span class=mono>{esc(v)}</span>"] for k, v in
                     sorted(value.items(), key=lambda kv: str(kv[0]))]
            shown = "\n".join(table(["name", "value"], inner)) if inner else "-"
        elif isinstance(value, (list, tuple)):
            shown = "<br>".join(f"<span class=mono>{esc(v)}</span>" for v in value) or "-"
        else:
            shown = f"<span class=mono>{esc(value)}</span>"
        rows.append([esc(key), shown])
    return table(["", ""], rows)


def environment(report: Report) -> list[str]:
    """Per run: when, how long, the command, the system (each mapping a table); per target
    its versions."""
    lines = []
    for i, run in enumerate(report.runs, 1):
        took = f"{run.duration_s:.1f} s" if run.duration_s is not None else None
        facts: list[tuple[str, object]] = [("started", run.started), ("duration", took),
                 ("command", shlex.join(run.command.argv) if run.command else None),
                 ("seed", run.settings.seed), ("strict", run.settings.strict),
                 ("filters", list(run.filters) or "none"),
                 ("interrupted", run.interrupted or "no"), ("exit status", run.exit_status)]
        facts += sorted(run.system.items())
        lines += [f"<h3>Run {i}</h3>", *_facts(facts)]
    rows = [[esc(n), "\n".join(table(["package", "version"],
                                      [[esc(k), esc(v)] for k, v in e.versions.items()]))
             if e.versions else "-",
             esc((e.adapter or {}).get("distribution", "-"))] for n, e in report.targets.items()]
    return [*lines, "<h3>Targets</h3>", *table(["target", "versions", "adapter"], rows)]
