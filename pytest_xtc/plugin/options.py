"""How the session reads the plugin's options (declared in :mod:`~pytest_xtc.plugin.declarations`,
whose names are re-exported here).

This module is imported in every pytest session of every project where pytest-xtc is
installed, so it imports nothing beyond the standard library at import time: no numpy, no
YAML, no catalog, no adapter. The adapters' own options (``--xtc-nvgpu-arch``...) are
declared only in sessions that use XTC (:func:`wants_xtc`), by :func:`add_adapter_options`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_xtc.core.cases.textfile import UnreadableFile, read_text
from pytest_xtc.plugin import compile_cache
from pytest_xtc.plugin.declarations import (  # noqa: F401  (re-exported)
    DEFAULT_LOAD_TIMEOUT,
    DEFAULT_MAX_CASE_BYTES,
    DEFAULT_MIN_REPEAT_MS,
    DEFAULT_NUMBER,
    DEFAULT_PROBE_TIMEOUT,
    DEFAULT_REPEAT,
    DEFAULT_SELECTION,
    DEFAULT_SHRINK_DIR,
    DEFAULT_SHRINK_SECONDS,
    ENV_TARGETS,
    HELP_ARGS,
    INI_TARGETS,
    _at_least,
    _not_empty,
    _option_dest,
    _seconds,
    add,
    add_adapter_options,
    wants_xtc,
)

if TYPE_CHECKING:
    from pytest_xtc.core.adapter import Timing
    from pytest_xtc.core.cases.case import Case
    from pytest_xtc.core.execution.runner import Settings

def selection(config: pytest.Config) -> tuple[str, bool]:
    """The target selection, and whether it was made (option, env var or ini) rather
    than defaulted: only a made selection adds the suite to what pytest collects."""
    chosen = (
        config.getoption("xtc_target")
        or os.environ.get(ENV_TARGETS)
        or config.getini(INI_TARGETS)
    )
    return (chosen, True) if chosen else (DEFAULT_SELECTION, False)


def adapter_settings(config: pytest.Config) -> dict[str, str | None]:
    """Values of the adapters' own options (option, else env var)."""
    from pytest_xtc.core.adapters import registry

    settings: dict[str, str | None] = {}
    for option in registry.adapter_options():
        value = config.getoption(_option_dest(option.name), None)
        if value is None and option.env:
            value = os.environ.get(option.env)
        settings[option.name] = value
    return settings


def settings(config: pytest.Config) -> Settings:
    """The runner's settings from the command line."""
    from pytest_xtc.core.execution.runner import Settings
    from pytest_xtc.plugin.benchmarking import benchmark_wanted

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
        max_case_bytes=config.getoption("xtc_max_case_bytes"),
        order=_order_pool() if config.getoption("xtc_order_check") else (),
        pack_dir=config.getoption("xtc_pack", None) or "",
        from_pack=config.getoption("xtc_from_pack", None) or "",
        run_on=config.getoption("xtc_run_on", None) or "",
        kernels=compile_cache.opened(config),
    )


def _order_pool() -> tuple[Case, ...]:
    """The neighbours of the order check: the catalog's smallest case per op and dtype."""
    from pytest_xtc.conformance import builtin_cases
    from pytest_xtc.core.execution import order

    return order.pool(builtin_cases())


def timing(config: pytest.Config) -> Timing:
    """How kernels are timed: ``--xtc-repeat``, ``--xtc-number``, ``--xtc-min-repeat-ms``
    (one call when performance is not recorded)."""
    from pytest_xtc.core.adapter import ONCE, Timing

    repeat = config.getoption("xtc_repeat")
    if not repeat:
        return ONCE
    return Timing(repeat, config.getoption("xtc_number"), config.getoption("xtc_min_repeat_ms"))


ID_LIST_BYTES = 4 << 20  # an --xtc-case=@FILE list of case ids


def case_ids(values: Sequence[str]) -> list[str]:
    """The ids of ``--xtc-case`` values: each an id, or ``@FILE`` with one id a line
    (blank lines and ``#`` comments skipped)."""
    found: list[str] = []
    for value in values:
        if not value.startswith("@"):
            found.append(value.strip())
            continue
        try:
            text = read_text(Path(value[1:]), ID_LIST_BYTES)
        except UnreadableFile as exc:
            raise pytest.UsageError(f"--xtc-case={value}: {exc}") from None
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                found.append(line)
    return [i for i in found if i]


#: Options that change a case's verdict or its run, as (dest, flag); the rerun line
#: repeats those given a value other than the default.
VERDICT_OPTIONS = (
    ("xtc_seed", "--xtc-seed"),
    ("xtc_strict", "--xtc-strict"),
    ("xtc_ignore_expectations", "--xtc-ignore-expectations"),
    ("xtc_repeat_check", "--xtc-repeat-check"),
    ("xtc_order_check", "--xtc-order-check"),
    ("xtc_no_isolation", "--xtc-no-isolation"),
    ("xtc_compile_timeout", "--xtc-compile-timeout"),
    ("xtc_run_timeout", "--xtc-run-timeout"),
    ("xtc_max_case_bytes", "--xtc-max-case-bytes"),
    ("xtc_repeat", "--xtc-repeat"),
    ("xtc_number", "--xtc-number"),
    ("xtc_min_repeat_ms", "--xtc-min-repeat-ms"),
    ("xtc_only_cases", "--xtc-only-cases"),
    ("xtc_explore", "--xtc-explore"),
    ("xtc_fuzz", "--xtc-fuzz"),
    ("xtc_fuzz_seed", "--xtc-fuzz-seed"),
    ("xtc_from_pack", "--xtc-from-pack"),  # judged again from the same results
    ("xtc_run_on", "--xtc-run-on"),
)
