"""The plugin's command-line options and how the session reads them."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

import pytest

from pytest_xtc.core import registry
from pytest_xtc.core.adapter import ONCE, Timing
from pytest_xtc.core.perf import DEFAULT_TIMING
from pytest_xtc.core.runner import Settings
from pytest_xtc.plugin import explore
from pytest_xtc.plugin.benchmarking import benchmark_wanted

ENV_TARGETS = "XTC_TEST_TARGETS"


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


def add(parser: pytest.Parser) -> None:
    """Declare every option of the plugin and of the registered adapters."""
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
    group.addoption(
        "--xtc-report",
        dest="xtc_report",
        default=None,
        metavar="DIR",
        help="write a conformance bundle to DIR (results.jsonl, report.json, summary.md, "
        "MANIFEST.sha256); a bundle already there is replaced",
    )
    group.addoption(
        "--xtc-shard",
        dest="xtc_shard",
        default=None,
        metavar="I/N",
        help="run shard I of N (1-based, by a stable hash of each case); "
        "merge the shards' bundles with 'xtc-conformance merge'",
    )
    explore.add_options(group)
    parser.addini("xtc_targets", "default XTC targets to certify", default=None)


def selection(config: pytest.Config) -> tuple[str, bool]:
    """The target selection, and whether it was made (option, env var or ini) rather
    than defaulted: only a made selection adds the suite to what pytest collects."""
    chosen = (
        config.getoption("xtc_target")
        or os.environ.get(ENV_TARGETS)
        or config.getini("xtc_targets")
    )
    return (chosen, True) if chosen else (registry.DEFAULT_SELECTION, False)


def adapter_settings(config: pytest.Config) -> dict[str, str | None]:
    """Values of the adapters' own options (option, else env var)."""
    settings: dict[str, str | None] = {}
    for option in registry.adapter_options():
        value = config.getoption(_option_dest(option.name), None)
        if value is None and option.env:
            value = os.environ.get(option.env)
        settings[option.name] = value
    return settings


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
