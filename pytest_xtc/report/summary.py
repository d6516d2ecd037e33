"""``summary.md``: a bundle's report as Markdown, for people and CI job summaries."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from pytest_xtc.report import checks
from pytest_xtc.report.profiles import PROFILES
from pytest_xtc.report.verdicts import HOLDS, NOT_APPLICABLE, run_not_certifying, run_problems

NAME = "summary.md"
COUNTS = ("passed", "failed", "invalid", "skipped", "not-supported", "waived", "missing")


def _row(cells: list[Any]) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def _verdict_cell(verdict: Mapping[str, Any]) -> str:
    word = verdict["verdict"]
    return word if word in (*HOLDS, NOT_APPLICABLE) else f"**{word}**"


def _count_cell(counts: Mapping[str, int], name: str) -> str:
    n = counts.get(name, 0)
    if name == "failed" and counts.get("xfailed"):
        return f"{n} ({counts['xfailed']} xfailed)"
    return str(n)


def render(report: Mapping[str, Any]) -> str:
    case_set = report["case_set"]
    lines = [
        "# XTC conformance report",
        "",
        f"Suite {report['suite']['name']} {report['suite']['version']}, case set "
        f"`{case_set['sha256'][:16]}` ({case_set['count']} cases), "
        f"{sum(report['totals'].get(s, 0) for s in COUNTS if s != 'missing')} results.",
        "",
    ]
    if report.get("certifies"):
        lines += ["**Certifies**: every run was a certification run (strict, expected-failure "
                  "files ignored, the suite's full case set).", ""]
    else:
        lines += ["**Does not certify** (development run): the verdicts below are for "
                  "information only.", ""]
    lines += _runs(report)
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
            if verdict["verdict"] in HOLDS or verdict["reasons"] == ["no required case"]:
                continue
            own = [r for r in verdict["reasons"] if r not in general]
            why += [f"- **{name}** {profile}: {r}" for r in own]
    if why:
        lines += ["", "## Why not conformant", "", *why]
    lines += _waivers(report)
    lines += checks_section(report)
    lines += perf_table(report)
    return "\n".join(lines) + "\n"


def checks_section(report: Mapping[str, Any]) -> list[str]:
    """Guard-band coverage and effective mantissa bits, per target."""
    records = [r for entry in report["targets"].values() for r in entry["results"]]
    found = checks.by_target(records)
    lines = [f"- {line}" for target in sorted(found) for line in found[target].lines(target)]
    if not lines:
        return []
    return ["", "## What the checks saw", "", *lines, "",
            "Guard bands: the operands lie between sentinel-filled bands, and any write "
            "there fails the case (targets whose runtime works in place on the given "
            "buffers). Effective mantissa bits: the rounding errors of the random-input "
            "contractions, pooled, against honest summation (24 for float32 arithmetic, 11 "
            "for TF32 or float16 inputs)."]


def _runs(report: Mapping[str, Any]) -> list[str]:
    header = ["run", "certifies", "seed", "strict", "expectations ignored", "why not"]
    lines = ["## Runs", "", _row(header), _row(["---"] * len(header))]
    version = str(report["suite"]["version"])
    for i, run in enumerate(report["runs"], 1):
        settings = run.get("settings") or {}
        why = run_not_certifying(run, version)
        lines.append(_row([i, "no" if why else "yes", settings.get("seed"),
                           settings.get("strict"), settings.get("ignore_expectations"),
                           "; ".join(why) or "-"]))
    return [*lines, ""]


def _waivers(report: Mapping[str, Any]) -> list[str]:
    by_id = {str(w.get("id")): w for w in report.get("waivers") or []}
    waived = [(t, c, w) for t, e in report["targets"].items()
              for c, w in sorted(e["waived"].items())]
    lines: list[str] = []
    if waived:
        lines += ["", "## Waived", ""]
        lines += [f"- {t}-{c} (waiver `{w}`: {by_id.get(w, {}).get('url', '?')})"
                  for t, c, w in waived]
    used = report.get("waivers_used") or {}
    unused = [w for w in by_id if not used.get(w)]
    if unused:
        lines += ["", "## Unused waivers", "",
                  "Waivers of the suite that covered no failure in this bundle (a waiver "
                  "unused on every target it names should be removed):", ""]
        lines += [f"- `{w}`: {by_id.get(w, {}).get('reason', '')}" for w in unused]
    return lines


# --- Performance table ----------------------------------------------------------------
# Fed by the per-case ``perf`` records of passed cases (pytest_xtc/perf.py): ``gflops`` (of
# the median kernel time), ``median_s`` and ``numpy_median_s`` (numpy's time for the same
# graph on the host), ``peak_fraction``, and the method (repeat, number, min_repeat_ms).
# Performance is recorded with its method; it never decides conformance.


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _median_cell(values: list[float | None], form: str) -> str:
    present = [v for v in values if v is not None]
    return form.format(statistics.median(present)) if present else "-"


def _ratio_cell(ratios: list[float | None]) -> str:
    present = [r for r in ratios if r is not None]
    if not present:
        return "-"
    ratio = statistics.median(present)
    return f"{ratio:.2f}x" if ratio >= 0.1 else f"{ratio:.2g}x"


def perf_table(report: Mapping[str, Any]) -> list[str]:
    """Per target and op: median GFLOP/s, median fraction of the device's peak and median
    kernel time relative to numpy's, over the passed cases with a performance record."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for target, entry in report["targets"].items():
        ops = {c["id"]: c.get("op", "?") for c in entry["case_set"]["cases"]}
        for result in entry["results"]:
            perf = result.get("perf")
            if isinstance(perf, Mapping) and result.get("status") == "passed":
                groups[(target, ops.get(result["case"], "?"))].append(perf)
    if not groups:
        return []
    header = ["target", "op", "cases", "median GFLOP/s", "median time vs numpy", "median % of peak"]
    lines = ["", "## Performance", "", _row(header), _row(["---"] * len(header))]
    methods: set[tuple[Any, ...]] = set()
    for (target, op), perfs in sorted(groups.items()):
        ratios = []
        for p in perfs:
            ours, theirs = _number(p.get("median_s")), _number(p.get("numpy_median_s"))
            ratios.append(ours / theirs if ours is not None and theirs else None)
            if "repeat" in p:
                methods.add((p.get("repeat"), p.get("number"), p.get("min_repeat_ms")))
        fractions = [_number(p.get("peak_fraction")) for p in perfs]
        cells = [
            target,
            op,
            len(perfs),
            _median_cell([_number(p.get("gflops")) for p in perfs], "{:.2f}"),
            _ratio_cell(ratios),
            _median_cell([f * 100 if f is not None else None for f in fractions], "{:.1f}%"),
        ]
        lines.append(_row(cells))
    how = "; ".join(
        f"repeat {r}, number {n}, min_repeat_ms {m}" for r, n, m in sorted(methods, key=str)
    )
    lines += [
        "",
        "Kernel times through XTC's evaluator"
        + (f" ({how})" if how else "")
        + "; numpy evaluates the same graph on the host in the case's dtype (its BLAS "
        "on one thread where threadpoolctl is present), timed the same way (time vs "
        "numpy below 1x: the kernel is faster). GFLOP/s count "
        "2MNK per matmul and 2·N·OH·OW·F·R·S·C per conv2d. Performance never decides "
        "conformance.",
    ]
    return lines
