"""``summary.md``: a bundle's report as Markdown, for people and CI job summaries.

Every string that came from outside this module (names, reasons, URLs, versions) goes
through :func:`~pytest_xtc.report.render.text.markdown`: it cannot add lines, cells or markup.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from pytest_xtc.report.parts.model import ProfileVerdict, Report, Verdict, read_report
from pytest_xtc.report.parts.reasons import ReasonCode
from pytest_xtc.report.render import check_lines as checks
from pytest_xtc.report.render.invalid_perf import invalid_lines, invalid_reason
from pytest_xtc.report.render.text import Markdown, markdown
from pytest_xtc.report.rules.profiles import PROFILES
from pytest_xtc.report.rules.verdicts import run_not_certifying, run_problems

NAME = "summary.md"
COUNTS = ("passed", "compiled", "failed", "invalid", "skipped", "not-supported", "waived",
          "missing")


def _row(cells: list[Any]) -> str:
    return "| " + " | ".join(markdown(c) for c in cells) + " |"


def _verdict_cell(verdict: ProfileVerdict) -> str:
    word = markdown(verdict.verdict.value)
    plain = verdict.verdict.holds or verdict.verdict is Verdict.NOT_APPLICABLE
    return word if plain else Markdown(f"**{word}**")


def _code(value: Any) -> str:
    """A plain name or digest as code; anything else escaped instead (a backtick would
    end the code span, and nothing is escaped inside one)."""
    text = str(value)
    return f"`{text}`" if re.fullmatch(r"[A-Za-z0-9._+-]+", text) else markdown(text)


def _count_cell(counts: Mapping[str, int], name: str) -> str:
    n = counts.get(name, 0)
    if name == "failed" and counts.get("xfailed"):
        return f"{n} ({counts['xfailed']} xfailed)"
    return str(n)


def render(report: Report | Mapping[str, Any], *, unused_waivers: bool = True) -> str:
    """summary.md of an assembled report (report.json's data is read first);
    ``unused_waivers``: list the suite's waivers that covered nothing (not in CI job
    summaries, where every job would repeat them)."""
    if not isinstance(report, Report):
        report = read_report(report)
    case_set, totals = report.case_set, report.totals or {}
    assert case_set is not None, "render an assembled report"
    lines = [
        "# XTC conformance report",
        "",
        f"Suite {markdown(report.suite.name)} {markdown(report.suite.version)}, "
        f"case set {_code(case_set.sha256[:16])} ({markdown(case_set.count)} cases), "
        f"{sum(totals.get(s, 0) for s in COUNTS if s != 'missing')} results.",
        "",
    ]
    if report.certifies:
        lines += ["**Certifies**: every run was a certification run (strict, expected-failure "
                  "files ignored, the suite's full case set).", ""]
    else:
        lines += ["**Does not certify** (development run): the verdicts below are for "
                  "information only.", ""]
    lines += _runs(report)
    header = ["target", "tier", "device", *COUNTS, *PROFILES]
    lines += [_row(header), _row(["---"] * len(header))]
    for name, entry in report.targets.items():
        cells = [name, entry.tier, entry.device or "-"]
        cells += [_count_cell(entry.counts or {}, c) for c in COUNTS]
        cells += [_verdict_cell(entry.verdict(p)) for p in PROFILES]
        lines.append(_row(cells))
    why = []
    for name, entry in report.targets.items():
        why += [f"- **{markdown(name)}**: {markdown(p.text)}" for p in run_problems(report, name)]
        for profile in PROFILES:
            verdict = entry.verdict(profile)
            if verdict.verdict.holds or verdict.codes == [ReasonCode.NO_REQUIRED_CASE]:
                continue
            own = [r.text for r in verdict.reasons if not r.code.run_level]
            why += [f"- **{markdown(name)}** {profile}: {markdown(r)}" for r in own]
    if why:
        lines += ["", "## Why not conformant", "", *why]
    lines += _waivers(report, unused_waivers)
    lines += checks_section(report)
    lines += perf_table(report)
    return "\n".join(lines) + "\n"


def checks_section(report: Report) -> list[str]:
    """Guard-band coverage and effective mantissa bits, per target."""
    found = checks.by_target(r for entry in report.targets.values() for r in entry.results or ())
    lines = [f"- {markdown(line)}" for target in sorted(found)
             for line in found[target].lines(target)]
    if not lines:
        return []
    return ["", "## What the checks saw", "", *lines, "",
            "Guard bands: the operands lie between sentinel-filled bands, and any write "
            "there fails the case (targets whose runtime works in place on the given "
            "buffers). Effective mantissa bits: the rounding errors of the random-input "
            "contractions, pooled, against honest summation (24 for float32 arithmetic, 11 "
            "for TF32 or float16 inputs)."]


def _runs(report: Report) -> list[str]:
    header = ["run", "certifies", "seed", "strict", "expectations ignored", "why not"]
    lines = ["## Runs", "", _row(header), _row(["---"] * len(header))]
    for i, run in enumerate(report.runs, 1):
        settings = run.settings
        why = run_not_certifying(run, report.suite.version)
        lines.append(_row([i, "no" if why else "yes", settings.seed, settings.strict,
                           settings.ignore_expectations, "; ".join(why) or "-"]))
    return [*lines, ""]


def _waivers(report: Report, unused_shown: bool = True) -> list[str]:
    by_id = {str(w.get("id")): w for w in report.waivers}
    waived = [(t, c, w) for t, e in report.targets.items()
              for c, w in sorted((e.waived or {}).items())]
    lines: list[str] = []
    if waived:
        lines += ["", "## Waived", ""]
        lines += [f"- {markdown(f'{t}-{c}')} (waiver {_code(w)}: "
                  f"{markdown(by_id.get(w, {}).get('url', '?'))})" for t, c, w in waived]
    used = report.waivers_used or {}
    unused = [w for w in by_id if not used.get(w)] if unused_shown else []
    if unused:
        lines += ["", "## Unused waivers", "",
                  "Waivers of the suite that covered no failure in this bundle (a waiver "
                  "unused on every target it names should be removed):", ""]
        lines += [f"- {_code(w)}: {markdown(by_id.get(w, {}).get('reason', ''))}"
                  for w in unused]
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


def perf_table(report: Report) -> list[str]:
    """Per target and op: median GFLOP/s, median fraction of the device's peak and median
    kernel time relative to numpy's, over the passed cases with a performance record."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for target, entry in report.targets.items():
        ops = {c["id"]: c.get("op", "?") for c in entry.case_set.cases}
        for result in entry.results or ():
            if result.perf is not None and result.status == "passed":
                groups[(target, ops.get(result.case, "?"))].append(result.perf)
    if not groups:
        return []
    header = ["target", "op", "cases", "median GFLOP/s", "median time vs numpy", "median % of peak"]
    lines = ["", "## Performance", "", _row(header), _row(["---"] * len(header))]
    methods: set[tuple[Any, ...]] = set()
    invalid = invalid_lines((t, r.case, r.perf) for t, e in report.targets.items()
                            for r in e.results or () if r.status == "passed")
    for (target, op), records in sorted(groups.items()):
        perfs = [p for p in records if not invalid_reason(p)]  # figures: valid ones only
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
            len(perfs) if len(perfs) == len(records)
            else f"{len(records)} ({len(records) - len(perfs)} invalid)",
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
    if invalid:
        lines += ["", "**Invalid performance records** (kernel times the device cannot "
                  "physically make, left out of the figures above; the results were checked "
                  "apart and the conformance verdicts do not depend on them):", ""]
        lines += [f"- {markdown(line)}" for line in invalid]
    return lines
