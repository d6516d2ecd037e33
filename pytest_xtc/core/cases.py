"""Conformance cases: an XTC graph, a schedule, a dtype, input values and an error rule.

Cases are data. The built-in catalog (``conformance/catalog.yaml``) names graph families
with their shapes and schedules; user case files (``--xtc-cases``) hold an XTC graph YAML
(as ``Graph.dump`` writes it) with extra keys::

    schedules: {tiled: [{tile: [i, {i1: 4}]}]}   # XTC scheduler calls; default "none"
    schedule_node: C                              # node the schedule applies to
    dtypes: [float32, float64]                    # default: the graph's own dtype
    values: [random, exact, special]              # input kinds; default random, exact
    error_rule: {c: 1.0}                          # or "exact"; default: derived rule
"""

from __future__ import annotations

import copy
import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from pytest_xtc.core import casefile, graphs
from pytest_xtc.core.casefile import CaseFileError
from pytest_xtc.core.graphs import GraphDict
from pytest_xtc.core.limits import DEFAULT_MAX_CASE_BYTES
from pytest_xtc.core.reference import DEFAULT_C
from pytest_xtc.core.values import special_array

VALUE_KINDS = casefile.VALUE_KINDS
DEFAULT_VALUE_KINDS = ("random", "exact")  # a user case file's default ``values``
HOST, DEVICE = "host", "device"


@dataclass(frozen=True)
class Schedule:
    """A named list of XTC scheduler calls, e.g. ``("tile", ("i", {"i1": 4}))``."""

    name: str = "none"
    steps: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    node: str | None = None

    @property
    def primitives(self) -> frozenset[str]:
        return frozenset(step for step, _ in self.steps)

    @classmethod
    def from_data(cls, name: str, steps: Iterable[Any], node: str | None = None) -> Schedule:
        parsed = []
        for step in steps or ():
            if not isinstance(step, Mapping) or len(step) != 1:
                raise CaseFileError(f"schedule {name!r}: each step is {{primitive: [args]}}")
            ((primitive, args),) = step.items()
            if primitive == "node":  # {node: C} picks the node the next steps schedule
                node = str(args)
                continue
            args = args if isinstance(args, list) else [args]
            parsed.append((str(primitive), tuple(args)))
        return cls(name, tuple(parsed), node)

    def with_steps(self, *steps: tuple[str, tuple[Any, ...]]) -> Schedule:
        """This schedule with target-specific steps appended (an adapter's business)."""
        return replace(self, steps=self.steps + tuple(steps))


@dataclass(frozen=True, eq=False)
class Case:
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

    @property
    def key(self) -> str:
        """Identity independent of target and placement: it seeds the inputs."""
        parts = [self.op, self.dtype, self.shape, self.schedule.name]
        if self.values != "random":
            parts.append(self.values)
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

    def make_inputs(self, seed: int) -> list[np.ndarray]:
        """Seeded inputs: uniform in [-1, 1), small integers for exact cases, uniform with
        IEEE special values at a few positions for special cases (:mod:`values`)."""
        rng = np.random.default_rng(seed)
        arrays = []
        for operand in graphs.inputs(self.graph):
            if self.values == "exact":
                array = rng.integers(-3, 4, size=operand.shape).astype(operand.dtype)
            elif self.values == "special":
                array = special_array(operand.shape, operand.dtype, rng)
            else:
                array = rng.uniform(-1.0, 1.0, size=operand.shape).astype(operand.dtype)
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


def load_case_file(path: Path, max_case_bytes: int = DEFAULT_MAX_CASE_BYTES) -> list[Case]:
    """The cases of one user case file, validated (:mod:`casefile`) before anything is
    built; a case needing more than ``max_case_bytes`` is refused."""
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
    node = data.get("schedule_node")
    try:
        schedules = [
            Schedule.from_data(name, steps, node)
            for name, steps in (data.get("schedules") or {"none": []}).items()
        ]
    except CaseFileError as exc:
        raise CaseFileError(f"{path}: schedules: {exc}") from None
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
        )
        for dtype in data.get("dtypes") or [own_dtype]
        for schedule in schedules
        for kind in values
    ]
    for case in found:
        needed = case_bytes(case)
        if needed > max_case_bytes:
            raise CaseFileError(
                f"{path}: case {case.id} needs about {needed / 2**20:,.0f} MiB for its operands "
                f"and reference, over the budget of {max_case_bytes / 2**20:,.0f} MiB; "
                "use smaller shapes (or raise --xtc-max-case-bytes)"
            )
    return found


def case_bytes(case: Case) -> int:
    """Memory one case needs, about: every operand (inputs, each node's result) in its
    dtype, plus its float64 reference value and error bound."""
    total = 0
    for operand in graphs.operands(case.graph).values():
        size = math.prod(operand.shape)
        total += size * (np.dtype(operand.dtype).itemsize + 16)
    return total


def load_case_paths(
    paths: Sequence[str | Path], max_case_bytes: int = DEFAULT_MAX_CASE_BYTES
) -> list[Case]:
    """Cases from files and directories (``*.yaml`` / ``*.yml``, recursively)."""
    found: list[Case] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files = sorted([*path.rglob("*.yaml"), *path.rglob("*.yml")])
        elif path.is_file():
            files = [path]
        else:
            raise CaseFileError(f"{path}: no such case file or directory")
        for file in files:
            found.extend(load_case_file(file, max_case_bytes))
    return found


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

