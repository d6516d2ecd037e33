"""The pytest plugin: options, the parametrization of the suite, outcomes, the summary.

Everything else lives in the pytest-free core (registry, cases, runner, reference).
"""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_xtc.core import expectations, registry
from pytest_xtc.core.adapter import ONCE, TargetAdapter, Timing
from pytest_xtc.core.cases import (
    DEVICE,
    Case,
    CaseFileError,
    check_unique,
    load_case_paths,
    placements,
)
from pytest_xtc.core.outcome import Outcome, Phase, Status
from pytest_xtc.core.perf import DEFAULT_TIMING
from pytest_xtc.core.runner import Settings, run_case
from pytest_xtc.plugin import benchmarking, reporting
from pytest_xtc.plugin.benchmarking import benchmark_wanted, feed_benchmark
from pytest_xtc.plugin.terminal import OUTCOME_KEY, OutcomeCollector

ENV_TARGETS = "XTC_TEST_TARGETS"
_adapters_key = pytest.StashKey[list[TargetAdapter]]()
_cases_key = pytest.StashKey[list[Case]]()


def _at_least(minimum: int) -> Callable[[str], int]:
    """An option type: an integer, at least ``minimum``."""

    def integer(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}")
        return value

    return integer


def _option_dest(name: str) -> str:
    return "xtc_" + name.replace("-", "_")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("xtc", "XTC conformance")
    group.addoption(
        "--xtc-target",
        dest="xtc_target",
        default=None,
        metavar="NAME[,NAME...]",
        help=f"targets to certify: names, NAME[ORDINAL], 'all' or 'auto' "
        f"(env {ENV_TARGETS}, ini xtc_targets; default {registry.DEFAULT_SELECTION})",
    )
    group.addoption(
        "--xtc-strict",
        action="store_true",
        default=False,
        help="a case skipped because this machine cannot run its target fails instead",
    )
    group.addoption(
        "--xtc-list-targets",
        action="store_true",
        default=False,
        help="list every registered target with its status, reason and versions, then exit",
    )
    group.addoption(
        "--xtc-cases",
        action="append",
        default=[],
        metavar="PATH",
        help="also run the case files in PATH (an XTC graph YAML, or a directory of them)",
    )
    group.addoption(
        "--xtc-ignore-expectations",
        action="store_true",
        default=False,
        help="ignore the targets' expected-failure files (as a certification run does)",
    )
    group.addoption(
        "--xtc-no-isolation",
        action="store_true",
        default=False,
        help="compile and run in the pytest process itself, not in a forked child per case "
        "(faster to debug; a crash or a hang then ends the session)",
    )
    group.addoption(
        "--xtc-compile-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="time limit of one compilation, for every target (default: the target's own)",
    )
    group.addoption(
        "--xtc-run-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="time limit of one run, for every target (default: the target's own)",
    )
    group.addoption(
        "--xtc-repeat-check",
        action="store_true",
        default=False,
        help="run each kernel twice and fail results that change between the runs",
    )
    group.addoption(
        "--xtc-update-expectations",
        default=None,
        metavar="DIR",
        help="write each target's expected-failure file as this run says it should read "
        "into DIR, for review (never applied)",
    )
    group.addoption(
        "--xtc-seed",
        type=int,
        default=0,
        metavar="N",
        help="base seed of the random inputs (each case derives its own; default 0)",
    )
    group.addoption(
        "--xtc-repeat",
        type=_at_least(0),
        default=DEFAULT_TIMING.repeat,
        metavar="N",
        help="performance of each passed case: N timed measurements of its kernel through "
        "XTC's evaluator, and of numpy's evaluation of the same graph "
        f"(default {DEFAULT_TIMING.repeat}; 0 records no performance)",
    )
    group.addoption(
        "--xtc-number",
        type=_at_least(1),
        default=DEFAULT_TIMING.number,
        metavar="N",
        help=f"kernel calls per measurement, at least (default {DEFAULT_TIMING.number})",
    )
    group.addoption(
        "--xtc-min-repeat-ms",
        type=_at_least(0),
        default=DEFAULT_TIMING.min_repeat_ms,
        metavar="MS",
        help="the calls of a measurement are doubled until it lasts MS milliseconds "
        f"(default {DEFAULT_TIMING.min_repeat_ms})",
    )
    for option in registry.adapter_options():
        group.addoption(
            f"--xtc-{option.name}",
            dest=_option_dest(option.name),
            default=None,
            choices=option.choices,
            help=option.help + (f" (env {option.env})" if option.env else ""),
        )
    reporting.addoption(group)
    parser.addini("xtc_targets", "default XTC targets to certify", default=None)


def _selection(config: pytest.Config) -> tuple[str, bool]:
    """The target selection, and whether it was made (option, env var or ini) rather
    than defaulted: only a made selection adds the suite to what pytest collects."""
    chosen = (
        config.getoption("xtc_target")
        or os.environ.get(ENV_TARGETS)
        or config.getini("xtc_targets")
    )
    return (chosen, True) if chosen else (registry.DEFAULT_SELECTION, False)


def selected_adapters(config: pytest.Config) -> list[TargetAdapter]:
    """The adapters of the targets this session certifies."""
    return config.stash.get(_adapters_key, [])


def adapter_settings(config: pytest.Config) -> dict[str, str | None]:
    """Values of the adapters' own options (option, else env var)."""
    settings: dict[str, str | None] = {}
    for option in registry.adapter_options():
        value = config.getoption(_option_dest(option.name), None)
        if value is None and option.env:
            value = os.environ.get(option.env)
        settings[option.name] = value
    return settings


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    if not config.getoption("xtc_list_targets"):
        return None
    from pytest_xtc.report.text import format_targets

    adapters = registry.resolve("all", adapter_settings(config))
    print(format_targets(adapters))
    return 0


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "xtc: a conformance case of the XTC suite")
    selection, explicit = _selection(config)
    try:
        values = adapter_settings(config)
        for option in registry.adapter_options():
            value = values[option.name]
            problem = value is not None and option.problem(value)
            if problem:
                raise registry.SelectionError(problem)
        adapters = config.stash[_adapters_key] = registry.resolve(selection, values)
        if not config.getoption("xtc_ignore_expectations"):
            for adapter in adapters:
                path = adapter.expectations_file()
                if path is not None:
                    expectations.load(path)
        user_cases = load_case_paths(config.getoption("xtc_cases"))
        check_unique(user_cases)
    except (registry.SelectionError, CaseFileError, expectations.ExpectationFileError) as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[_cases_key] = user_cases
    config.pluginmanager.register(OutcomeCollector(config), "xtc-outcomes")
    config.pluginmanager.register(benchmarking, "xtc-benchmarking")
    reporting.configure(config)
    if explicit or user_cases:
        _collect_suite(config)


def _collect_suite(config: pytest.Config) -> None:
    """Make sure the suite module is collected when targets are chosen explicitly."""
    from pytest_xtc.conformance import SUITE_MODULE

    suite = SUITE_MODULE.resolve()
    root = config.invocation_params.dir
    for arg in config.args:
        path = (root / arg.split("::")[0]).resolve()
        if suite == path or path in suite.parents:
            return
    config.args.append(str(suite))


class SuiteModule(pytest.Module):
    """The suite's test module, imported under its package name whatever the import mode
    (so no top-level ``conformance`` module appears, installed or editable)."""

    def _getobj(self):  # type: ignore[no-untyped-def]
        import importlib

        return importlib.import_module("pytest_xtc.conformance.test_conformance")


def pytest_pycollect_makemodule(
    module_path: Path, parent: pytest.Collector
) -> pytest.Module | None:
    from pytest_xtc.conformance import SUITE_MODULE

    if module_path.resolve() == SUITE_MODULE.resolve():
        return SuiteModule.from_parent(parent, path=module_path)
    return None


def cases_for(adapter: TargetAdapter, cases: list[Case]) -> list[Case]:
    """The cases a target runs: each case in every placement it supports."""
    try:
        on_device = DEVICE in adapter.capabilities().placements
    except Exception:  # the case itself will report the broken adapter
        on_device = False
    if not on_device:
        return cases
    return [case.place(p) for case in cases for p in placements(case.graph)]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "xtc_case" not in metafunc.fixturenames:
        return
    from pytest_xtc.conformance import builtin_cases

    config = metafunc.config
    cases = [*builtin_cases(), *config.stash[_cases_key]]
    params = [
        pytest.param(adapter, case, id=f"{adapter.name}-{case.id}", marks=pytest.mark.xtc)
        for adapter in config.stash[_adapters_key]
        for case in cases_for(adapter, cases)
    ]
    metafunc.parametrize(("xtc_adapter", "xtc_case"), params)


def settings(config: pytest.Config) -> Settings:
    """The runner's settings from the command line."""
    limits = {
        phase: value
        for phase in ("compile", "run")
        if (value := config.getoption(f"xtc_{phase}_timeout")) is not None
    }
    return Settings(
        base_seed=config.getoption("xtc_seed"),
        isolate=not config.getoption("xtc_no_isolation"),
        repeat_check=config.getoption("xtc_repeat_check"),
        limits=limits,
        timing=timing(config),
        perf=config.getoption("xtc_repeat") > 0,
        # The peak is measured (a second or two per process): only for reports.
        peak=config.getoption("xtc_report") is not None or benchmark_wanted(config),
    )


def timing(config: pytest.Config) -> Timing:
    """How kernels are timed: ``--xtc-repeat``, ``--xtc-number``, ``--xtc-min-repeat-ms``
    (one call when performance is not recorded)."""
    repeat = config.getoption("xtc_repeat")
    if not repeat:
        return ONCE
    return Timing(repeat, config.getoption("xtc_number"), config.getoption("xtc_min_repeat_ms"))


@pytest.fixture
def xtc_outcome(
    request: pytest.FixtureRequest, xtc_adapter: TargetAdapter, xtc_case: Case, tmp_path: Path
) -> Outcome:
    """Runs the case on the target; the outcome also reaches reports."""
    outcome = run_case(xtc_adapter, xtc_case, tmp_path, settings(request.config))
    request.node.user_properties.append((OUTCOME_KEY, outcome.to_dict()))
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
    parts += [f"--xtc-{k}={v}" for k, v in adapter_settings(config).items() if v is not None]
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
