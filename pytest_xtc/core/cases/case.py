"""Conformance cases: an XTC graph, a schedule, a dtype, input values and an error rule.

Cases are data. The built-in catalog (``conformance/catalog.yaml``) names graph families
with their shapes and schedules; user case files (``--xtc-cases``) hold an XTC graph YAML
(as ``Graph.dump`` writes it) with extra keys::

    schedules: {tiled: [{tile: [i, {i1: 4}]}]}   # XTC scheduler calls; default "none"
    # a step may give keyword arguments ({tile: [j, {j1: 16}], root: ./lo}); a schedule
    # may also be a mapping: {descript: SPEC, dims: [i, j, k]} (XTC's declarative
    # description), steps: [...], node: C, backend: {use_tensor_dialect: true}
    schedule_node: C                              # node the schedule applies to
    dtypes: [float32, float64]                    # default: the graph's own dtype
    values: [random, exact, special, wide, large] # input kinds; default random, exact
    align: [aligned, odd, aligned_then_odd]       # operands' placement per call; default aligned
    error_rule: {c: 1.0}                          # or "exact"; default: derived rule
"""

from __future__ import annotations

import copy
import hashlib
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from pytest_xtc.core.cases import casefile, graphs, schedule_rules
from pytest_xtc.core.cases.casefile import CaseFileError
from pytest_xtc.core.cases.graphs import GraphDict
from pytest_xtc.core.cases.schedule import (  # re-exported: where 0.3 code finds them
    BACKEND_OPTIONS,
    PRIMITIVE_PARAMS,
    REQUIRED,
    SCHEDULE_KEYS,
    Descript,
    Schedule,
    bind_step,
)
from pytest_xtc.core.cases.values import (
    contraction_depth,
    large_array,
    reached,
    roles,
    special_array,
    wide_array,
)
from pytest_xtc.core.limits import DEFAULT_MAX_CASE_BYTES
from pytest_xtc.ops.contraction import DEFAULT_C

VALUE_KINDS = casefile.VALUE_KINDS
DEFAULT_VALUE_KINDS = ("random", "exact")  # a user case file's default ``values``
HOST, DEVICE = "host", "device"
__all__ = ["BACKEND_OPTIONS", "DEVICE", "HOST", "PRIMITIVE_PARAMS", "REQUIRED", "SCHEDULE_KEYS",
           "Case", "Descript", "Schedule", "bind_step", "case_bytes", "check_unique",
           "load_case_file", "load_case_paths", "placements", "retype"]
@dataclass(frozen=True, eq=False)
class Case:
    """One conformance case: an XTC graph (``graph``, in XTC's YAML serialization) with a
    ``schedule``, the ``dtype`` of its inputs, the kind of input ``values`` (random, exact,
    special), where each operand lies (``placement``, None: all on the host) and the error
    rule its outputs are judged by (``c``, the constant of the contraction bound, or
    ``exact_rule``). ``op`` names its family (``matmul``, ``conv2d+relu``...) and ``shape``
    its output shape as a label (``13x11x7``); :attr:`id` is its name on every target
    (:mod:`.identity` adds the target)."""

    op: str  # family label: matmul, conv2d, matmul+relu, ...
    dtype: str
    shape: str  # e.g. 64x64x64
    schedule: Schedule
    graph: GraphDict
    values: str = "random"
    placement: Mapping[str, str] | None = None  # operand -> host | device; None: all host
    c: float = DEFAULT_C
    exact_rule: bool = False  # the case's own error rule demands bit-exact results
    source: str = "builtin"
    tags: frozenset[str] = field(default_factory=frozenset)
    #: Where the runner puts each operand's data (``core/execution/guard.py``): ``aligned``
    #: (256 bytes), ``element`` (one element past), ``odd`` (an odd byte offset).
    align: str = "aligned"
    #: A case whose graph differs from this one's only in attributes, in dtype or in
    #: shapes (``core/cases/twins.py``): this case runs right after it, in the same worker
    #: (a kernel cache keyed without them is caught).
    twin: Case | None = None

    @property
    def key(self) -> str:
        """Identity independent of target and placement: it seeds the inputs."""
        parts = [self.op, self.dtype, self.shape, self.schedule.name]
        if self.values != "random":
            parts.append(self.values)
        if self.align != "aligned":
            parts.append(f"{self.align}-offset")
        return "-".join(parts)

    @property
    def id(self) -> str:
        if self.placement is None:
            return self.key
        where = ",".join(
            f"{name}@{'dev' if p == DEVICE else 'host'}" for name, p in self.placement.items()
        )
        return f"{self.key}-{where}"

    @property
    def ops(self) -> tuple[str, ...]:
        return graphs.op_names(self.graph)

    @property
    def exact(self) -> bool:
        return self.exact_rule or self.values == "exact"

    def seed(self, base_seed: int, call: int = 0) -> int:
        """The seed of the inputs of the case's ``call``-th kernel call (0: the first)."""
        text = f"{base_seed}:{self.key}" + (f"#{call}" if call else "")
        digest = hashlib.sha256(text.encode()).digest()
        return int.from_bytes(digest[:4], "little")

    def make_inputs(
        self, seed: int, empty: Callable[[Any, Any], np.ndarray] = np.empty
    ) -> list[np.ndarray]:
        """Seeded inputs: uniform in [-1, 1), small integers for exact cases, uniform with
        IEEE special values at a few positions for special cases (:mod:`values`).
        ``empty(shape, dtype)`` allocates them (shared memory, for a worker)."""
        rng = np.random.default_rng(seed)
        arrays = []
        role = roles(self.graph) if self.values == "special" else {}
        depth = contraction_depth(self.graph) if self.values == "large" else 1
        for operand in graphs.inputs(self.graph):
            drawn: np.ndarray
            if self.values == "exact":
                drawn = rng.integers(-3, 4, size=operand.shape)
            elif self.values == "wide":
                drawn = wide_array(operand.shape, rng)
            elif self.values == "large":
                drawn = large_array(operand.shape, operand.dtype, rng, depth)
            elif self.values == "special":
                drawn = special_array(operand.shape, operand.dtype, rng,
                                      role.get(operand.uid, ""),
                                      reached(self.graph, operand.uid))
            else:
                drawn = rng.uniform(-1.0, 1.0, size=operand.shape)
            array = empty(drawn.shape, np.dtype(operand.dtype))
            np.copyto(array, drawn, casting="unsafe")  # as astype does
            arrays.append(array)
        return arrays

    def place(self, placement: Mapping[str, str]) -> Case:
        return replace(self, placement=dict(placement))


def retype(graph: GraphDict, dtype: str) -> GraphDict:
    """A copy of ``graph`` whose inputs all have ``dtype``."""
    graph = copy.deepcopy(graph)
    for entry in graph["inputs"]:
        entry["expr"]["type"]["dtype"] = dtype
    return graph


def placements(graph: GraphDict) -> list[dict[str, str]]:
    """The placement variants an accelerator runs: all on host, inputs, output, all on
    device, and XTC's own mixed test (first input on host, the rest on device)."""
    ins = [o.name for o in graphs.inputs(graph)]
    outs = [o.name for o in graphs.outputs(graph)]

    def where(on_device: set[str]) -> dict[str, str]:
        return {n: DEVICE if n in on_device else HOST for n in ins + outs}

    variants = [where(set()), where(set(ins)), where(set(outs)), where(set(ins + outs))]
    mixed = where(set(ins[1:] + outs))
    if mixed not in variants:
        variants.append(mixed)
    return variants


def case_bytes(case: Case) -> int:
    """Memory one case needs, about: every operand (inputs, each node's result) in its
    dtype, plus its float64 reference value and error bound."""
    total = 0
    for operand in graphs.operands(case.graph).values():
        size = math.prod(operand.shape)
        total += size * (np.dtype(operand.dtype).itemsize + 16)
    return total


def load_case_file(path: Path, max_case_bytes: int = DEFAULT_MAX_CASE_BYTES) -> list[Case]:
    """The cases of one user case file, validated (:mod:`casefile`) before anything is
    built; a case needing more than ``max_case_bytes`` is refused, unless it is a model's
    layer (``source``): real shapes, kept, and skipped naming the budget when run."""
    data = casefile.read(path)
    graph: GraphDict = {k: data[k] for k in ("name", "inputs", "nodes", "outputs") if k in data}
    graph.setdefault("name", path.stem)
    try:
        known = graphs.operands(graph)
        out_shape = "x".join(map(str, graphs.outputs(graph)[0].shape))
    except graphs.GraphError as exc:  # an op, attribute or shape the registry refuses
        raise CaseFileError(f"{path}: malformed graph: {exc}") from None
    except Exception as exc:  # a graph the shape rules cannot follow
        raise CaseFileError(f"{path}: malformed graph: {type(exc).__name__}: {exc}") from None
    for operand in known.values():
        if any(not isinstance(d, int) or d <= 0 for d in operand.shape):
            raise CaseFileError(
                f"{path}: malformed graph: {operand.name} would have shape "
                f"{list(operand.shape)}; every dimension must be above 0"
            )
    schedules = _schedules(path, data, graph)
    own_dtype = graph["inputs"][0]["expr"]["type"]["dtype"]
    rule = data.get("error_rule") or {}
    exact_rule = rule == "exact"
    c = float(rule.get("c", DEFAULT_C)) if isinstance(rule, dict) else DEFAULT_C
    values = data.get("values") or list(DEFAULT_VALUE_KINDS)
    found = [
        Case(
            graph["name"],
            dtype,
            out_shape,
            schedule,
            retype(graph, dtype),
            kind,
            c=c,
            exact_rule=exact_rule,
            source=str(path),
            align=align,
        )
        for dtype in data.get("dtypes") or [own_dtype]
        for schedule in schedules
        for kind in values
        for align in data.get("align") or ["aligned"]
    ]
    for case in found:
        needed = case_bytes(case)
        if needed > max_case_bytes and "source" not in data:  # imported layers: skipped
            raise CaseFileError(
                f"{path}: case {case.id} needs about {needed / 2**20:,.0f} MiB for its operands "
                f"and reference, over the budget of {max_case_bytes / 2**20:,.0f} MiB; "
                "use smaller shapes (or raise --xtc-max-case-bytes)"
            )
    return found


def _schedules(path: Path, data: dict[str, Any], graph: GraphDict) -> list[Schedule]:
    """A case file's schedules, their nodes resolved and their preconditions checked."""
    aliases = schedule_rules.name_nodes(graph["nodes"])
    ops_by_name = {n.name: n.op for n in graphs.nodes(graph)}
    node = data.get("schedule_node")
    schedules = []
    for name, steps in (data.get("schedules") or {"none": []}).items():
        try:
            schedule = schedule_rules.resolve_nodes(Schedule.from_data(name, steps, node), aliases)
            schedule_rules.check_declared(schedule, ops_by_name)
        except (CaseFileError, schedule_rules.InvalidSchedule) as exc:
            where = "" if str(exc).startswith("schedule ") else f"schedule {name!r}: "
            raise CaseFileError(f"{path}: schedules: {where}{exc}") from None
        schedules.append(schedule)
    return schedules


def load_case_paths(
    paths: Sequence[str | Path], max_case_bytes: int = DEFAULT_MAX_CASE_BYTES
) -> list[Case]:
    """Cases from files and directories (``*.yaml`` / ``*.yml``, recursively)."""
    found: list[Case] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files = sorted([*path.rglob("*.yaml"), *path.rglob("*.yml")])
            if not files:  # a slip (the wrong folder), never "no cases of mine: all passed"
                raise CaseFileError(f"{path}: no case file (*.yaml, *.yml) in this directory; "
                                    "name the directory that holds them, or a case file")
        elif os.path.lexists(path):
            files = [path]  # not a regular file: refused by casefile.read, before reading
        else:
            raise CaseFileError(f"{path}: no such case file or directory")
        for file in files:
            found.extend(load_case_file(file, max_case_bytes))
    from pytest_xtc.core.cases import twins  # it builds on this module

    return twins.pair(twins.distinguish(found))


def check_unique(cases: Sequence[Case], builtin: Iterable[str]) -> None:
    """Refuse two user cases with one id, or a user case with a built-in case's id
    (``builtin``: those ids)."""
    reserved = set(builtin)
    seen: dict[str, str] = {}
    for case in cases:
        if case.id in reserved:
            raise CaseFileError(
                f"{case.source}: case {case.id} has the id of a built-in case; "
                "rename the graph (its name key) or the schedule"
            )
        if case.id in seen:
            raise CaseFileError(f"case {case.id} defined twice ({seen[case.id]}, {case.source})")
        seen[case.id] = case.source
