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
    values: [special]                # the case's input kind: random, exact or special
    output_elements: "<=1"           # elements of the graph's first output: N, <N, <=N,
                                     # >N, >=N (1: a one-point iteration space)
    whole_vectors: true              # the schedule vectorizes a tile of W elements and W
                                     # divides the output's innermost dimension
    node_placements: ["relu:host->device", "unpad:*->device"]
                                     # a node OP whose first operand is placed IN and its
                                     # result OUT (fnmatch; an intermediate is on the host)
    padded_unit_lead: true           # a node pads a size-1 dimension of its operand that
                                     # only size-1 dimensions precede (1xN padded on axis 0)
    backend: {use_tensor_dialect: true}  # the schedule sets these XTC backend options
                                     # (an option it does not set is XTC's default: false)
    scheduled_ops: [relu]            # the op of the node the schedule's steps schedule
    lead_trips: "1"                  # iterations of that node's outermost loop over its
                                     # result's leading dimension, after the schedule's
                                     # first tile of that loop (untiled: the dimension);
                                     # a count condition as output_elements
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from pytest_xtc import ops
from pytest_xtc.core.cases.schedule import BACKEND_OPTIONS
from pytest_xtc.core.cases.traits import Traits as Traits
from pytest_xtc.core.versions import installed

PLACEMENTS = ("host", "device", "mixed")
KEYS = ("pattern", "ops", "dtypes", "placements", "primitives", "xtc", "values",
        "output_elements", "whole_vectors", "node_placements", "padded_unit_lead",
        "backend", "scheduled_ops", "lead_trips", "intermediates", "attributes")
VALUES = ("random", "exact", "special", "wide", "large")
_COUNT = re.compile(r"^\s*(<=|>=|<|>|==)?\s*(\d+)\s*$")


class SelectorError(ValueError):
    """A selector that cannot be read; the message says which key and why."""


@dataclass(frozen=True)
class Selector:
    pattern: str | None = None
    ops: frozenset[str] | None = None
    dtypes: frozenset[str] | None = None
    placements: frozenset[str] | None = None
    primitives: frozenset[str] | None = None
    xtc: SpecifierSet | None = None
    values: frozenset[str] | None = None
    output_elements: str | None = None  # a count condition: "1", "<=1", ">=16"
    whole_vectors: bool | None = None
    node_placements: frozenset[str] | None = None
    padded_unit_lead: bool | None = None
    backend: tuple[tuple[str, Any], ...] | None = None
    scheduled_ops: frozenset[str] | None = None
    lead_trips: str | None = None  # a count condition, as output_elements
    intermediates: str | None = None  # a count condition, as output_elements
    attributes: frozenset[str] | None = None  # "op.attr": any of them set, not defaulted

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
        if not self._matches_shape(traits):
            return False
        return self.xtc is None or _version_in(xtc_version, self.xtc)

    def _matches_shape(self, traits: Traits) -> bool:
        """The keys on inputs, sizes, vectors and node placements."""
        if self.values is not None and traits.values not in self.values:
            return False
        if self.output_elements is not None and not (
            traits.output_elements and _count_holds(self.output_elements, traits.output_elements)
        ):
            return False
        if self.whole_vectors is not None and traits.whole_vectors != self.whole_vectors:
            return False
        if self.padded_unit_lead is not None and traits.padded_unit_lead != self.padded_unit_lead:
            return False
        if not self._matches_schedule(traits):
            return False
        return self.node_placements is None or any(
            fnmatch.fnmatchcase(p, pattern)
            for p in traits.node_placements for pattern in self.node_placements
        )

    def _matches_schedule(self, traits: Traits) -> bool:
        """The keys on the schedule: backend options, the scheduled op, its lead loop."""
        options = dict(traits.backend)
        if self.backend is not None and any(options.get(k, False) != v for k, v in self.backend):
            return False
        if self.scheduled_ops is not None and traits.scheduled_op not in self.scheduled_ops:
            return False
        if self.attributes is not None and not self.attributes & traits.attributes:
            return False
        if self.intermediates is not None and not _count_holds(self.intermediates,
                                                               traits.intermediates):
            return False
        return self.lead_trips is None or bool(
            traits.lead_trips and _count_holds(self.lead_trips, traits.lead_trips))

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
        if self.backend is not None:
            data["backend"] = dict(self.backend)
        for key in ("values", "node_placements", "scheduled_ops", "attributes"):
            if (names := getattr(self, key)) is not None:
                data[key] = sorted(names)
        for key in ("output_elements", "whole_vectors", "padded_unit_lead", "lead_trips",
                    "intermediates"):
            if (value := getattr(self, key)) is not None:
                data[key] = value
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
        values = _names(data, "values", where)
        if values is not None and not values <= set(VALUES):
            raise SelectorError(f"{where}: values must be among {', '.join(VALUES)}")
        count, trips, inner = (_count(data, k, where)
                               for k in ("output_elements", "lead_trips", "intermediates"))
        whole, unit = data.get("whole_vectors"), data.get("padded_unit_lead")
        for key, flag in (("whole_vectors", whole), ("padded_unit_lead", unit)):
            if flag is not None and not isinstance(flag, bool):
                raise SelectorError(f"{where}: {key} must be true or false, not {flag!r}")
        moves = _names(data, "node_placements", where)
        for move in moves or ():
            if not re.fullmatch(r"[\w*?+]+:[\w*?]+->[\w*?]+", move):
                raise SelectorError(f"{where}: node_placements: {move!r} is not OP:IN->OUT "
                                    "(e.g. relu:host->device)")
        attributes = _names(data, "attributes", where)
        for name in attributes or ():
            _check_attribute(name, where)
        return cls(pattern, _names(data, "ops", where), _names(data, "dtypes", where),
                   placements, _names(data, "primitives", where), xtc, values,
                   count, whole, moves, unit, _backend(data.get("backend"), where),
                   _names(data, "scheduled_ops", where), trips, inner, attributes)


def _check_attribute(name: str, where: str) -> None:
    """``op.attr`` naming an attribute an op of the registry declares, or a SelectorError."""
    op_name, _, attr = name.partition(".")
    try:
        declared: list[str] | None = [a.name for a in ops.get(op_name).attrs]
    except ops.OpError:
        declared = None
    if declared is None or attr not in declared:
        known = (f"{op_name} declares {', '.join(declared) or 'none'}" if declared is not None
                 else f"ops are {', '.join(ops.names())}")
        raise SelectorError(f"{where}: attributes: {name!r} is not OP.ATTRIBUTE of a known "
                            f"op ({known})")


def _count(data: Mapping[str, Any], key: str, where: str) -> str | None:
    count = data.get(key)
    if count is not None and (isinstance(count, bool) or not _COUNT.match(str(count))):
        raise SelectorError(f"{where}: {key} must be a count condition: N, <N, "
                            f"<=N, >N or >=N, not {count!r}")
    return None if count is None else str(count)


def _backend(options: Any, where: str) -> tuple[tuple[str, Any], ...] | None:
    """XTC backend options a selector names, each known and a boolean."""
    if options is None:
        return None
    known = ", ".join(BACKEND_OPTIONS)
    if not isinstance(options, Mapping) or not options:
        raise SelectorError(f"{where}: backend must be a mapping of XTC backend options "
                            f"({known}) to true or false")
    for key, value in options.items():
        if key not in BACKEND_OPTIONS or not isinstance(value, bool):
            raise SelectorError(f"{where}: backend: {key!r}: {value!r} is not a known option "
                                f"({known}) set to true or false")
    return tuple(sorted((str(k), v) for k, v in options.items()))


def _names(data: Mapping[str, Any], key: str, where: str) -> frozenset[str] | None:
    value = data.get(key)
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(i, str) for i in items):
        raise SelectorError(f"{where}: {key} must be a name or a non-empty list of names")
    return frozenset(items)


def _count_holds(condition: str, count: int) -> bool:
    match = _COUNT.match(condition)
    assert match is not None  # checked when read
    op, bound = match[1] or "==", int(match[2])
    return {"<": count < bound, "<=": count <= bound, ">": count > bound, ">=": count >= bound,
            "==": count == bound}[op]


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
