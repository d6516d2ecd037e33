"""Collecting the suite: its test module, one test per (target, case), with markers.

The suite module's node id is its path relative to the rootdir when inside it (a
checkout), else its path in the package, ``pytest_xtc/conformance/test_conformance.py``:
the same on every machine, whatever the venv's location (JUnit's classname
``pytest_xtc.conformance.test_conformance``; a dashboard's history survives a moved venv).
Such a node id is passed back to pytest as it is: an argument naming that package path
where no such file exists is read as the installed suite module.

Markers, each registered (``--strict-markers`` accepts them; ``pytest --markers`` lists
them): ``xtc`` on every case, then the target (``host``, ``host_c``, ``nvgpu``...: its
name with ``-`` as ``_``, without a device ordinal), each op of the graph (``matmul``,
``conv2d``, ``relu``...), the dtype (``float32``, ``float64``), where the operands live
(``operands_host``, ``operands_device``, ``operands_mixed``) and the profile (``core``,
``extended``, ``device_memory``): ``-m "nvgpu and matmul and operands_mixed"``.
"""

from __future__ import annotations

import functools
import gc
import importlib
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_xtc.core.cases import twins
from pytest_xtc.core.cases.identity import test_id
from pytest_xtc.core.execution.suite import cases_for
from pytest_xtc.plugin import explore, state

if TYPE_CHECKING:
    from pytest_xtc.core.adapter import TargetAdapter
    from pytest_xtc.core.cases.case import Case

PLACEMENT_MARKERS = {
    "operands_host": "every operand of the case in host memory",
    "operands_device": "every operand of the case in device memory",
    "operands_mixed": "operands of the case in host and device memory",
}
_DECLARED = pytest.StashKey[set[str]]()
_UNKNOWN_IDS = pytest.StashKey[list[str]]()  # --xtc-case ids no selected target has
DTYPE_MARKERS = {
    "float32": "a case in float32",
    "float64": "a case in float64",
}


#: The suite module's node id outside the rootdir: its path in the installed package.
PACKAGE_PATH = "pytest_xtc/conformance/test_conformance.py"


def resolve_package_args(config: pytest.Config) -> None:
    """Arguments naming the suite by its package node id (``PACKAGE_PATH[::...]``) where
    no such file is, as the installed suite module."""
    from pytest_xtc.conformance import SUITE_MODULE

    root = config.invocation_params.dir
    for i, arg in enumerate(config.args):
        path, sep, rest = arg.partition("::")
        if path == PACKAGE_PATH and not (root / path).exists():
            config.args[i] = f"{SUITE_MODULE.resolve()}{sep}{rest}"


def add_suite_to_args(config: pytest.Config) -> None:
    """Make sure the suite module is collected when targets are chosen explicitly."""
    from pytest_xtc.conformance import SUITE_MODULE

    suite = SUITE_MODULE.resolve()
    root = config.invocation_params.dir
    resolve_package_args(config)
    for arg in config.args:
        path = (root / arg.split("::")[0]).resolve()
        if suite == path or path in suite.parents:
            return
    config.args.append(str(suite))


def suite_path(config: pytest.Config, path: Path) -> str:
    """The suite module's path for node ids: relative to the rootdir when inside it and
    not installed (a checkout), else :data:`PACKAGE_PATH` (``/``-separated either way)."""
    if _installed_in() is not None or {"site-packages", "dist-packages"} & set(path.parts):
        return PACKAGE_PATH
    try:
        return path.relative_to(config.rootpath).as_posix()
    except ValueError:
        return PACKAGE_PATH


@functools.cache
def _installed_in() -> Path | None:
    """The virtual environment holding the suite module, if any (its pyvenv.cfg)."""
    from pytest_xtc.conformance import SUITE_MODULE

    return next((d for d in SUITE_MODULE.resolve().parents if (d / "pyvenv.cfg").is_file()),
                None)


@pytest.hookimpl(tryfirst=True)
def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """pytest ignores virtual environments below the rootdir (``python3 -m venv env``
    then ``pytest --xtc-target=host`` in the same directory): in the one holding the
    suite, the directories leading to the suite module, and the module, are collected;
    anything else there stays ignored."""
    from pytest_xtc.conformance import SUITE_MODULE

    venv = _installed_in()
    if venv is None or not collection_path.resolve().is_relative_to(venv):
        return None
    # compared as found, not resolved: a venv's lib64 links to lib (the suite once only)
    suite = SUITE_MODULE.absolute()
    return not (collection_path == suite or collection_path in suite.parents)


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
        nodeid = suite_path(parent.config, module_path)
        return SuiteModule.from_parent(parent, path=module_path, nodeid=nodeid)
    return None


# -- markers ---------------------------------------------------------------------------


def marker_name(text: str) -> str:
    """A marker name for a target or op name: ``host-c`` -> ``host_c``."""
    name = re.sub(r"\W", "_", text.split("[", 1)[0]).strip("_").lower()
    return name if name and not name[0].isdigit() else f"xtc_{name}"


def placement_marker(case: Case) -> str:
    from pytest_xtc.core.cases.case import DEVICE

    where = set((case.placement or {}).values()) or {"host"}
    if where == {DEVICE}:
        return "operands_device"
    return "operands_mixed" if DEVICE in where else "operands_host"


def case_markers(adapter: TargetAdapter, case: Case) -> list[str]:
    """The marker names of one (target, case): target, ops, dtype, placement, profile."""
    from pytest_xtc.report.rules.profiles import profile_of

    names = [
        "xtc",
        marker_name(adapter.spec.base),
        *dict.fromkeys(marker_name(op) for op in case.ops),
        marker_name(case.dtype),
        placement_marker(case),
        marker_name(profile_of(case)),
    ]
    return list(dict.fromkeys(names))


def register_markers(config: pytest.Config) -> None:
    """Declare the markers: profiles, dtypes, placements, the selected targets and the ops
    of the session's cases (``pytest --markers`` lists them)."""
    from pytest_xtc.report.rules.profiles import PROFILES

    known = {**DTYPE_MARKERS, **PLACEMENT_MARKERS}
    known.update({marker_name(p): f"a case of the {p} profile: {d}" for p, d in PROFILES.items()})
    for adapter in state.adapters(config):
        known[marker_name(adapter.spec.base)] = f"a case run on the XTC target {adapter.spec.base}"
    session = state.get(config)
    ops = sorted({op for case in session.cases() for op in case.ops}) if session else []
    known.update({marker_name(op): f"a case whose graph holds the op {op}" for op in ops})
    _declare(config, known)


def _declare(config: pytest.Config, markers: dict[str, str]) -> None:
    declared = config.stash.setdefault(_DECLARED, set())
    for name, text in markers.items():
        if name not in declared:
            declared.add(name)
            config.addinivalue_line("markers", f"{name}: {text}")



# -- parametrization -------------------------------------------------------------------


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "xtc_case" not in metafunc.fixturenames:
        return
    session = state.get(metafunc.config)
    if session is None:
        return
    explored = [*explore.explored_cases(metafunc.config, session.cases()),
                *explore.fuzz_cases(metafunc.config)]
    chosen = [  # each twin right after its twin: it runs in the worker its twin kept
        (adapter, case)
        for adapter in session.adapters
        for case in twins.adjacent([
            case for case in [*session.planned(adapter), *cases_for(adapter, explored)]
            if session.selected(adapter.name, case.id)])
    ]
    if session.case_ids:
        found = {i for adapter, case in chosen for i in (case.id, test_id(adapter.name, case.id))}
        unknown = sorted(session.case_ids - found)
        if unknown:  # refused when collection ends: a usage error raised here would be
            metafunc.config.stash[_UNKNOWN_IDS] = unknown  # a collection error (exit 2)
    _declare(
        metafunc.config,
        {
            marker_name(op): f"a case whose graph holds the op {op}"
            for _, case in chosen
            for op in case.ops
        },
    )
    marks = _Marks()
    params = [
        pytest.param(adapter, case, id=test_id(adapter.name, case.id),
                     marks=marks.of(adapter, case))
        for adapter, case in chosen
    ]
    metafunc.parametrize(("xtc_adapter", "xtc_case"), params)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """The collected items live as long as the session: the cycle collector leaves them
    (and what they hold) alone from now on, instead of walking the catalog's thousands of
    items at every full collection and at pytest's own at the end (0.25 s each with
    7,000 items). The workers' forks already freeze what the process held before them.
    First, an ``--xtc-case`` id no selected target has is a usage error."""
    unknown = session.config.stash.get(_UNKNOWN_IDS, None)
    if unknown:
        raise pytest.UsageError(
            f"--xtc-case: no case of the selected targets has the id {', '.join(unknown)} "
            "(ids read TARGET-CASE as in the test ids, or CASE for every target)"
        )
    gc.freeze()


class _Marks:
    """Each (target, case)'s marks, made once per kind of case: explored cases share their
    base's graph, so thousands of them need a few dozen computations (one collection's
    life: the graphs it keys by stay alive meanwhile)."""

    def __init__(self) -> None:
        self._made: dict[tuple[object, ...], tuple[pytest.MarkDecorator, ...]] = {}

    def of(self, adapter: TargetAdapter, case: Case) -> tuple[pytest.MarkDecorator, ...]:
        where = tuple(sorted((case.placement or {}).items()))
        key = (adapter.spec.base, id(case.graph), case.dtype, where)
        if key not in self._made:
            self._made[key] = tuple(getattr(pytest.mark, n) for n in case_markers(adapter, case))
        return self._made[key]
