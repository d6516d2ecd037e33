"""A case's run in pytest: the ``xtc_outcome`` fixture, then pass, skip, expected failure
or failure, with the command that reruns a failure alone."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from pytest_xtc.core import expectations
from pytest_xtc.core.adapter import TargetAdapter
from pytest_xtc.core.cases import Case
from pytest_xtc.core.outcome import Outcome, Phase, Status
from pytest_xtc.core.perf import DEFAULT_TIMING
from pytest_xtc.core.runner import run_case
from pytest_xtc.plugin import explore, options, state
from pytest_xtc.plugin.benchmarking import benchmark_wanted, feed_benchmark


@pytest.fixture
def xtc_outcome(
    request: pytest.FixtureRequest, xtc_adapter: TargetAdapter, xtc_case: Case, tmp_path: Path
) -> Outcome:
    """Runs the case on the target; the outcome also reaches reports."""
    outcome = run_case(xtc_adapter, xtc_case, tmp_path, options.settings(request.config))
    request.node.user_properties.append((state.OUTCOME_KEY, outcome.to_dict()))
    if outcome.perf and outcome.times and benchmark_wanted(request.config):
        try:
            feed_benchmark(request, xtc_case, outcome)
        except Exception as exc:  # performance never decides conformance
            request.node.warn(pytest.PytestWarning(f"pytest-benchmark refused the times: {exc!r}"))
    return outcome


def rerun_command(config: pytest.Config, name: str, target: str) -> str:
    """One command line that runs this case alone, with the same inputs, from anywhere."""
    parts = ["pytest", f"--xtc-target={target}", f"--xtc-seed={config.getoption('xtc_seed')}"]
    parts += [f"--xtc-cases={p}" for p in config.getoption("xtc_cases")]
    parts += explore.rerun_options(config)
    parts += [
        f"--xtc-{k}={v}" for k, v in options.adapter_settings(config).items() if v is not None
    ]
    for field in ("repeat", "number", "min_repeat_ms"):  # a kernel may fail after more calls
        value = config.getoption(f"xtc_{field}")
        if value != getattr(DEFAULT_TIMING, field):
            parts.append(f"--xtc-{field.replace('_', '-')}={value}")
    return shlex.join([*parts, "-k", name])


def _expectation(
    request: pytest.FixtureRequest, adapter: TargetAdapter, case_id: str
) -> expectations.Expectation | None:
    if request.config.getoption("xtc_ignore_expectations"):
        return None
    path = adapter.expectations_file()
    return None if path is None else expectations.find(expectations.load(path), case_id)


def conclude(request: pytest.FixtureRequest, adapter: TargetAdapter, outcome: Outcome) -> None:
    """Turn an outcome into pytest's pass, skip, expected failure or failure."""
    case_id = outcome.case
    expected = None
    if outcome.status in (Status.PASSED, Status.FAILED):
        expected = _expectation(request, adapter, case_id)
    if outcome.status is Status.PASSED:
        if expected is not None:
            pytest.fail(
                f"unexpected pass: remove the entry {expected.pattern!r} "
                f"(line {expected.line}) from {adapter.expectations_file()}",
                pytrace=False,
            )
        return
    if (
        outcome.status is Status.FAILED
        and expected is not None
        and expected.phase == Phase(outcome.phase).stage
    ):
        pytest.xfail(f"expected {expected.phase} failure: {expected.reason} ({expected.url})")
    if outcome.status is Status.NOT_SUPPORTED:
        pytest.skip(f"not supported: {outcome.message}")
    if outcome.status is Status.SKIPPED:
        if request.config.getoption("xtc_strict"):
            pytest.fail(f"--xtc-strict: cannot run here: {outcome.message}", pytrace=False)
        pytest.skip(outcome.message)
    rerun = rerun_command(request.config, request.node.name, outcome.target)
    if outcome.status is Status.ERROR:
        pytest.fail(
            f"[infrastructure error, {outcome.phase}] {outcome.message}\nrerun alone: {rerun}",
            pytrace=False,
        )
    pytest.fail(f"[{outcome.phase}] {outcome.message}\nrerun alone: {rerun}", pytrace=False)
