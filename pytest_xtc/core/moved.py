"""Module paths of earlier pytest-xtc versions: the core's of 0.3, ``core/execution/``'s
before it was split by role (workers, adapters, the bridge to XTC) and ``report/``'s before
it was split by role (files, parts, rules, render): importing one still works, gives the
module at its new path and warns with that path and the version that removes the old one."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

_NEW_HOME = {
    "cases": "cases.case", "casefile": "cases.casefile", "graphs": "cases.graphs",
    "values": "cases.values", "selectors": "cases.selectors", "suite": "execution.suite",
    "textfile": "cases.textfile", "expectations": "cases.expectations",
    "reference": "judging.reference", "checking": "judging.checking",
    "precision": "judging.precision", "runner": "execution.runner", "work": "execution.work",
    "isolation": "workers.isolation", "remote": "execution.remote",
    "registry": "adapters.registry", "guard": "execution.guard",
    "placement": "execution.placement", "settings": "execution.settings",
    "perf": "execution.perf", "xtc_env": "xtc.xtc_env",
}
#: ``core/execution/`` split by role: module -> its new package
_EXECUTION_SPLIT = {
    **dict.fromkeys(("isolation", "serving", "containment", "hygiene", "transfer",
                     "interrupts"), "workers"),
    **dict.fromkeys(("registry", "adapter_declarations", "declcache"), "adapters"),
    **dict.fromkeys(("xtc_env", "runtime_cache", "scheduling"), "xtc"),
}
REMOVED_IN = "0.5"
#: old dotted path -> new dotted path (``cases`` became a package: see its ``__getattr__``)
MOVED = {f"pytest_xtc.core.{old}": f"pytest_xtc.core.{new}" for old, new in _NEW_HOME.items()
         if old != "cases"}
MOVED |= {"pytest_xtc.core.explore": "pytest_xtc.exploration.explore",
          "pytest_xtc.core.shrink": "pytest_xtc.exploration.shrink"}
MOVED |= {f"pytest_xtc.core.execution.{name}": f"pytest_xtc.core.{home}.{name}"
          for name, home in _EXECUTION_SPLIT.items()}
#: report/ by role in 0.4 (files, parts, rules, render; the verbs stay on top)
_REPORT_HOME = {
    "atomic": "files.atomic", "limits": "files.untrusted", "reasons": "parts.reasons",
    "schema": "parts.schema", "records": "parts.records", "model": "parts.model",
    "environment": "parts.environment", "profiles": "rules.profiles",
    "waivers": "rules.waivers", "caseset": "rules.caseset", "verdicts": "rules.verdicts",
    "text": "render.text", "checks": "render.check_lines", "chart": "render.chart",
    "summary": "render.summary", "formats": "render.formats", "rerun": "audit",
}
MOVED |= {f"pytest_xtc.report.{old}": f"pytest_xtc.report.{new}"
          for old, new in _REPORT_HOME.items()}


def warn_moved(old: str, new: str) -> None:
    warnings.warn(f"{old} moved in pytest-xtc 0.4: import {new} (or the vendor API from "
                  f"pytest_xtc); the old path is removed in {REMOVED_IN}", DeprecationWarning,
                  stacklevel=3)


class _Alias(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warn_moved(spec.name, self.new)
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """The module was executed at its new path already."""


class MovedFinder(importlib.abc.MetaPathFinder):
    """Resolves an old path to the module at its new one (the same object)."""

    def find_spec(self, fullname: str, path: object, target: object = None
                  ) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


def install() -> None:
    if not any(isinstance(finder, MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedFinder())
