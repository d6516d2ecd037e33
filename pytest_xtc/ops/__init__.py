"""The ops the suite knows, one module each (``OP``, an :class:`~pytest_xtc.ops.spec.Op`,
and ``family``, the catalog's graph builder). Adding an op is adding a module here (and
catalog entries): the registry finds it. A graph node whose op this registry does not
declare is refused, never computed with a default."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from types import ModuleType

from pytest_xtc.ops.spec import Op, OpError

#: Modules of this package that hold shared machinery, not an op.
_SHARED = frozenset({"spec", "contraction", "builder"})


@cache
def modules() -> dict[str, ModuleType]:
    """Op name -> its module, for every op module of this package."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name in _SHARED:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        found[module.OP.name] = module
    return found


def get(name: str) -> Op:
    """The op called ``name``; OpError naming the known ops when there is none."""
    found = modules().get(name)
    if found is None:
        raise OpError(f"unknown op {name!r} (the suite knows {', '.join(sorted(modules()))})")
    return found.OP


def names() -> tuple[str, ...]:
    return tuple(sorted(modules()))


__all__ = ["Op", "OpError", "get", "modules", "names"]
