"""Selecting cases by what they are, not by what they are called. No pytest.

Expected failures (a target's) and waivers (the suite's) name the cases they cover with a
:class:`Selector`: an id pattern and/or properties (ops, dtypes, placements, schedule
primitives) and the XTC versions they apply to. A known upstream bug is then recognised in
every case that has its properties, a user case named anything included, and only on the
XTC versions that have it.

In data (YAML), every key is optional but one is needed; lists may be single values::

    pattern: "relu-float64-*"        # fnmatch over the case id
    ops: [conv2d, relu]              # the case's graph uses one of these ops
    dtypes: [float64]
    placements: [device, mixed]      # host: no operand on the device; device: all; mixed
    primitives: [vectorize]          # the case's schedule uses one of these primitives
    xtc: ">=0.3.1,<0.4"              # a version specifier over xtc-tools
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from pytest_xtc.core.cases.case import DEVICE, Case
from pytest_xtc.core.versions import installed

PLACEMENTS = ("host", "device", "mixed")
KEYS = ("pattern", "ops", "dtypes", "placements", "primitives", "xtc")


class SelectorError(ValueError):
    """A selector that cannot be read; the message says which key and why."""


@dataclass(frozen=True)
class Traits:
    """What a selector can see of a case."""

    id: str
    ops: frozenset[str]
    dtype: str
    placement: str  # one of PLACEMENTS
    primitives: frozenset[str]

    @classmethod
    def of(cls, case: Case) -> Traits:
        where = set((case.placement or {}).values()) or {"host"}
        placement = "mixed" if len(where) > 1 else ("device" if DEVICE in where else "host")
        return cls(case.id, frozenset(case.ops), case.dtype, placement,
                   case.schedule.primitives)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Traits:
        return cls(str(data["id"]), frozenset(data.get("ops", ())), str(data.get("dtype", "")),
                   str(data.get("placement", "host")), frozenset(data.get("primitives", ())))

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "ops": sorted(self.ops), "dtype": self.dtype,
                "placement": self.placement, "primitives": sorted(self.primitives)}


@dataclass(frozen=True)
class Selector:
    pattern: str | None = None
    ops: frozenset[str] | None = None
    dtypes: frozenset[str] | None = None
    placements: frozenset[str] | None = None
    primitives: frozenset[str] | None = None
    xtc: SpecifierSet | None = None

    def matches(self, traits: Traits, xtc_version: str | None) -> bool:
        """True when every property given matches ``traits`` (and the XTC version)."""
        if self.pattern is not None and not fnmatch.fnmatchcase(traits.id, self.pattern):
            return False
        if self.ops is not None and not self.ops & traits.ops:
            return False
        if self.dtypes is not None and traits.dtype not in self.dtypes:
            return False
        if self.placements is not None and traits.placement not in self.placements:
            return False
        if self.primitives is not None and not self.primitives & traits.primitives:
            return False
        return self.xtc is None or _version_in(xtc_version, self.xtc)

    def describe(self) -> str:
        parts = [f"{k}={v}" for k, v in self.to_dict().items()]
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.pattern is not None:
            data["pattern"] = self.pattern
        for key in ("ops", "dtypes", "placements", "primitives"):
            value = getattr(self, key)
            if value is not None:
                data[key] = sorted(value)
        if self.xtc is not None:
            data["xtc"] = str(self.xtc)
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any], where: str) -> Selector:
        """The selector part of an entry (other keys are the caller's to check)."""
        if not any(k in data for k in KEYS):
            raise SelectorError(f"{where}: names no case: give a pattern or properties "
                                f"({', '.join(KEYS)})")
        pattern = data.get("pattern")
        if pattern is not None and not isinstance(pattern, str):
            raise SelectorError(f"{where}: pattern must be a string, not {pattern!r}")
        placements = _names(data, "placements", where)
        if placements is not None and not placements <= set(PLACEMENTS):
            raise SelectorError(f"{where}: placements must be among {', '.join(PLACEMENTS)}")
        spec = data.get("xtc")
        xtc = None
        if spec is not None:
            try:
                xtc = SpecifierSet(str(spec))
            except InvalidSpecifier:
                raise SelectorError(f"{where}: xtc: {spec!r} is not a version specifier "
                                    "(e.g. '>=0.3.1,<0.4')") from None
        return cls(pattern, _names(data, "ops", where), _names(data, "dtypes", where),
                   placements, _names(data, "primitives", where), xtc)


def _names(data: Mapping[str, Any], key: str, where: str) -> frozenset[str] | None:
    value = data.get(key)
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(i, str) for i in items):
        raise SelectorError(f"{where}: {key} must be a name or a non-empty list of names")
    return frozenset(items)


def _version_in(version: str | None, spec: SpecifierSet) -> bool:
    if version is None:
        return False
    try:
        return Version(version) in spec
    except InvalidVersion:
        return False


def xtc_version() -> str | None:
    """The installed xtc-tools version, or None."""
    return installed("xtc-tools").get("xtc-tools")
