"""pytest-benchmark glue.

The kernel times XTC measured reach pytest-benchmark's own statistics, so that its JSON,
saves and comparisons (--benchmark-json, --benchmark-autosave, --benchmark-compare,
--benchmark-compare-fail) work on them. The kernel is not run again: the case's
``benchmark`` fixture gets a timer that reads the recorded times back, through its public
``benchmark`` marker (timer, group) and ``benchmark.pedantic``. Under pytest-xdist
pytest-benchmark switches itself off; the records still reach --xtc-report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from pytest_xtc.core.cases.case import Case
from pytest_xtc.core.outcome import Outcome
from pytest_xtc.plugin import state


def benchmark_wanted(config: pytest.Config) -> bool:
    """Whether pytest-benchmark is active and asked for something: a JSON file, a save, a
    comparison, a histogram, ``--benchmark-only`` or ``--benchmark-enable``."""
    bench = getattr(config, "_benchmarksession", None)
    if bench is None or bench.disabled or bench.skip:
        return False
    asked = (bench.json, bench.save, bench.autosave, bench.compare, bench.histogram, bench.only)
    return any(asked) or bool(config.getoption("benchmark_enable", False))


def _replay(times: list[float]) -> Callable[[], float]:
    """A timer for pytest-benchmark that reads back recorded times: ``pedantic`` reads it
    before and after each round, so round i lasts ``times[i]`` exactly."""
    readings = iter([reading for t in times for reading in (0.0, t)])

    def xtc_evaluator() -> float:
        return next(readings)

    return xtc_evaluator


def feed_benchmark(request: pytest.FixtureRequest, case: Case, outcome: Outcome) -> None:
    """Hand a passed case's recorded kernel times to its ``benchmark`` fixture."""
    if "benchmark" in getattr(request.node, "funcargs", {}):
        return  # made before this case's times were known: it would time something else
    group = f"{outcome.target} {case.op}"
    request.node.add_marker(pytest.mark.benchmark(timer=_replay(outcome.times), group=group))
    fixture = request.getfixturevalue("benchmark")
    fixture.extra_info.update({"xtc_target": outcome.target, "xtc_case": outcome.case})
    fixture.extra_info.update(outcome.perf or {})
    fixture.pedantic(lambda: None, rounds=len(outcome.times), iterations=1)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--benchmark-only``, make the conformance cases count as benchmarks (their
    fixture is only requested once a case has passed), so that they are not skipped."""
    bench = getattr(config, "_benchmarksession", None)
    if bench is None or not bench.only or not benchmark_wanted(config):
        return
    for item in items:
        names = getattr(item, "fixturenames", None)
        if names is not None and "xtc_outcome" in names and "benchmark" not in names:
            names.append("benchmark")


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Measure the device's peak for pytest-benchmark's records too: whether it is wanted
    is known only once every plugin is configured (after the session's settings were)."""
    xtc = state.get(session.config)
    if xtc is not None and xtc.settings is not None and not xtc.settings.peak \
            and benchmark_wanted(session.config):
        xtc.settings = replace(xtc.settings, peak=True)
