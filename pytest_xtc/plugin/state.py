"""The one place that holds an XTC session's state, shared by the plugin's modules."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from pytest_xtc.core.cases.identity import test_id

if TYPE_CHECKING:
    from pytest_xtc.core.adapter import TargetAdapter
    from pytest_xtc.core.cases.case import Case
    from pytest_xtc.core.execution.settings import Settings


@dataclass
class XtcSession:
    """What ``pytest_configure`` decided: the targets, the user's cases, the runner's
    settings and the values of the adapters' own options."""

    selection: str
    explicit: bool  # chosen by option, env var or ini (not the default)
    adapters: list[TargetAdapter] = field(default_factory=list)
    user_cases: list[Case] = field(default_factory=list)
    adapter_options: dict[str, str | None] = field(default_factory=dict)
    builtin: bool = True  # the built-in catalog runs (not --xtc-only-cases)
    case_ids: frozenset[str] = frozenset()  # --xtc-case: only these (empty: every case)
    settings: Settings | None = None  # the runner's, from the command line (set at configure)
    #: the adapter and case of the item that runs next in this process (None, None)
    next_case: tuple[Any, Any] = (None, None)
    _case_lists: dict[tuple[str, str], list[Case]] = field(default_factory=dict, repr=False)

    def cases(self) -> list[Case]:
        """The case set of this session, before placements and --xtc-case."""
        if not self.builtin:
            return list(self.user_cases)
        from pytest_xtc.conformance import builtin_cases

        return [*builtin_cases(), *self.user_cases]

    def planned(self, adapter: TargetAdapter) -> list[Case]:
        """The cases this session plans for a target: its case set (:meth:`cases`) in the
        placements it declares, before --xtc-case, -k and shards. Decided once per target
        (collection, the terminal and reports read it here)."""
        return self._expanded(adapter, "planned", self.cases)

    def suite_cases(self, adapter: TargetAdapter) -> list[Case]:
        """Every case the suite has for a target (the built-in catalog and the case files,
        whatever this run selects): what a bundle's completeness is judged against."""
        def every() -> list[Case]:
            from pytest_xtc.conformance import builtin_cases

            return [*builtin_cases(), *self.user_cases]

        return self._expanded(adapter, "suite", every)

    def _expanded(self, adapter: TargetAdapter, which: str,
                  cases: Callable[[], list[Case]]) -> list[Case]:
        key = (which, adapter.name)
        if key not in self._case_lists:
            from pytest_xtc.core.execution.suite import cases_for

            self._case_lists[key] = cases_for(adapter, cases())
        return self._case_lists[key]

    def selected(self, target: str, case_id: str) -> bool:
        """Whether --xtc-case keeps this (target, case)."""
        ids = self.case_ids
        return not ids or case_id in ids or test_id(target, case_id) in ids


KEY = pytest.StashKey[XtcSession]()
#: The user property under which each case's outcome reaches the controller (a dict; it is
#: taken off the item before its teardown report, so JUnit XML does not print it).
OUTCOME_KEY = "xtc_outcome"


def reported_outcome(report: pytest.TestReport) -> dict[str, Any] | None:
    """The case's outcome that a call report carries (the one reader of ``OUTCOME_KEY``):
    None for other phases and for reports of cases that ended without one."""
    if report.when != "call":
        return None
    found = [v for k, v in report.user_properties if k == OUTCOME_KEY and isinstance(v, dict)]
    return found[-1] if found else None


def shown_status(report: pytest.TestReport, status: str) -> str:
    """How a case's status reads to a person once pytest has judged it: an expected
    failure, an infrastructure error, or the report's own outcome where an expectation
    turned it (an unexpected pass, or compile, of an expected failure)."""
    if hasattr(report, "wasxfail"):
        return "expected failure"
    if status == "error":
        return "infrastructure error"
    if status in ("passed", "failed") and report.outcome != status:
        return report.outcome
    if status == "compiled" and report.failed:  # an expected failure that compiled
        return "failed"
    return status


def get(config: pytest.Config) -> XtcSession | None:
    """The session's state, or None when XTC is not configured in this session."""
    return config.stash.get(KEY, None)


def adapters(config: pytest.Config) -> list[TargetAdapter]:
    state = get(config)
    return state.adapters if state is not None else []
