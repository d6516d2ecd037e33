"""The one place that holds an XTC session's state, shared by the plugin's modules."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_xtc.core.adapter import TargetAdapter
    from pytest_xtc.core.cases import Case


@dataclass
class XtcSession:
    """What ``pytest_configure`` decided: the targets, the user's cases, the runner's
    settings and the values of the adapters' own options."""

    selection: str
    explicit: bool  # chosen by option, env var or ini (not the default)
    adapters: list[TargetAdapter] = field(default_factory=list)
    user_cases: list[Case] = field(default_factory=list)
    adapter_options: dict[str, str | None] = field(default_factory=dict)


KEY = pytest.StashKey[XtcSession]()
#: The user property under which each case's outcome reaches the controller.
OUTCOME_KEY = "xtc_outcome"


def get(config: pytest.Config) -> XtcSession | None:
    """The session's state, or None when XTC is not configured in this session."""
    return config.stash.get(KEY, None)


def adapters(config: pytest.Config) -> list[TargetAdapter]:
    state = get(config)
    return state.adapters if state is not None else []
