"""The selftest's faulty variants as targets anyone can run by name:
``pytest --xtc-target=selftest-<variant>`` (``xtc-conformance selftest --list`` names
them), to see what a failure looks like on any machine with the host target.

Generic over the selftest's registry (:data:`pytest_xtc.selftest.faults.FAULTS`): a
variant added there is a target here. They are no entry points (``all`` and
``--xtc-list-targets`` leave them out): the registry resolves a ``selftest-`` name to
:func:`by_name`. Each runs with the host's expected-failure file, so what fails is the
fault, not XTC's known bugs.
"""

from __future__ import annotations

import inspect
from pathlib import Path

from pytest_xtc.core.adapter import TargetSpec
from pytest_xtc.core.adapters.registry import SELFTEST_PREFIX, SelectionError
from pytest_xtc.report.render.text import visible
from pytest_xtc.selftest.faults import FAULTS
from pytest_xtc.targets.host import HostTarget

#: The host's expected failures (XTC's own bugs), which every variant shares.
HOST_EXPECTATIONS = Path(inspect.getfile(HostTarget)).with_suffix(".expectations.yaml")


def names() -> list[str]:
    """Every runnable variant's target name, sorted."""
    return sorted(f"{SELFTEST_PREFIX}{name}" for name in FAULTS)


def describe(name: str) -> str:
    """The first line of the variant's docstring: what goes wrong."""
    doc = inspect.getdoc(FAULTS[name.removeprefix(SELFTEST_PREFIX)]) or ""
    return " ".join(doc.split("\n\n")[0].split())


def check_selection(names_selected: list[str]) -> None:
    """Raise SelectionError (one line) for a ``selftest-`` name no variant has."""
    for name in names_selected:
        if name.startswith(SELFTEST_PREFIX) and name not in names():
            raise SelectionError(
                f"unknown selftest variant {name!r}; `xtc-conformance selftest --list` "
                f"names the {len(FAULTS)} variants (e.g. {names()[0]})")


def by_name(spec: TargetSpec) -> HostTarget:
    """The adapter of target ``selftest-<variant>``: the variant, with the host's
    expected-failure file."""
    variant = FAULTS.get(spec.base.removeprefix(SELFTEST_PREFIX))
    if variant is None or not spec.base.startswith(SELFTEST_PREFIX):
        raise ValueError(f"{spec.base!r} is no selftest variant")

    class Runnable(variant):  # type: ignore[valid-type,misc]
        __doc__ = variant.__doc__

        def expectations_file(self) -> Path | None:
            return HOST_EXPECTATIONS if HOST_EXPECTATIONS.is_file() else None

    Runnable.__name__ = Runnable.__qualname__ = variant.__name__
    return Runnable(spec)


def print_list() -> int:
    """``xtc-conformance selftest --list``: each variant's target name and what goes wrong."""
    for name in names():
        print(visible(f"{name}: {describe(name)}"))
    print(f"{len(names())} variants; run one: pytest --xtc-target={names()[0]}")
    return 0
