"""Setting up an XTC session: targets, user cases and expectations checked up front (a
bad one is a usage error), then the plugin's other modules registered."""

from __future__ import annotations

import pytest

from pytest_xtc.core import expectations, registry
from pytest_xtc.core.cases import CaseFileError, check_unique, load_case_paths
from pytest_xtc.plugin import (
    benchmarking,
    collection,
    explore,
    options,
    outcomes,
    reporting,
    sharding,
    state,
)
from pytest_xtc.plugin.terminal import OutcomeCollector


def configure(config: pytest.Config) -> None:
    selection, explicit = options.selection(config)
    try:
        values = options.adapter_settings(config)
        for option in registry.adapter_options():
            value = values[option.name]
            problem = value is not None and option.problem(value)
            if problem:
                raise registry.SelectionError(problem)
        adapters = registry.resolve(selection, values)
        if not config.getoption("xtc_ignore_expectations"):
            for adapter in adapters:
                path = adapter.expectations_file()
                if path is not None:
                    expectations.load(path)
        user_cases = load_case_paths(config.getoption("xtc_cases"))
        from pytest_xtc.conformance import builtin_cases

        check_unique(user_cases, (c.id for c in builtin_cases()))
    except (registry.SelectionError, CaseFileError, expectations.ExpectationFileError) as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[state.KEY] = state.XtcSession(
        selection, explicit, adapters, user_cases, adapter_options=values
    )
    for module in (collection, outcomes, benchmarking):
        config.pluginmanager.register(module, f"xtc-{module.__name__.rpartition('.')[2]}-hooks")
    config.pluginmanager.register(OutcomeCollector(config), "xtc-summary")
    sharding.configure(config)
    explore.configure(config)
    reporting.configure(config)
    if explicit or user_cases:
        collection.add_suite_to_args(config)
