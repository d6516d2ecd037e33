"""Collecting the suite: its test module, one test per (target, case), with markers."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from pytest_xtc.core.suite import cases_for
from pytest_xtc.plugin import explore, state


def add_suite_to_args(config: pytest.Config) -> None:
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
        return importlib.import_module("pytest_xtc.conformance.test_conformance")


def pytest_pycollect_makemodule(
    module_path: Path, parent: pytest.Collector
) -> pytest.Module | None:
    from pytest_xtc.conformance import SUITE_MODULE

    if module_path.resolve() == SUITE_MODULE.resolve():
        return SuiteModule.from_parent(parent, path=module_path)
    return None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "xtc_case" not in metafunc.fixturenames:
        return
    from pytest_xtc.conformance import builtin_cases

    session = state.get(metafunc.config)
    if session is None:
        return
    cases = [*builtin_cases(), *session.user_cases]
    cases += explore.explored_cases(metafunc.config, cases)
    params = [
        pytest.param(adapter, case, id=f"{adapter.name}-{case.id}", marks=pytest.mark.xtc)
        for adapter in session.adapters
        for case in cases_for(adapter, cases)
    ]
    metafunc.parametrize(("xtc_adapter", "xtc_case"), params)
