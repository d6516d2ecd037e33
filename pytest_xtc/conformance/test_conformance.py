"""The conformance suite: one test per (target, case), parametrized by the plugin."""

import pytest

from pytest_xtc.core.adapter import TargetAdapter
from pytest_xtc.core.outcome import Outcome
from pytest_xtc.plugin.outcomes import conclude


def test_conformance(
    request: pytest.FixtureRequest, xtc_adapter: TargetAdapter, xtc_outcome: Outcome
) -> None:
    conclude(request, xtc_adapter, xtc_outcome)
