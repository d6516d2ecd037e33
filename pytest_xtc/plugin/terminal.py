"""The end of a session: per-target counts as a table, skip reasons grouped, the slowest
kernels with their GFLOP/s, the expected-failure entries this run did not use (when it
ran a target's whole case set), and ``--xtc-update-expectations``.

Its tables fit the terminal's width (80 columns without a terminal; reason lines stay
whole, for grep), coloured through pytest's own markup (``--color=no`` and ``NO_COLOR``
apply).
"""

from __future__ import annotations

import textwrap
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_xtc.core.adapter import Tier
from pytest_xtc.core.cases import expectations
from pytest_xtc.core.cases.identity import test_id
from pytest_xtc.core.cases.selectors import Traits
from pytest_xtc.core.outcome import Phase, Status
from pytest_xtc.plugin import state
from pytest_xtc.plugin.outcomes import WAIVED_KEY
from pytest_xtc.report.files import atomic
from pytest_xtc.report.render.check_lines import by_target
from pytest_xtc.report.render.invalid_perf import invalid_lines
from pytest_xtc.report.render.text import RATIO_HEADER, RATIO_NOTE, human_time, table_lines, visible

COLUMNS = (
    "passed",
    "compiled",  # compiled and inspected, not run (a compile-only tier): not a pass
    "failed",
    "infrastructure error",
    "invalid",
    "expected failure",
    "waived",  # a failure the suite's waiver file covers (report/rules/statuses.py)
    "not-supported",
    "skipped",
)
#: The counts table's headers, short enough for 80 columns.
HEADERS = {
    "infrastructure error": "infra error",
    "invalid": "invalid case",
    "expected failure": "xfailed",
    "not-supported": "unsupported",
}
SLOWEST = 5


@dataclass
class Result:
    target: str
    case: str
    column: str  # one of COLUMNS, as pytest saw it (an unexpected pass is "failed")
    status: str  # the runner's: what the target did
    phase: str
    message: str
    perf: dict[str, Any] | None
    traits: dict[str, Any] | None = None  # the case's properties, for expectations
    guarded: bool | None = None  # its operands were checked for writes out of bounds
    precision: dict[str, Any] | None = None  # its rounding-error sums (core/judging/precision.py)
    checks: dict[str, Any] | None = None  # each per-case check's facts (core/judging/checks)
    tier: str | None = None  # the target's tier when it ran (core.adapter.Tier)
    kernel_cached: bool | None = None  # its kernel came from the kernel cache (None: unused)

    @property
    def selectable(self) -> Traits | str:
        """What an expectation matches: the case's properties, else its id."""
        return Traits.from_dict(self.traits) if self.traits else self.case

    @property
    def executed(self) -> bool | None:
        """Whether its target's tier ran the kernels (None: not known)."""
        return None if not self.tier else self.tier == Tier.EXECUTE.value


class OutcomeCollector:
    """Gathers the outcome of every case (from xdist workers too) on the controller."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.results: list[Result] = []
        self.updated: list[Path] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        value = state.reported_outcome(report)
        if value is not None:
            column = state.shown_status(report, value["status"])
            if value["status"] == "failed" and any(k == WAIVED_KEY
                                                   for k, _ in report.user_properties):
                column = "waived"
            self.results.append(
                Result(
                    value["target"],
                    value["case"],
                    column,
                    value["status"],
                    value["phase"],
                    value["message"],
                    value.get("perf"),
                    value.get("traits"),
                    value.get("guarded"),
                    value.get("precision"),
                    value.get("checks"),
                    value.get("tier"),
                    value.get("kernel_cached"),
                )
            )

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.results:
            return
        write = terminalreporter.write_line
        width = min(terminalreporter._tw.fullwidth, 120)
        terminalreporter.write_sep("=", "XTC conformance")
        counts: dict[str, Counter[str]] = defaultdict(Counter)
        reasons: dict[str, Counter[str]] = defaultdict(Counter)
        for r in self.results:
            counts[r.target][r.column] += 1
            if r.column in ("compiled", "not-supported", "skipped"):
                reasons[r.target][f"{r.column}: {r.message}"] += 1
        targets = sorted(counts)
        columns = shown_columns(counts)
        rows = [[t, *(str(counts[t][c]) for c in columns)] for t in targets]
        header = ["target", *(HEADERS.get(c, c) for c in columns)]
        groups = table_lines(header, rows, width)
        for line in (*groups[0], *groups[1]):
            write(line, bold=True)
        for target, group in zip(targets, groups[2:], strict=True):
            bad = sum(counts[target][c] for c in ("failed", "infrastructure error", "invalid"))
            colour = {"red": True} if bad else {"green": True}
            if not bad and not counts[target]["passed"]:
                colour = {"yellow": True}
            for line in group:
                write(line, **colour)
        for target in sorted(reasons):
            for reason, n in reasons[target].most_common():
                # one line each (not wrapped: a reason is searched for as a whole)
                write(f"  {n} x {visible(reason)}", yellow=True)
        for line in kernel_lines(self.results):
            write(line)
        checks = by_target(self.results)
        for target in sorted(checks):
            for line in checks[target].lines(target):
                write(visible(line))
        for line in invalid_lines((r.target, r.case, r.perf) for r in self.results):
            write(visible(line), yellow=True)
        slowest = self.slowest()
        if slowest:
            write("")
            write(f"slowest kernels (median of {slowest[0][1]['repeat']} repeats):", bold=True)
            perf_rows = [
                [
                    test_id(target, case),
                    human_time(p["median_s"]),
                    "invalid" if p.get("invalid") else
                    f"{p['gflops']:.3g}" if p.get("gflops") else "-",
                    f"{p['time_vs_numpy']:.3g}" if p.get("time_vs_numpy") else "-",
                ]
                for (target, case), p in slowest
            ]
            perf_header = ["case", "median", "GFLOP/s", RATIO_HEADER]
            for group in table_lines(perf_header, perf_rows, width):
                for line in group:
                    write(line)
            for line in textwrap.wrap(RATIO_NOTE, width):
                write(line)
        for line in self.expectation_audit():
            write(visible(line), yellow=line.startswith("  "))
        for path in self.updated:
            write(f"expected-failure file for review (not applied): {visible(path)}")

    def slowest(self) -> list[tuple[tuple[str, str], dict[str, Any]]]:
        timed = [
            ((r.target, r.case), r.perf) for r in self.results if r.perf and r.perf.get("median_s")
        ]
        return sorted(timed, key=lambda item: -item[1]["median_s"])[:SLOWEST]

    def _expectation_files(self) -> dict[str, Path]:
        files = {}
        for adapter in state.adapters(self.config):
            path = adapter.expectations_file()
            if path is not None:
                files[adapter.name] = path
        return files

    def expectation_audit(self) -> list[str]:
        """Entries of the targets' expected-failure files that matched no case run here."""
        if self.config.getoption("xtc_ignore_expectations"):
            return []
        ran: dict[str, list[str]] = defaultdict(list)
        seen: dict[str, list[Result]] = defaultdict(list)
        for r in self.results:
            ran[r.target].append(r.case)
            seen[r.target].append(r)
        complete = self.complete_targets(ran)
        exploring = bool(self.config.getoption("xtc_explore", None))
        lines = []
        for target, path in self._expectation_files().items():
            if target not in complete:
                continue  # a filtered run: an unused entry says nothing
            for entry in expectations.load(path):
                if not exploring and "-explore-" in (entry.selector.pattern or ""):
                    continue  # entries for explored schedules: audited when exploring
                if not any(entry.applies(r.executed) for r in seen[target]):
                    continue  # an entry for the other tier (executed: true or false)
                if not any(entry.matches(r.selectable, executed=r.executed)
                           for r in seen[target]):
                    lines.append(
                        f"  {path.name}:{entry.line}: {entry.pattern!r} matched no case "
                        f"of {target} in this run"
                    )
        return ["", "expected-failure entries unused:", *lines] if lines else []

    def complete_targets(self, ran: dict[str, list[str]]) -> set[str]:
        """The targets whose whole case set ran, the built-in catalog included (no -k, -m,
        node id, shard, --xtc-case or --xtc-only-cases left any of their cases out): the
        expected-failure entries are written against the catalog."""
        session = state.get(self.config)
        if session is None or session.case_ids or not session.builtin:
            return set()
        return {
            adapter.name
            for adapter in session.adapters
            if {c.id for c in session.planned(adapter)} <= set(ran[adapter.name])
        }

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        folder = self.config.getoption("xtc_update_expectations")
        if not folder or hasattr(self.config, "workerinput"):
            return
        self.updated = write_updates(Path(folder), self._expectation_files(), self.results)


def kernel_lines(results: list[Result]) -> list[str]:
    """Per target, how many kernels came from the kernel cache (docs/caches.md)."""
    kept: dict[str, Counter[bool]] = defaultdict(Counter)
    for r in results:
        if r.kernel_cached is not None:
            kept[r.target][r.kernel_cached] += 1
    return [f"{t}: kernels from the cache {n[True]}, compiled {n[False]}"
            for t, n in sorted(kept.items())]


def shown_columns(counts: dict[str, Counter[str]]) -> list[str]:
    """The table's columns: ``compiled`` where a case was compiled only, and then no
    ``passed`` where none passed (a compile-only run: nothing ran, nothing passed);
    ``waived`` where a failure was waived."""
    compiled = any(c["compiled"] for c in counts.values())
    hidden = set() if compiled else {"compiled"}
    if compiled and not any(c["passed"] for c in counts.values()):
        hidden.add("passed")
    if not any(c["waived"] for c in counts.values()):
        hidden.add("waived")  # shown where the suite waived a failure
    return [c for c in COLUMNS if c not in hidden]


def write_updates(folder: Path, files: dict[str, Path], results: list[Result]) -> list[Path]:
    """Write, per target, its expected-failure file as this run says it should read: the
    entries that caught a failure kept, new entries for new failures (a case id each, to be
    widened by hand), entries that caught nothing or a pass dropped. Never applied: the
    files go to ``folder`` for review."""
    by_target: dict[str, list[Result]] = defaultdict(list)
    for r in results:
        by_target[r.target].append(r)
    written = []
    folder.mkdir(parents=True, exist_ok=True)
    for target, mine in sorted(by_target.items()):
        old = expectations.load(files[target]) if target in files else ()
        failed = [r for r in mine if r.status == Status.FAILED.value]
        worked = (Status.PASSED.value, Status.COMPILED.value)
        passed = [r for r in mine if r.status in worked]
        kept = [
            e
            for e in old
            if not any(e.applies(r.executed) for r in mine)  # the other tier's: not judged
            or (any(e.matches(r.selectable, executed=r.executed) for r in failed)
            and not any(e.matches(r.selectable, executed=r.executed) for r in passed))
        ]
        new = [
            expectations.entry(
                r.case,
                Phase(r.phase).stage,
                r.message.splitlines()[0][:200],
                "TODO: issue URL",
            )
            for r in failed
            if not any(e.matches(r.selectable, executed=r.executed) for e in kept)
        ]
        name = files[target].name if target in files else f"{target}.expectations.yaml"
        path = folder / name
        atomic.write_text(path, expectations.dumps([*kept, *new]))
        written.append(path)
    return written
