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
    values: [random, exact, special]              # input kinds; default random, exact
    error_rule: {c: 1.0}                          # or "exact"; default: derived rule
"""

from __future__ import annotations

import copy
import hashlib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from pytest_xtc.core.cases import casefile, graphs, schedule_rules
from pytest_xtc.core.cases.casefile import CaseFileError
from pytest_xtc.core.cases.graphs import GraphDict
from pytest_xtc.core.cases.values import special_array
from pytest_xtc.core.limits import DEFAULT_MAX_CASE_BYTES
from pytest_xtc.ops.contraction import DEFAULT_C

VALUE_KINDS = casefile.VALUE_KINDS
DEFAULT_VALUE_KINDS = ("random", "exact")  # a user case file's default ``values``
HOST, DEVICE = "host", "device"


#: XTC's scheduler primitives (``xtc.itf.schd.scheduler.Scheduler``) and their parameters
#: after ``self``, with defaults (``REQUIRED`` where none): keyword arguments of a step
#: are bound to positions with these, so that a step is always ``(primitive, args)``.
REQUIRED = object()
PRIMITIVE_PARAMS: dict[str, tuple[tuple[str, Any], ...]] = {
    "set_dims": (("dims", REQUIRED),),
    "split": (("dim", REQUIRED), ("segments", REQUIRED), ("root", ".")),
    "strip_mine": (("dim", REQUIRED), ("tiles", REQUIRED), ("root", ".")),
    "tile": (("dim", REQUIRED), ("tiles", REQUIRED), ("root", ".")),
    "interchange": (("permutation", REQUIRED), ("root", ".")),
    "vectorize": (("axes", REQUIRED), ("root", ".")),
    "external_at": (("axis", REQUIRED), ("symbol", REQUIRED), ("root", ".")),
    "parallelize": (("axes", REQUIRED), ("root", ".")),
    "unroll": (("unrolls", REQUIRED), ("root", ".")),
    "buffer_at": (("axis", REQUIRED), ("mtype", None), ("root", ".")),
    "pack_at": (("axis", REQUIRED), ("input_idx", REQUIRED), ("mtype", None), ("pad", False),
                ("root", ".")),
    "fuse_producer_at": (("axis", REQUIRED), ("input_idx", REQUIRED), ("root", ".")),
    "fuse_consumer_at": (("axis", REQUIRED), ("root", ".")),
    "define_memory_mesh": (("axes", REQUIRED),),
    "define_processor_mesh": (("axes", REQUIRED),),
    "distribute": (("axis", REQUIRED), ("processor_axis", REQUIRED), ("root", ".")),
    "distributed_buffer_at": (("axis", REQUIRED), ("input_idx", REQUIRED),
                              ("memory_axes", REQUIRED), ("root", ".")),
}
#: Options of XTC's MLIR backend (``Backend(graph, **options)``) a schedule may set.
BACKEND_OPTIONS: dict[str, type] = {
    "use_tensor_dialect": bool,
    "always_vectorize": bool,
    "no_alias": bool,
}
#: Keys of a schedule given as a mapping (the list form is its ``steps`` alone).
SCHEDULE_KEYS = ("steps", "descript", "dims", "sizes", "sample", "node", "backend")
#: What each annotation of a ``descript`` spec calls (``xtc.schedules.descript``).
_DESCRIPT_PRIMITIVES = {
    "unroll": "unroll",
    "vectorize": "vectorize",
    "parallelize": "parallelize",
    "buffer": "buffer_at",
    "pack": "pack_at",
    "fuse_producer": "fuse_producer_at",
    "fuse_consumer": "fuse_consumer_at",
}


def bind_step(primitive: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[Any, ...]:
    """The positional arguments of a step given with keywords (``root=``...), trailing
    defaults dropped. CaseFileError for an unknown primitive or keyword."""
    params = PRIMITIVE_PARAMS.get(primitive)
    if params is None:
        raise CaseFileError(
            f"unknown scheduler primitive {primitive!r} (XTC's: {', '.join(PRIMITIVE_PARAMS)})"
        )
    names = [name for name, _ in params]
    if len(args) > len(params):
        raise CaseFileError(f"{primitive}: {len(args)} arguments, at most {len(params)}")
    unknown = sorted(set(kwargs) - set(names))
    if unknown:
        raise CaseFileError(f"{primitive}: unknown keyword {', '.join(unknown)} "
                            f"(parameters: {', '.join(names)})")
    twice = sorted(set(kwargs) & set(names[: len(args)]))
    if twice:
        raise CaseFileError(f"{primitive}: {', '.join(twice)} given twice")
    values = list(args)
    for name, default in params[len(args):]:
        values.append(kwargs.get(name, default))
    missing = [names[i] for i, v in enumerate(values) if v is REQUIRED]
    if missing:
        raise CaseFileError(f"{primitive}: missing {', '.join(missing)}")
    while len(values) > len(args) and values[-1] == params[len(values) - 1][1]:
        values.pop()
    return tuple(values)


def _descript_primitives(spec: Any) -> set[str]:
    """The primitives a descript spec calls: tiles, splits, interchange, annotations."""
    if isinstance(spec, str):
        import yaml

        try:
            spec = yaml.safe_load(spec)
        except yaml.YAMLError:
            return {"set_dims", "interchange"}
    found = {"set_dims", "interchange"}
    if not isinstance(spec, Mapping):
        return found
    for key, value in spec.items():
        key = str(key)
        if "#" in key:
            found.add("tile")
        if "[" in key:
            found.add("split")
        if isinstance(value, Mapping):
            if "[" in key:
                found |= _descript_primitives(value)
            found |= {p for a, p in _DESCRIPT_PRIMITIVES.items() if a in value}
        elif isinstance(value, str):
            words = {w.split("=")[0] for w in value.split()}
            found |= {p for a, p in _DESCRIPT_PRIMITIVES.items() if a in words}
    return found


@dataclass(frozen=True)
class Descript:
    """A schedule in XTC's declarative description (``xtc.schedules.descript``): the spec
    (a mapping, or its YAML text), the abstract dims (default: the node's loops), the
    sizes and sample its parameters take."""

    spec: Any
    dims: tuple[str, ...] | None = None
    sizes: Mapping[str, int] = field(default_factory=dict)
    sample: Mapping[str, int] = field(default_factory=dict)

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"descript": self.spec}
        if self.dims is not None:
            data["dims"] = list(self.dims)
        if self.sizes:
            data["sizes"] = dict(self.sizes)
        if self.sample:
            data["sample"] = dict(self.sample)
        return data


@dataclass(frozen=True)
class Schedule:
    """A named list of XTC scheduler calls, e.g. ``("tile", ("i", {"i1": 4}))``, after an
    optional :class:`Descript`, with the options of XTC's backend it needs (``backend``,
    e.g. ``use_tensor_dialect``). ``steps`` schedule ``node`` (None: XTC's default, the
    last node); ``others`` are the ``(node, steps)`` segments after a ``{node: X}`` step
    that schedule other nodes. ``refused``: XTC refused to make this schedule (an
    explored sample whose ``generate`` raised); the case is then not run."""

    name: str = "none"
    steps: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    node: str | None = None
    descript: Descript | None = None
    backend: tuple[tuple[str, Any], ...] = ()
    refused: str = ""
    others: tuple[tuple[str, tuple[tuple[str, tuple[Any, ...]], ...]], ...] = ()
    #: Made by XTC's own search strategy (--xtc-explore): a step it makes on a loop the
    #: scheduler lacks is XTC's failure to compile, not an invalid case.
    drawn: bool = False

    @property
    def segments(self) -> tuple[tuple[str | None, tuple[tuple[str, tuple[Any, ...]], ...]], ...]:
        """Every ``(node, steps)`` segment, the main one (``node``, ``steps``) first."""
        return ((self.node, self.steps), *self.others)

    @property
    def primitives(self) -> frozenset[str]:
        found = {step for _, steps in self.segments for step, _ in steps}
        if self.descript is not None:
            found |= _descript_primitives(self.descript.spec)
        return frozenset(found)

    @property
    def backend_options(self) -> dict[str, Any]:
        return dict(self.backend)

    @classmethod
    def from_data(cls, name: str, steps: Any, node: str | None = None) -> Schedule:
        """A schedule from data: a list of steps ``{primitive: [args], keyword: value}``
        (``{node: C}`` picks the node the next steps schedule), or a mapping with
        ``steps``, ``descript`` (and ``dims``, ``sizes``, ``sample``), ``node`` and
        ``backend`` (options of XTC's backend, e.g. ``{use_tensor_dialect: true}``)."""
        descript = None
        backend: tuple[tuple[str, Any], ...] = ()
        if isinstance(steps, Mapping):
            unknown = sorted(set(map(str, steps)) - set(SCHEDULE_KEYS))
            if unknown:
                raise CaseFileError(f"schedule {name!r}: unknown key {', '.join(unknown)} "
                                    f"(known: {', '.join(SCHEDULE_KEYS)})")
            data = steps
            node = str(data["node"]) if data.get("node") is not None else node
            backend = _backend(name, data.get("backend"))
            if data.get("descript") is not None:
                dims = data.get("dims")
                descript = Descript(
                    data["descript"],
                    tuple(map(str, dims)) if dims is not None else None,
                    dict(data.get("sizes") or {}),
                    dict(data.get("sample") or {}),
                )
            steps = data.get("steps") or []
            if not isinstance(steps, list):
                raise CaseFileError(f"schedule {name!r}: steps must be a list")
        segments: list[tuple[str | None, list[tuple[str, tuple[Any, ...]]]]] = [(node, [])]
        for step in steps or ():
            if not isinstance(step, Mapping) or not step:
                raise CaseFileError(f"schedule {name!r}: each step is {{primitive: [args]}}")
            if set(step) == {"node"}:  # {node: C} picks the node the next steps schedule
                if segments[-1][1]:
                    segments.append((str(step["node"]), []))
                else:
                    segments[-1] = (str(step["node"]), [])
                continue
            primitives = [k for k in step if k in PRIMITIVE_PARAMS]
            if len(primitives) != 1:
                raise CaseFileError(
                    f"schedule {name!r}: step {dict(step)!r} must name one scheduler primitive "
                    f"({', '.join(PRIMITIVE_PARAMS)}), its other keys being keyword arguments"
                )
            primitive = primitives[0]
            args = step[primitive]
            args = args if isinstance(args, list) else [args]
            kwargs = {str(k): v for k, v in step.items() if k != primitive}
            try:
                segments[-1][1].append((str(primitive), bind_step(primitive, args, kwargs)))
            except CaseFileError as exc:
                raise CaseFileError(f"schedule {name!r}: {exc}") from None
        if len(segments) > 1 and not segments[-1][1]:
            raise CaseFileError(f"schedule {name!r}: {{node: {segments[-1][0]}}} ends the steps: "
                                "it picks the node the steps after it schedule; move it first")
        (node, main), *rest = segments
        others = tuple((str(n), tuple(s)) for n, s in rest)
        return cls(name, tuple(main), node, descript, backend, others=others)

    def to_data(self) -> list[Any] | dict[str, Any]:
        """This schedule as case-file data (what :meth:`from_data` reads back)."""
        steps = [{p: _plain(list(args))} for p, args in self.steps]
        for other, more in self.others:
            steps += [{"node": other}, *({p: _plain(list(args))} for p, args in more)]
        if self.descript is None and not self.backend and self.node is None:
            return steps
        data: dict[str, Any] = {}
        if self.node is not None:
            data["node"] = self.node
        if self.backend:
            data["backend"] = dict(self.backend)
        if self.descript is not None:
            data.update(self.descript.to_data())
        if steps:
            data["steps"] = steps
        return data

    def with_steps(self, *steps: tuple[str, tuple[Any, ...]]) -> Schedule:
        """This schedule with target-specific steps appended (an adapter's business)."""
        return replace(self, steps=self.steps + tuple(steps))


def _backend(name: str, options: Any) -> tuple[tuple[str, Any], ...]:
    """The backend options of a schedule, checked: unknown ones are refused."""
    if options is None:
        return ()
    if not isinstance(options, Mapping):
        raise CaseFileError(f"schedule {name!r}: backend must be a mapping of options")
    for key, value in options.items():
        kind = BACKEND_OPTIONS.get(str(key))
        if kind is None:
            raise CaseFileError(
                f"schedule {name!r}: unknown backend option {key!r} "
                f"(XTC's MLIR backend takes {', '.join(BACKEND_OPTIONS)})"
            )
        if not isinstance(value, kind):
            raise CaseFileError(
                f"schedule {name!r}: backend option {key} must be a {kind.__name__}"
            )
    return tuple((str(k), v) for k, v in options.items())


def _plain(value: Any) -> Any:
    """Tuples as lists, recursively (YAML-safe)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


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

    def make_inputs(
        self, seed: int, empty: Callable[[Any, Any], np.ndarray] = np.empty
    ) -> list[np.ndarray]:
        """Seeded inputs: uniform in [-1, 1), small integers for exact cases, uniform with
        IEEE special values at a few positions for special cases (:mod:`values`).
        ``empty(shape, dtype)`` allocates them (shared memory, for a worker)."""
        rng = np.random.default_rng(seed)
        arrays = []
        for operand in graphs.inputs(self.graph):
            drawn: np.ndarray
            if self.values == "exact":
                drawn = rng.integers(-3, 4, size=operand.shape)
            elif self.values == "special":
                drawn = special_array(operand.shape, operand.dtype, rng)
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

