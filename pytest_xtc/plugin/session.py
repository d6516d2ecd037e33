"""Setting up an XTC session: targets, user cases and expectations checked up front (a
bad one is a usage error), then the plugin's other modules registered."""

from __future__ import annotations

import os
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_xtc.core.adapter import TargetAdapter
from pytest_xtc.core.adapters import registry
from pytest_xtc.core.cases import expectations
from pytest_xtc.core.cases.case import CaseFileError, check_unique, load_case_paths
from pytest_xtc.core.execution.remote import HostLimits, IsolatedAdapter
from pytest_xtc.core.workers import interrupts
from pytest_xtc.plugin import options


def configure(config: pytest.Config) -> None:
    selection, explicit = options.selection(config)
    adapters: list[TargetAdapter] = []
    try:
        values = options.adapter_settings(config)
        for option in registry.adapter_options():
            value = values[option.name]
            problem = value is not None and option.problem(value)
            if problem:
                raise registry.SelectionError(problem)
        isolate = not config.getoption("xtc_no_isolation")
        limits = replace(host_limits(config.getoption("xtc_probe_timeout")),
                         ahead=_free_core(config))
        if registry.SELFTEST_PREFIX in selection:  # selftest-<variant>: known variants only
            from pytest_xtc.selftest.targets import check_selection

            check_selection([s.name for s in registry.parse(selection)])
        adapters = registry.resolve(selection, values, isolate=isolate, limits=limits)
        if not _xdist_controller(config):  # hosts load XTC while the rest is set up
            for adapter in adapters:
                if isinstance(adapter, IsolatedAdapter):
                    adapter.warm()
        # The rest of the plugin is imported once the hosts are loading XTC, not before:
        # the first case waits for them.
        from pytest_xtc.plugin import (
            benchmarking,
            collection,
            explore,
            outcomes,
            pack,
            reporting,
            sharding,
            state,
        )
        from pytest_xtc.plugin.terminal import OutcomeCollector

        if not config.getoption("xtc_ignore_expectations"):
            for adapter in adapters:
                path = adapter.expectations_file()
                if path is not None:
                    expectations.load(path)
        _check_writable(config.getoption("xtc_update_expectations"))
        budget = config.getoption("xtc_max_case_bytes")
        user_cases = load_case_paths(config.getoption("xtc_cases"), budget)
        if config.getoption("xtc_only_cases") and not config.getoption("xtc_cases"):
            raise registry.SelectionError("--xtc-only-cases needs --xtc-cases=PATH")
        from pytest_xtc.conformance import builtin_cases

        only_own = config.getoption("xtc_only_cases")
        check_unique(user_cases, () if only_own else (c.id for c in builtin_cases()))
        settings = options.settings(config)
        pack.configure(config, settings)
    except (registry.SelectionError, CaseFileError, expectations.ExpectationFileError,
            ValueError) as exc:
        for adapter in adapters:  # warmed hosts end with the refused session
            if isinstance(adapter, IsolatedAdapter):
                adapter.stop()
        raise pytest.UsageError(str(exc)) from None
    config.stash[state.KEY] = state.XtcSession(
        selection,
        explicit,
        adapters,
        user_cases,
        adapter_options=values,
        builtin=not config.getoption("xtc_only_cases"),
        case_ids=frozenset(options.case_ids(config.getoption("xtc_case"))),
        settings=settings,
    )
    if interrupts.install():  # a Ctrl-C swallowed by a finalizer or an adapter still counts
        config.add_cleanup(interrupts.uninstall)
    collection.register_markers(config)
    for module in (collection, outcomes, benchmarking):
        config.pluginmanager.register(module, f"xtc-{module.__name__.rpartition('.')[2]}-hooks")
    config.pluginmanager.register(OutcomeCollector(config), "xtc-summary")
    sharding.configure(config)
    explore.configure(config)
    reporting.configure(config)
    collection.resolve_package_args(config)
    if explicit or user_cases or config.getoption("xtc_case"):
        collection.add_suite_to_args(config)


def _xdist_controller(config: pytest.Config) -> bool:
    """Whether this process hands the cases to xdist workers (and runs none itself)."""
    if hasattr(config, "workerinput"):
        return False
    return bool(config.getoption("numprocesses", None)) or config.getoption("dist", "no") != "no"


def _free_core(config: pytest.Config) -> bool:
    """Whether the machine has a core beyond this session's workers (a serial run on two
    cores, ``-n 2`` on four): the case workers then get ready on it (``HostLimits.ahead``).
    Under ``-n`` as many as cores, none is free: getting ready ahead would only take CPU
    from the other workers' cases."""
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (cores or 1) > workers


def host_limits(probe_s: float | None) -> HostLimits:
    """The adapter hosts' limits: ``--xtc-probe-timeout`` bounds probing an adapter and
    each of its queries (capabilities...), and loading it when longer than the default."""
    if probe_s is None:
        return HostLimits()
    load = max(HostLimits.load, probe_s)
    return HostLimits(load=load, probe=probe_s, query=min(HostLimits.query, probe_s))


def _check_writable(folder: str | None) -> None:
    """``--xtc-update-expectations=DIR`` must be writable now, not after the whole run."""
    if folder is None:
        return
    path = Path(folder)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise registry.SelectionError(
            f"--xtc-update-expectations={folder}: cannot write there "
            f"({exc.strerror or exc}); choose a writable directory"
        ) from None
