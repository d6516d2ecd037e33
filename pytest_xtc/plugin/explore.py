"""Exploration and shrinking in pytest: ``--xtc-explore=N`` adds, to the cases collected,
the schedules XTC's search strategies pick (:mod:`pytest_xtc.exploration.explore`);
``--xtc-fuzz=N`` adds N random cases (:mod:`pytest_xtc.exploration.fuzz`), each failure
shrunk;
``--xtc-shrink`` shrinks each failing case to the smallest that fails the same way
(:mod:`pytest_xtc.exploration.shrink`) and says how to rerun it. :func:`add_options` declares the
options, :func:`configure` registers the hooks when one is given."""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_xtc.core.cases.case import Case
from pytest_xtc.core.cases.identity import test_id
from pytest_xtc.core.execution.settings import Settings
from pytest_xtc.exploration import explore, fuzz, shrink, tally
from pytest_xtc.plugin import options, state
from pytest_xtc.report.replay import option_flags

SHRUNK_KEY = "xtc_shrunk"


def configure(config: pytest.Config) -> None:
    """Register the hooks of this module when exploration or shrinking is asked for."""
    if (config.getoption("xtc_explore", None) or config.getoption("xtc_shrink", False)
            or config.getoption("xtc_fuzz", None)):
        config.pluginmanager.register(ExploreHooks(config), "xtc-explore-hooks")


def explored_cases(config: pytest.Config, cases: Sequence[Case]) -> list[Case]:
    """The explored cases of ``cases`` under ``--xtc-explore`` (none without it)."""
    pool = config.getoption("xtc_explore", None)
    if not pool:
        return []
    return _plan(config, cases).cases


def fuzz_cases(config: pytest.Config) -> list[Case]:
    """The ``--xtc-fuzz`` cases (none without it), drawn from ``--xtc-fuzz-seed``."""
    count = config.getoption("xtc_fuzz", None)
    if not count:
        return []
    return fuzz.cases(count, config.getoption("xtc_fuzz_seed", 0))


def _plan(config: pytest.Config, cases: Sequence[Case]) -> explore.Plan:
    cached = config.stash.get(_PLAN, None)
    if cached is None:
        cached = explore.plan(cases, config.getoption("xtc_explore"), config.getoption("xtc_seed"))
        config.stash[_PLAN] = cached
    return cached


_PLAN = pytest.StashKey[explore.Plan]()


def shrink_dir(config: pytest.Config) -> Path:
    chosen = config.getoption("xtc_shrink_dir", None)
    if chosen:
        return Path(chosen)
    report = config.getoption("xtc_report", None)
    root = config.invocation_params.dir
    return root / report / "shrunk" if report else root / options.DEFAULT_SHRINK_DIR


def _settings(config: pytest.Config) -> Settings:
    """The runner's settings a shrinking run needs: seed, isolation, time limits (the
    kernels run once; no performance)."""
    limits = {
        phase: value
        for phase in ("compile", "run")
        if (value := config.getoption(f"xtc_{phase}_timeout", None)) is not None
    }
    return Settings(base_seed=config.getoption("xtc_seed"),
                    isolate=not config.getoption("xtc_no_isolation"),
                    repeat_check=config.getoption("xtc_repeat_check"),
                    limits=limits, perf=False)


class ExploreHooks:
    """Shrinks failures where they ran; tallies explored outcomes per strategy."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.rows: list[tuple[str, str, str, str]] = []
        self.shrunk: list[dict[str, Any]] = []

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, Any, None]:
        made = yield
        report: pytest.TestReport = made.get_result()
        if call.when != "call" or not report.failed or hasattr(report, "wasxfail"):
            return
        funcargs = getattr(item, "funcargs", {})
        adapter, case = funcargs.get("xtc_adapter"), funcargs.get("xtc_case")
        fuzzed = case is not None and fuzz.is_fuzz(case)  # a fuzz failure is always shrunk
        if not (self.config.getoption("xtc_shrink") or fuzzed):
            return
        outcome = getattr(funcargs.get("xtc_outcome"), "outcome", None)  # a run PendingCase
        if adapter is None or case is None or outcome is None:
            return
        if shrink.failure_kind(outcome) is None:
            return
        session = state.get(self.config)
        chosen = session.adapter_options if session is not None else {}
        extra = option_flags(chosen)
        budget = shrink.Budget(seconds=self.config.getoption("xtc_shrink_budget"))
        try:
            result = shrink.shrink(adapter, case, outcome, shrink_dir(self.config),
                                   _settings(self.config), budget, extra)
            text = result.describe()
            report.user_properties.append((SHRUNK_KEY, result.to_dict()))
        except Exception as exc:  # shrinking never changes the verdict
            text = f"shrinking failed: {type(exc).__name__}: {exc}"
        report.sections.append(("xtc shrink", text))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        outcome = state.reported_outcome(report)
        if outcome is not None:
            self.rows.append((outcome["case"], outcome["status"], outcome["message"],
                              state.shown_status(report, outcome["status"])))
        self.shrunk += [v for k, v in report.user_properties
                        if k == SHRUNK_KEY and isinstance(v, dict)]

    def tally(self) -> dict[str, Counter[str]]:
        """Per strategy, the explored outcomes (and the strategies that did not apply)."""
        counts: dict[str, int] = {}
        if self.config.getoption("xtc_explore", None):
            session = state.get(self.config)
            if session is not None:
                from pytest_xtc.conformance import builtin_cases

                cases = [*builtin_cases(), *session.user_cases]
                seen = [row[0] for row in self.rows if explore.strategy_of(row[0])]
                counts = _plan(self.config, cases).counts(seen)
        return tally.tally(self.rows, counts)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.config.getoption("xtc_explore", None) and self.rows:
            terminalreporter.section("XTC schedule exploration, per strategy")
            for line in tally.format_tally(self.tally()):
                terminalreporter.write_line(line)
        if self.shrunk:
            terminalreporter.section("XTC shrunk failures")
            for value in self.shrunk:
                terminalreporter.write_line(
                    f"{test_id(value['target'], value['case'])}: from {value['before']} to "
                    f"{value['after']}\n  {value['file']}\n  rerun: {value['command']}"
                )
