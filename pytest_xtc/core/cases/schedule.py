"""A case's schedule: XTC scheduler calls as data (steps, a ``descript`` spec, the nodes
they schedule, backend options), checked when read and bound to XTC's parameters."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_xtc.core.cases.casefile import CaseFileError

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

        from pytest_xtc.core.cases.unique_keys import DuplicateKey, load_yaml

        try:
            spec = load_yaml(spec, "descript")
        except DuplicateKey as exc:
            raise CaseFileError(str(exc)) from None
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
        steps = [{p: plain(list(args))} for p, args in self.steps]
        for other, more in self.others:
            steps += [{"node": other}, *({p: plain(list(args))} for p, args in more)]
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


def plain(value: Any) -> Any:
    """``value`` with every tuple a list (at any depth), as YAML and JSON write it."""
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    return value
