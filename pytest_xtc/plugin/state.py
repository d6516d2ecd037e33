"""The one place that holds an XTC session's state, shared by the plugin's modules."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_xtc.core.adapter import TargetAdapter
    from pytest_xtc.core.cases.case import Case


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

    def cases(self) -> list[Case]:
        """The case set of this session, before placements and --xtc-case."""
        if not self.builtin:
            return list(self.user_cases)
        from pytest_xtc.conformance import builtin_cases

        return [*builtin_cases(), *self.user_cases]

    def selected(self, target: str, case_id: str) -> bool:
        """Whether --xtc-case keeps this (target, case)."""
        ids = self.case_ids
        return not ids or case_id in ids or f"{target}-{case_id}" in ids


KEY = pytest.StashKey[XtcSession]()
#: The user property under which each case's outcome reaches the controller (a dict; it is
#: taken off the item before its teardown report, so JUnit XML does not print it).
OUTCOME_KEY = "xtc_outcome"


def get(config: pytest.Config) -> XtcSession | None:
    """The session's state, or None when XTC is not configured in this session."""
    return config.stash.get(KEY, None)


def adapters(config: pytest.Config) -> list[TargetAdapter]:
    state = get(config)
    return state.adapters if state is not None else []
