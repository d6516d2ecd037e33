"""What a selector can see of a case (:class:`Traits`), drawn from its graph, placement
and schedule, or read back from a report's record. No pytest.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_xtc.core.cases import graphs
from pytest_xtc.core.cases.case import DEVICE, HOST, Case, Schedule
from pytest_xtc.core.cases.lead import lead_loop, scheduled_node
from pytest_xtc.ops.pad import Pad


@dataclass(frozen=True)
class Traits:
    """What a selector can see of a case."""

    id: str
    ops: frozenset[str]
    dtype: str
    placement: str  # one of selectors.PLACEMENTS
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
    graph's operands by uid) with only size-1 dimensions before it (the padding in any
    spelling the op takes: :meth:`Pad.widths`)."""
    for node in graphs.nodes(case.graph):
        if not isinstance(node.op, Pad) or not node.args:
            continue
        shape = known[node.args[0]].shape
        for axis, pair in node.op.widths(node.attrs, len(shape)).items():
            if any(pair) and all(d == 1 for d in shape[: axis + 1]):
                return True
    return False
