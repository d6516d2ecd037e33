"""``summary.md``: a bundle's report as Markdown, for people and CI job summaries."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from pytest_xtc.verdict import CONFORMANT, NOT_APPLICABLE, PROFILES

COUNTS = ("passed", "failed", "skipped", "not-supported", "waived", "missing")


def _row(cells: list[Any]) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def _verdict_cell(verdict: Mapping[str, Any]) -> str:
    word = verdict["verdict"]
    return word if word in (CONFORMANT, NOT_APPLICABLE) else f"**{word}**"


def _count_cell(counts: Mapping[str, int], name: str) -> str:
    n = counts.get(name, 0)
    if name == "failed" and counts.get("xfailed"):
        return f"{n} ({counts['xfailed']} xfailed)"
    return str(n)


def render(report: Mapping[str, Any]) -> str:
    from pytest_xtc.bundle import run_problems

    case_set = report["case_set"]
    lines = [
        "# XTC conformance report", "",
        f"Suite {report['suite']['name']} {report['suite']['version']}, case set "
        f"`{case_set['sha256'][:16]}` ({case_set['count']} cases), "
        f"{sum(report['totals'].get(s, 0) for s in COUNTS if s != 'missing')} results.", "",
    ]
    header = ["target", "tier", "device", *COUNTS, *PROFILES]
    lines += [_row(header), _row(["---"] * len(header))]
    for name, entry in report["targets"].items():
        cells = [name, entry.get("tier", ""), entry.get("device") or "-"]
        cells += [_count_cell(entry["counts"], c) for c in COUNTS]
        cells += [_verdict_cell(entry["verdicts"][p]) for p in PROFILES]
        lines.append(_row(cells))
    why = []
    for name, entry in report["targets"].items():
        general = run_problems(report, name)
        why += [f"- **{name}**: {p}" for p in general]
        for profile in PROFILES:
            verdict = entry["verdicts"][profile]
            if verdict["verdict"] in (CONFORMANT, NOT_APPLICABLE):
                continue
            own = [r for r in verdict["reasons"] if r not in general]
            why += [f"- **{name}** {profile}: {r}" for r in own]
    if why:
        lines += ["", "## Why not conformant", "", *why]
    waived = [(t, c, p) for t, e in report["targets"].items() for c, p in e["waived"].items()]
    if waived:
        lines += ["", "## Waived", "", *(f"- {t}-{c} (waiver `{p}`)" for t, c, p in waived)]
    lines += perf_table(report)
    return "\n".join(lines) + "\n"


# --- Performance table ----------------------------------------------------------------
# Fed by per-case ``perf`` dicts in the results, when the runner records them. Assumed
# keys (adapt here when the Outcome's perf record is settled): ``gflops`` (GFLOP/s of the
# median kernel time), ``median_s`` and ``numpy_median_s`` (numpy's time for the same
# case). Performance is recorded with its method; it never decides conformance.


def perf_table(report: Mapping[str, Any]) -> list[str]:
    """Per target and op: median GFLOP/s and median time relative to numpy."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for target, entry in report["targets"].items():
        ops = {c["id"]: c.get("op", "?") for c in entry["case_set"]["cases"]}
        for result in entry["results"]:
            perf = result.get("perf")
            if isinstance(perf, Mapping) and result.get("status") == "passed":
                groups[(target, ops.get(result["case"], "?"))].append(perf)
    if not groups:
        return []
    lines = ["", "## Performance", "", _row(["target", "op", "cases", "median GFLOP/s",
                                               "median time vs numpy"]), _row(["---"] * 5)]
    for (target, op), perfs in sorted(groups.items()):
        gflops = [float(p["gflops"]) for p in perfs if isinstance(p.get("gflops"), (int, float))]
        ratios = [float(p["median_s"]) / float(p["numpy_median_s"]) for p in perfs
                  if isinstance(p.get("median_s"), (int, float))
                  and isinstance(p.get("numpy_median_s"), (int, float)) and p["numpy_median_s"]]
        cells = [target, op, len(perfs),
                 f"{statistics.median(gflops):.2f}" if gflops else "-",
                 f"{statistics.median(ratios):.2f}x" if ratios else "-"]
        lines.append(_row(cells))
    return lines
