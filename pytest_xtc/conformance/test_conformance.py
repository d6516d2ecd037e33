"""The conformance suite: one test per (target, case), parametrized by the plugin, which
also gives the test its verdict (``pytest_xtc.plugin.outcomes.conclude``)."""

from collections.abc import Callable


def test_conformance(xtc_verdict: Callable[[], None]) -> None:
    xtc_verdict()
