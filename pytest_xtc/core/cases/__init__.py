"""What a case is: catalog entries and case files, graphs, seeded inputs, selectors over a
case's properties, expected failures. Imports nothing above ``ops`` and the core's vocabulary."""

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    """``from pytest_xtc.core.cases import Case`` (pytest-xtc 0.3, when this was a module)
    still works and warns: the names live in ``pytest_xtc.core.cases.case``."""
    if name.startswith("_"):
        raise AttributeError(name)
    try:
        return importlib.import_module(f"{__name__}.{name}")  # a module of this package
    except ModuleNotFoundError as error:
        if error.name != f"{__name__}.{name}":
            raise
    case = importlib.import_module(f"{__name__}.case")
    if not hasattr(case, name):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from pytest_xtc.core import moved

    moved.warn_moved(f"{__name__}.{name}", f"{__name__}.case.{name}")
    return getattr(case, name)
