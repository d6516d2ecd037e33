"""What a schedule must respect before XTC sees it: the preconditions XTC's scheduler
documents (``xtc.itf.schd.Scheduler``) but does not check, decided from the names and kinds
of a node's loops. XTC ignores a step naming an unknown loop and parallelizes a reduction
loop (a data race: wrong results, seed-dependent); both are the schedule's error, never
the target's. No XTC here: the loops come from the op's declaration (``ops/*.py``, when a
case file is loaded) or from XTC's loop nest (when the case is compiled).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

#: Primitives whose first argument names existing loops; those that make loops (their
#: second argument's keys, each iterating the dimension of the loop it cuts).
USES_LOOPS = frozenset({
    "tile", "split", "strip_mine", "interchange", "vectorize", "parallelize", "unroll",
    "pack_at", "buffer_at", "fuse_producer_at", "fuse_consumer_at", "distribute",
    "distributed_buffer_at", "external_at",
})
MAKES_LOOPS = frozenset({"tile", "split", "strip_mine"})
#: XTC's documented preconditions on loop kinds: "parallel axes" only.
PARALLEL_ONLY = {
    "parallelize": "XTC's parallelize takes outer parallel axes only (a parallelized "
                   "reduction races: wrong results that change from run to run)",
    "vectorize": "XTC's vectorize takes inner parallel axes only",
}


#: Where a primitive takes its ``root`` (a split's segment: ``./lo``), by position.
ROOT_AT = {"split": 2, "strip_mine": 2, "tile": 2, "interchange": 1, "vectorize": 1,
           "external_at": 2, "parallelize": 1, "unroll": 1, "buffer_at": 2, "pack_at": 4,
           "fuse_producer_at": 2, "fuse_consumer_at": 1, "distribute": 2,
           "distributed_buffer_at": 3}

INVALID_CASE = "invalid case (the schedule, not the target)"


class InvalidSchedule(ValueError):
    """A schedule that breaks a precondition of XTC's scheduler: the case's error."""


class UnknownLoop(InvalidSchedule):
    """A step naming a loop the node does not have (XTC would ignore the step)."""


@dataclass(frozen=True)
class Loops:
    """A node's loops, each with the dimension it iterates (``dims``: the node's own, in
    order), and which dimensions are reductions."""

    node: str
    of: Mapping[str, str]
    dims: tuple[str, ...]
    reductions: frozenset[str]
    #: the roots a step may name: the node's (``.``) and the segments its splits made
    #: (``./lo``, ``./lo/a``...); XTC's scheduler raises KeyError for any other
    roots: frozenset[str] = frozenset({"."})

    @classmethod
    def of_node(cls, node: str, dims: Sequence[str], reductions: Sequence[str]) -> Loops:
        return cls(node, {d: d for d in dims}, tuple(dims), frozenset(reductions))

    def _rooted(self, primitive: str, args: Sequence[Any], step: str) -> Loops:
        """InvalidSchedule when the step names a root no split made; after a split, its
        segments are roots too."""
        at = ROOT_AT.get(primitive)
        if at is None:
            return self
        root = args[at] if len(args) > at else "."
        if not isinstance(root, str) or root not in self.roots:
            raise InvalidSchedule(
                f"node {self.node}: step {step} names root {root!r}, which no split made "
                f"(roots: {', '.join(sorted(self.roots))})")
        if primitive == "split" and len(args) > 1 and isinstance(args[1], Mapping):
            made = {f"{root}/{segment}" for segment in args[1]}
            return replace(self, roots=self.roots | made)
        return self

    def after(self, primitive: str, args: Sequence[Any]) -> Loops:
        """The loops after ``primitive(*args)``; InvalidSchedule when the step breaks a
        precondition (unknown loop, a reduction parallelized or vectorized, a factor
        below 1, an interchange naming a loop twice)."""
        step = f"{primitive}{tuple(args)!r}"
        check_factors(primitive, args, f"node {self.node}: step {step}")
        return self._rooted(primitive, args, step)._step(primitive, args, step)

    def _step(self, primitive: str, args: Sequence[Any], step: str) -> Loops:
        if primitive == "set_dims" and args:  # renames the node's dimensions, in order
            names = [str(n) for n in args[0]]
            dims = self.dims if len(names) == len(self.dims) else tuple(names)
            return Loops(self.node, dict(zip(names, dims, strict=True)), tuple(names),
                         self.reductions, self.roots)
        if primitive not in USES_LOOPS or not args:
            return self
        named = args[0]
        names = [named] if isinstance(named, str) else [str(n) for n in named]
        unknown = sorted(set(names) - set(self.of))
        if unknown:
            raise UnknownLoop(
                f"node {self.node}: step {step} names unknown loop {', '.join(unknown)} "
                f"(loops: {', '.join(sorted(self.of))})"
            )
        if primitive == "interchange" and len(set(names)) != len(names):
            twice = sorted({n for n in names if names.count(n) > 1})
            raise InvalidSchedule(f"node {self.node}: step {step} names loop "
                                  f"{', '.join(twice)} twice")
        reduced = [n for n in names if self.of[n] in self.reductions]
        if primitive in PARALLEL_ONLY and reduced:
            kinds = ", ".join(f"{n} (of {self.of[n]})" for n in reduced)
            raise InvalidSchedule(f"node {self.node}: step {step} names reduction loop "
                                  f"{kinds}: {PARALLEL_ONLY[primitive]}")
        if primitive in MAKES_LOOPS and len(args) > 1 and isinstance(args[1], Mapping):
            made = {str(n): self.of[names[0]] for n in args[1]}
            return Loops(self.node, {**self.of, **made}, self.dims, self.reductions, self.roots)
        return self


def check_factors(primitive: str, args: Sequence[Any], where: str) -> None:
    """Tile sizes and unroll factors are integers of at least 1, split points and vector
    widths integers of at least 0 and 1; InvalidSchedule naming ``where`` otherwise."""
    least = {"tile": 1, "strip_mine": 1, "split": 0, "unroll": 1, "vectorize": 1}.get(primitive)
    values = args[1] if primitive in MAKES_LOOPS and len(args) > 1 else args[0] if args else None
    if least is None or not isinstance(values, Mapping):
        return
    for loop, value in values.items():
        if value is None and primitive == "vectorize":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise InvalidSchedule(f"{where}: {loop} is {value!r}; XTC's {primitive} takes "
                                  f"integers of at least {least}")


Steps = Sequence[tuple[str, Sequence[Any]]]


def check_segments(segments: Sequence[tuple[str, Steps]], loops: Mapping[str, Loops]) -> None:
    """Every step of each ``(node, steps)`` segment checked against the node's loops
    (``loops``: the nodes whose loops are known; others get their factors checked only).
    A node's segments share its loops, in order."""
    state = dict(loops)
    for node, steps in segments:
        for primitive, args in steps:
            if node in state:
                state[node] = state[node].after(primitive, args)
            else:
                check_factors(primitive, args, f"node {node}: step {primitive}{tuple(args)!r}")


# -- at load: node names and what the case file alone decides ------------------------------


def name_nodes(nodes: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Name every unnamed node (in place) by its op and its rank among that op's nodes
    (``matmul0``, ``matmul1``, ``relu0``...): XTC's uids (``%3``) come from a counter of
    the process, so the same graph built after others gets other ones. Returns every
    node's uid as an alias of its name (what ``{node: '%3'}`` may say)."""
    taken = {str(n["name"]) for n in nodes if n.get("name")}
    seen: dict[str, int] = {}
    aliases: dict[str, str] = {}
    for node in nodes:
        if not node.get("name"):
            op = str(node["expr"]["op"]["name"])
            while f"{op}{seen.get(op, 0)}" in taken:
                seen[op] = seen.get(op, 0) + 1
            node["name"] = f"{op}{seen.get(op, 0)}"
            taken.add(node["name"])
        aliases[str(node["uid"])] = str(node["name"])
    return aliases


def resolve_nodes(schedule: Any, aliases: Mapping[str, str]) -> Any:
    """``schedule`` with every node it names given by name (a uid resolved through
    ``aliases``); InvalidSchedule naming the node and the graph's nodes otherwise."""
    from dataclasses import replace

    names = set(aliases.values())

    def resolve(node: str | None) -> str | None:
        if node is None or node in names:
            return node
        if node in aliases:
            return aliases[node]
        known = ", ".join(f"{n} ({u})" for u, n in aliases.items())
        raise InvalidSchedule(f"node {node!r} is not a node of the graph (nodes: {known}); "
                              "name one by its name or its uid as the graph dump writes it")

    others = tuple((str(resolve(n)), steps) for n, steps in schedule.others)
    return replace(schedule, node=resolve(schedule.node), others=others)


def check_declared(schedule: Any, ops: Mapping[str, Any]) -> None:
    """The checks the case file alone decides: ``ops`` gives each node's op (by name, in
    graph order; the last is XTC's default node); an op declaring its loops (``loops``,
    ``reductions``) has every step on it checked, others their factors only. The steps
    after a ``descript`` description work on loops it made: factors only."""
    default = list(ops)[-1] if ops else None
    segments = [(n or default, s) for n, s in schedule.segments]
    known = {
        name: Loops.of_node(name, op.loops, op.reductions)
        for name, op in ops.items()
        if op.loops and not (schedule.descript is not None and name == segments[0][0])
    }
    check_segments([(str(n), s) for n, s in segments], known)
