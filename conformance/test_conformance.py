"""The conformance suite: one test per (target, case), parametrized by the plugin."""

import pytest

from pytest_xtc.adapter import TargetAdapter
from pytest_xtc.plugin import conclude
from pytest_xtc.runner import Outcome


def test_conformance(
    request: pytest.FixtureRequest, xtc_adapter: TargetAdapter, xtc_outcome: Outcome
) -> None:
    conclude(request, xtc_adapter, xtc_outcome)
