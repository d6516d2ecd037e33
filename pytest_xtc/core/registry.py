"""Finding adapters through entry points, and turning a selection string into adapters."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib.metadata import EntryPoint, entry_points

from pytest_xtc.core.adapter import BrokenAdapter, OptionSpec, TargetAdapter, TargetSpec, Tier

GROUP = "pytest_xtc.targets"
DEFAULT_SELECTION = "host"
_NAME = re.compile(r"^(?P<base>[A-Za-z0-9_.-]+?)(?:\[(?P<ordinal>\d+)\])?$")


class SelectionError(ValueError):
    """A selection names a target that is not registered, or is malformed."""


@cache
def registered() -> dict[str, EntryPoint]:
    """Every adapter entry point, by target name."""
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def adapter_options() -> list[OptionSpec]:
    """Options declared by every adapter that imports; duplicates are merged by name."""
    found: dict[str, OptionSpec] = {}
    for ep in registered().values():
        try:
            factory = ep.load()
        except Exception:  # a broken adapter must not break option parsing
            continue
        for option in getattr(factory, "options", ()):
            found.setdefault(option.name, option)
    return list(found.values())


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


def load(selected: Selected, options: Mapping[str, str | None]) -> TargetAdapter:
    """Build one adapter; any failure gives a BrokenAdapter carrying the error."""
    spec = TargetSpec(selected.name, selected.base, selected.ordinal, dict(options))
    try:
        factory = registered()[selected.base].load()
        adapter = factory(spec)
    except Exception as exc:
        return BrokenAdapter(spec, f"{type(exc).__name__}: {exc}")
    if not isinstance(adapter, TargetAdapter):
        return BrokenAdapter(spec, f"entry point gave {type(adapter).__name__}, not an adapter")
    return adapter


def resolve(
    selection: str | Iterable[str], options: Mapping[str, str | None]
) -> list[TargetAdapter]:
    """Adapters for a selection. ``all``: every registered one; ``auto``: every available."""
    known = registered()
    adapters: dict[str, TargetAdapter] = {}
    for selected in parse(selection):
        if selected.name in ("all", "auto"):
            for name in sorted(known):
                adapter = load(Selected(name, name, None), options)
                if selected.name == "all" or adapter.status().tier is Tier.EXECUTE:
                    adapters.setdefault(name, adapter)
            continue
        if selected.base not in known:
            names = ", ".join(sorted(known)) or "(none)"
            raise SelectionError(
                f"unknown XTC target {selected.name!r}; registered targets: {names}, all, auto"
            )
        adapters.setdefault(selected.name, load(selected, options))
    return list(adapters.values())
