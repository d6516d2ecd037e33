"""Turning a selection string into adapters: each one built in a worker process
(:mod:`remote`), never imported here (with isolation). What the adapters declare (entry
points, options, facts) is read by :mod:`adapter_declarations`, whose names are handed on
from here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint
from pathlib import Path

from pytest_xtc.core.adapter import BrokenAdapter, TargetAdapter, TargetSpec, Tier
from pytest_xtc.core.adapters.adapter_declarations import (
    GROUP,
    RESERVED_OPTIONS,
    Declarations,
    DuplicateTarget,
    adapter_options,
    option_declarations,
    registered,
)
from pytest_xtc.core.execution.remote import HostLimits, IsolatedAdapter
from pytest_xtc.core.workers import isolation

__all__ = [  # the declarations' names are handed on
    "DEFAULT_SELECTION", "GROUP", "RESERVED_OPTIONS", "Declarations", "DuplicateTarget",
    "Selected",
    "SelectionError", "adapter_options", "load", "option_declarations", "parse", "registered",
    "resolve",
]

DEFAULT_SELECTION = "host"
_NAME = re.compile(r"^(?P<base>[A-Za-z0-9_.-]+?)(?:\[(?P<ordinal>\d+)\])?$")


class SelectionError(ValueError):
    """A selection names a target that is not registered, or is malformed."""


@dataclass(frozen=True)
class Selected:
    name: str
    base: str
    ordinal: int | None


def parse(selection: str | Iterable[str]) -> list[Selected]:
    """Split ``"host,nvgpu[1]"`` into names; ``all`` and ``auto`` are kept as names."""
    parts = selection.split(",") if isinstance(selection, str) else list(selection)
    result: list[Selected] = []
    for raw in parts:
        name = raw.strip()
        if not name:
            continue
        match = _NAME.match(name)
        if match is None:
            raise SelectionError(f"malformed target name {name!r}; use NAME or NAME[ORDINAL]")
        ordinal = match["ordinal"]
        result.append(Selected(name, match["base"], int(ordinal) if ordinal else None))
    if not result:
        raise SelectionError("no target selected")
    return result


#: ``selftest-<variant>``: the selftest's faulty host variants by name, built by
#: pytest_xtc/selftest/targets.py (no entry points: not in ``all``, not listed).
SELFTEST_PREFIX = "selftest-"
SELFTEST_FACTORY = "pytest_xtc.selftest.targets:by_name"


def _entry(base: str) -> EntryPoint | None:
    """The entry point of target ``base``: registered, or a selftest variant's."""
    known = registered()
    if base in known:
        return known[base]
    if base.startswith(SELFTEST_PREFIX):
        return EntryPoint(name=base, value=SELFTEST_FACTORY, group=GROUP)
    return None


def load(
    selected: Selected,
    options: Mapping[str, str | None],
    isolate: bool = True,
    limits: HostLimits | None = None,
) -> TargetAdapter:
    """Build one adapter; any failure gives an unavailable adapter carrying the cause.
    With ``isolate`` (and ``fork``), an :class:`IsolatedAdapter`: the adapter is imported,
    built and called only in a worker process, under time limits."""
    spec = TargetSpec(selected.name, selected.base, selected.ordinal, dict(options))
    problems = option_declarations().problems.get(selected.base)
    if problems:
        return BrokenAdapter(spec, "; ".join(problems))
    entry = _entry(selected.base)
    if entry is None:  # resolve() refuses an unknown name first
        return BrokenAdapter(spec, f"no target {selected.base!r} is registered")
    if isolate and isolation.available():
        known = option_declarations().expectations.get(selected.base)
        static = Path(known) if known is not None else None
        proxy = IsolatedAdapter(spec, entry, limits or HostLimits(), static)
        proxy.deterministic = selected.base not in option_declarations().varying
        proxy.placements = option_declarations().placements.get(selected.base)
        return proxy
    try:
        factory = entry.load()
        adapter = factory(spec)
    except Exception as exc:
        return BrokenAdapter(spec, f"{type(exc).__name__}: {exc}")
    if not isinstance(adapter, TargetAdapter):
        return BrokenAdapter(spec, f"entry point gave {type(adapter).__name__}, not an adapter")
    return adapter


def resolve(
    selection: str | Iterable[str],
    options: Mapping[str, str | None],
    isolate: bool = True,
    limits: HostLimits | None = None,
) -> list[TargetAdapter]:
    """Adapters for a selection. ``all``: every registered one; ``auto``: every available.
    ``isolate`` and ``limits``: see :func:`load` (``--xtc-no-isolation``,
    ``--xtc-probe-timeout``)."""
    known = registered()
    adapters: dict[str, TargetAdapter] = {}
    for selected in parse(selection):
        if selected.name in ("all", "auto"):
            every = [load(Selected(n, n, None), options, isolate, limits) for n in sorted(known)]
            for adapter in every:  # their hosts load and probe side by side
                if isinstance(adapter, IsolatedAdapter):
                    adapter.warm()
            for adapter in every:
                keep = selected.name == "all" or adapter.status().tier is Tier.EXECUTE
                if keep and adapters.setdefault(adapter.name, adapter) is adapter:
                    continue
                if isinstance(adapter, IsolatedAdapter):
                    adapter.stop()  # not kept: its host goes
            continue
        if selected.base not in known and _entry(selected.base) is None:
            names = ", ".join(sorted(known)) or "(none)"
            raise SelectionError(
                f"unknown XTC target {selected.name!r}; registered targets: {names}, all, auto"
            )
        numbered = option_declarations().numbered
        if selected.ordinal is not None and selected.base not in numbered:
            takers = ", ".join(sorted(numbered)) or "none"
            raise SelectionError(
                f"target {selected.base!r} has no numbered devices: select {selected.base!r} "
                f"without [{selected.ordinal}] (targets that take one: {takers})"
            )
        adapters.setdefault(selected.name, load(selected, options, isolate, limits))
    return list(adapters.values())
