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
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from pytest_xtc import ops
from pytest_xtc.core.cases import graphs
from pytest_xtc.core.cases.case import DEVICE, HOST, Case, Schedule
from pytest_xtc.core.cases.lead import lead_loop, scheduled_node
from pytest_xtc.core.cases.schedule import BACKEND_OPTIONS
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
class Traits:
    """What a selector can see of a case."""

    id: str
    ops: frozenset[str]
    dtype: str
    placement: str  # one of PLACEMENTS
    primitives: frozenset[str]
    values: str = "random"
    output_elements: int = 0  # 0: not known (a bare id)
    whole_vectors: bool = False
    node_placements: frozenset[str] = frozenset()  # "op:in->out"
    padded_unit_lead: bool = False
    backend: tuple[tuple[str, Any], ...] = ()  # the schedule's XTC backend options, sorted
    scheduled_op: str = ""  # "": not known (a bare id, an older record)
    lead_trips: int = 0  # 0: not known
    intermediates: int = 0  # node results left between nodes (:func:`_intermediates`)
    attributes: frozenset[str] = frozenset()  # "op.attr" set to other than its default

    @classmethod
    def of(cls, case: Case) -> Traits:
        where = set((case.placement or {}).values()) or {"host"}
        placement = "mixed" if len(where) > 1 else ("device" if DEVICE in where else "host")
        known = graphs.operands(case.graph)
        out = known[case.graph["outputs"][0]["uid"]].shape
        return cls(case.id, frozenset(case.ops), case.dtype, placement,
                   case.schedule.primitives, case.values, math.prod(out),
                   _whole_vectors(case.schedule, out[-1] if out else 1),
                   _node_placements(case), _padded_unit_lead(case, known),
                   tuple(sorted(case.schedule.backend)), *lead_loop(case, known),
                   _intermediates(case), _set_attributes(case))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Traits:
        return cls(str(data["id"]), frozenset(data.get("ops", ())), str(data.get("dtype", "")),
                   str(data.get("placement", "host")), frozenset(data.get("primitives", ())),
                   str(data.get("values", "random")), int(data.get("output_elements", 0)),
                   bool(data.get("whole_vectors", False)),
                   frozenset(data.get("node_placements", ())),
                   bool(data.get("padded_unit_lead", False)),
                   tuple(sorted(dict(data.get("backend") or {}).items())),
                   str(data.get("scheduled_op", "")), int(data.get("lead_trips", 0)),
                   int(data.get("intermediates", 0)),
                   frozenset(data.get("attributes", ())))

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "ops": sorted(self.ops), "dtype": self.dtype,
                "placement": self.placement, "primitives": sorted(self.primitives),
                "values": self.values, "output_elements": self.output_elements,
                "whole_vectors": self.whole_vectors,
                "node_placements": sorted(self.node_placements),
                "padded_unit_lead": self.padded_unit_lead, "backend": dict(self.backend),
                "scheduled_op": self.scheduled_op, "lead_trips": self.lead_trips,
                "intermediates": self.intermediates, "attributes": sorted(self.attributes)}


def _whole_vectors(schedule: Schedule, innermost: int) -> bool:
    """Whether the schedule vectorizes a tile whose width divides ``innermost``."""
    widths: list[Any] = []
    tiles: dict[str, Any] = {}
    for primitive, args in schedule.steps:
        if primitive == "tile" and len(args) > 1 and isinstance(args[1], Mapping):
            tiles.update({str(k): v for k, v in args[1].items()})
        elif primitive == "vectorize" and args:
            axes = args[0] if isinstance(args[0], (list, tuple)) else [args[0]]
            widths += [tiles.get(str(a)) for a in axes]
    spec = schedule.descript.spec if schedule.descript is not None else None
    if isinstance(spec, Mapping):
        for key, value in spec.items():
            marks = value if isinstance(value, Mapping) else {str(value): None}
            if "#" in str(key) and any("vectorize" in str(m) for m in marks):
                widths.append(str(key).partition("#")[2])
    sizes = [int(w) for w in map(str, widths) if w.isdigit() and int(w) > 0]
    return any(innermost % w == 0 for w in sizes)


#: Ops whose result a consumer computes where it reads it once the schedule fuses them
#: into it (``fuse_producer_at``): padding (bounds checks) leaves no buffer; any other
#: fused producer keeps one, the size of the consumer's tile.
_INLINED_WHEN_FUSED = frozenset({"pad", "pad2d"})


def _intermediates(case: Case) -> int:
    """How many node results are neither a graph output nor inlined into their consumer:
    the buffers a compiler must allocate between nodes (:data:`_INLINED_WHEN_FUSED`)."""
    found = graphs.nodes(case.graph)
    if not found:
        return 0
    outputs = {o["uid"] for o in case.graph["outputs"]}
    inner = {node.uid for node in found if node.uid not in outputs}
    producers = {node.uid: node for node in found}
    scheduled = scheduled_node(case, found)
    for primitive, args in case.schedule.steps:
        if primitive != "fuse_producer_at" or len(args) < 2 or not isinstance(args[1], int):
            continue
        if 0 <= args[1] < len(scheduled.args):
            producer = producers.get(scheduled.args[args[1]])
            if producer is not None and producer.op.name in _INLINED_WHEN_FUSED:
                inner.discard(producer.uid)
    return len(inner)


def _set_attributes(case: Case) -> frozenset[str]:
    """Each node attribute given a value other than its op's default, as ``op.attr``."""
    return frozenset(f"{node.op.name}.{attr.name}" for node in graphs.nodes(case.graph)
                     for attr in node.op.attrs
                     if attr.name in node.attrs and node.attrs[attr.name] != attr.default)


def _node_placements(case: Case) -> frozenset[str]:
    """Each node as ``op:in->out``: where its first operand and its result are placed."""
    where = case.placement or {}
    placed = {o.uid: where.get(o.name, HOST) for o in graphs.inputs(case.graph)}
    outputs = {o["uid"] for o in case.graph["outputs"]}
    found = set()
    for node in graphs.nodes(case.graph):
        result = where.get(node.name, HOST) if node.uid in outputs else HOST
        found.add(f"{node.op.name}:{placed.get(node.args[0], HOST)}->{result}")
        placed[node.uid] = result
    return frozenset(found)


def _padded_unit_lead(case: Case, known: Mapping[str, graphs.Operand]) -> bool:
    """Whether a node pads a size-1 dimension of its first operand (``known``: the
    graph's operands by uid) with only size-1 dimensions before it (the padding
    attribute, normalized: {axis: (before, after)})."""
    for node in graphs.nodes(case.graph):
        widths = node.attrs.get("padding")
        if not isinstance(widths, Mapping) or not node.args:
            continue
        shape = known[node.args[0]].shape
        for axis, pair in widths.items():
            padded = isinstance(pair, (list, tuple)) and any(pair)
            if padded and 0 <= int(axis) < len(shape) and all(d == 1 for d in
                                                              shape[: int(axis) + 1]):
                return True
    return False


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
