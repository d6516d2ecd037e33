"""The plugin's command-line options as declared: names, defaults, help and the checks on
their values (readers of the parsed options are in :mod:`pytest_xtc.plugin.options`).

Imported in every pytest session of every project where pytest-xtc is installed: nothing
beyond the standard library at import time. The adapters' own options (``--xtc-nvgpu-arch``...)
are declared only in sessions that use XTC (:func:`wants_xtc`), by
:func:`add_adapter_options`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest

ENV_TARGETS = "XTC_TEST_TARGETS"
INI_TARGETS = "xtc_targets"
#: The selection when none is made (``registry.DEFAULT_SELECTION``; a test checks both agree).
DEFAULT_SELECTION = "host"
#: XTC's evaluator parameters by default (``core.perf.DEFAULT_TIMING``; a test checks).
DEFAULT_REPEAT, DEFAULT_NUMBER, DEFAULT_MIN_REPEAT_MS = 5, 1, 1
#: Arguments that ask for the adapters' options to be declared although they start with no
#: ``--xtc-``: the help, which lists them.
HELP_ARGS = frozenset({"-h", "--help"})
#: A case whose operands would need more bytes is refused up front
#: (``core.limits.DEFAULT_MAX_CASE_BYTES``; a test checks both agree).
DEFAULT_MAX_CASE_BYTES = 1 << 30
#: Seconds to probe an adapter (``core.remote.HostLimits.probe``; a test checks).
DEFAULT_PROBE_TIMEOUT = 30.0
#: Seconds to import, build and prepare an adapter (``core.remote.HostLimits.load``).
DEFAULT_LOAD_TIMEOUT = 60.0
#: Shrinking: where, and how long per case (``core.shrink.DEFAULT_SECONDS``; a test checks).
DEFAULT_SHRINK_DIR, DEFAULT_SHRINK_SECONDS = "xtc-shrunk", 300.0


@dataclass(frozen=True)
class Unusable:
    """A value an option's check refused. argparse would say it with its usage block (four
    lines); it is kept instead and said on one line once the options are read
    (:func:`refuse_unusable`)."""

    why: str  # "expected ..., got ..."


def refuse_unusable(config: pytest.Config) -> None:
    """A one-line usage error for the first option whose value its check refused."""
    for dest, value in sorted(vars(config.option).items()):
        for one in value if isinstance(value, list) else [value]:
            if isinstance(one, Unusable):
                raise pytest.UsageError(f"--{dest.replace('_', '-')}: {one.why}")


def _at_least(minimum: int) -> Callable[[str], int | Unusable]:
    """An option type: an integer, at least ``minimum``."""

    def integer(text: str) -> int | Unusable:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            return Unusable(f"expected an integer >= {minimum}, got {text!r}")
        return value

    return integer


def _integer(text: str) -> int | Unusable:
    """An option type: any integer."""
    try:
        return int(text)
    except ValueError:
        return Unusable(f"expected an integer, got {text!r}")


def _seconds(text: str) -> float | Unusable:
    """An option type: a finite, positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        return Unusable(f"expected a finite number of seconds > 0, got {text!r}")
    return value


def _not_empty(text: str) -> str | Unusable:
    """An option type: any text but the empty one (``--xtc-report=`` is a slip, not a
    choice of the current directory)."""
    if not text.strip():
        return Unusable("expected a value, got an empty one")
    return text


def _option_dest(name: str) -> str:
    return "xtc_" + name.replace("-", "_")


def add(parser: pytest.Parser) -> None:
    """Declare the plugin's own options (the adapters' come later, in XTC sessions only)."""
    group = parser.getgroup("xtc", "XTC conformance")
    group.addoption(
        "--xtc-target",
        type=_not_empty,
        dest="xtc_target",
        default=None,
        metavar="NAME[,NAME...]",
        help=f"targets to certify: names, NAME[ORDINAL], 'all' or 'auto' "
        f"(env {ENV_TARGETS}, ini {INI_TARGETS}; default {DEFAULT_SELECTION})",
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
        type=_not_empty,
        action="append",
        default=[],
        metavar="PATH",
        help="also run the case files in PATH (an XTC graph YAML, or a directory of them)",
    )
    group.addoption(
        "--xtc-only-cases",
        action="store_true",
        default=False,
        help="run only the cases of --xtc-cases, not the built-in catalog",
    )
    group.addoption(
        "--xtc-case",
        type=_not_empty,
        action="append",
        default=[],
        metavar="ID",
        help="run only this case: TARGET-CASE as in the test ids, or a case id for every "
        "target (exact match; repeatable; @FILE reads one id a line)",
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
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="time limit of one compilation, for every target (default: the target's own)",
    )
    group.addoption(
        "--xtc-max-case-bytes",
        type=_at_least(1),
        default=DEFAULT_MAX_CASE_BYTES,
        metavar="BYTES",
        help="refuse, up front, a case whose operands and reference would need more memory "
        f"(default {DEFAULT_MAX_CASE_BYTES}, 1 GiB)",
    )
    group.addoption(
        "--xtc-probe-timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="time limit of probing one adapter and of each of its queries (in its own "
        "process; loading it may take the longer of this and "
        f"{DEFAULT_LOAD_TIMEOUT:g}); a target past it is unavailable "
        f"(default {DEFAULT_PROBE_TIMEOUT:g})",
    )
    group.addoption(
        "--xtc-run-timeout",
        type=_seconds,
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
        "--xtc-order-check",
        action="store_true",
        default=False,
        help="run each passed case again right after a case unlike it (another dtype, op "
        "and shape; seeded) and fail outputs that change with the order (certification "
        "does)",
    )
    group.addoption(
        "--xtc-update-expectations",
        type=_not_empty,
        default=None,
        metavar="DIR",
        help="write each target's expected-failure file as this run says it should read "
        "into DIR, for review (never applied)",
    )
    group.addoption(
        "--xtc-seed",
        type=_integer,
        default=0,
        metavar="N",
        help="base seed of the random inputs (each case derives its own; default 0)",
    )
    group.addoption(
        "--xtc-repeat",
        type=_at_least(0),
        default=DEFAULT_REPEAT,
        metavar="N",
        help="performance of each passed case: N timed measurements of its kernel through "
        "XTC's evaluator, and of numpy's evaluation of the same graph "
        f"(default {DEFAULT_REPEAT}; 0 records no performance)",
    )
    group.addoption(
        "--xtc-number",
        type=_at_least(1),
        default=DEFAULT_NUMBER,
        metavar="N",
        help=f"kernel calls per measurement, at least (default {DEFAULT_NUMBER})",
    )
    group.addoption(
        "--xtc-min-repeat-ms",
        type=_at_least(0),
        default=DEFAULT_MIN_REPEAT_MS,
        metavar="MS",
        help="the calls of a measurement are doubled until it lasts MS milliseconds "
        f"(default {DEFAULT_MIN_REPEAT_MS})",
    )
    group.addoption(
        "--xtc-report",
        type=_not_empty,
        dest="xtc_report",
        default=None,
        metavar="DIR",
        help="write a conformance bundle to DIR (results.jsonl, report.json, summary.md, "
        "MANIFEST.sha256); a bundle already there is replaced",
    )
    group.addoption(
        "--xtc-shard",
        type=_not_empty,
        dest="xtc_shard",
        default=None,
        metavar="I/N",
        help="run shard I of N (1-based, by a stable hash of each case); "
        "merge the shards' bundles with 'xtc-conformance merge'",
    )
    group.addoption(
        "--xtc-explore",
        type=_at_least(1),
        default=None,
        metavar="N",
        help="also check N schedules drawn by each of XTC's search strategies that applies, "
        "on every graph, shape and dtype (from --xtc-seed; test ids name the strategy "
        "and the sample: ...-explore-<strategy>-<i>of<N>)",
    )
    group.addoption("--xtc-fuzz", type=_at_least(1), default=None, metavar="N",
                    help="also check N random cases (graphs, shapes, schedules, values) "
                    "drawn from --xtc-fuzz-seed; each failure is shrunk to a case file")
    group.addoption("--xtc-fuzz-seed", type=_at_least(0), default=0, metavar="S",
                    help="the seed of --xtc-fuzz's draws (default 0; same seed, same cases)")
    group.addoption(
        "--xtc-shrink",
        action="store_true",
        default=False,
        help="shrink each failing case to the smallest one that fails the same way, "
        "written as a case file with its rerun command",
    )
    group.addoption(
        "--xtc-shrink-dir",
        type=_not_empty,
        default=None,
        metavar="DIR",
        help="where --xtc-shrink writes its case files (default: DIR/shrunk of --xtc-report, "
        f"else ./{DEFAULT_SHRINK_DIR})",
    )
    group.addoption(
        "--xtc-shrink-budget",
        type=_seconds,
        default=DEFAULT_SHRINK_SECONDS,
        metavar="SECONDS",
        help=f"time one case's shrinking may take (default {DEFAULT_SHRINK_SECONDS:g})",
    )
    for flag, metavar, text in SPLIT_OPTIONS:  # docs/split-run.md
        group.addoption(flag, type=_not_empty, default=None, metavar=metavar, help=text)
    parser.addini(INI_TARGETS, "default XTC targets to certify", default=None)


SPLIT_OPTIONS = (
    ("--xtc-pack", "DIR", "compile every selected case and write an execution pack to DIR "
     "(an empty or new folder); nothing runs here"),
    ("--xtc-from-pack", "DIR", "judge every selected case from the results of the pack in "
     "DIR (its device runner's DIR/results); nothing compiles or runs here"),
    ("--xtc-run-on", "SPEC", "compile here, run each case through an execnet gateway "
     "(popen//python=python3, socket=HOST:PORT, ssh=HOST//python=python3)"),
)


def wants_xtc(args: Sequence[str], ini_targets: str | None) -> bool:
    """Whether a session uses XTC, judged from its arguments before parsing: an
    ``--xtc-...`` argument, the help, a selection in the environment or the ini file."""
    if os.environ.get(ENV_TARGETS) or ini_targets:
        return True
    return any(str(a).startswith("--xtc-") or a in HELP_ARGS for a in args)


def add_adapter_options(parser: pytest.Parser) -> None:
    """Declare the registered adapters' own options (``--xtc-<name>``), as their
    declarations give them (kept across sessions while unchanged)."""
    from pytest_xtc.core.adapters import adapter_declarations

    group = parser.getgroup("xtc", "XTC conformance")
    declared = {name for opt in group.options for name in opt.names()}
    try:
        adapter_declarations.registered()
    except adapter_declarations.DuplicateTarget as exc:
        raise pytest.UsageError(str(exc)) from None
    for option in adapter_declarations.adapter_options():
        flag = f"--xtc-{option.name}"
        if flag in declared:
            continue
        group.addoption(
            flag,
            dest=_option_dest(option.name),
            default=None,
            choices=option.choices,
            help=option.help + (f" (env {option.env})" if option.env else ""),
        )
