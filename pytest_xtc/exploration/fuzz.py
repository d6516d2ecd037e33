"""Fuzzing: random graphs, shapes, schedules and input values, each case drawn from a
seed. No pytest.

:func:`draw` is the whole interface: one case from ``(seed, index)``, deterministic, its
name ``fuzz-<seed>-<index>`` (with the topology it drew) regenerating it. The draw covers
what the catalog's hand list never varies: graph topologies (a chain, a value read by two
nodes, two outputs, an output that also feeds a node, outputs declared in either order),
asymmetric shapes (1 to 19 a dimension, conv2d strides and windows per axis), dtypes,
schedules of the contraction (tiles of any loop with any factor, interchanges, unroll,
vectorize, parallel outer loops, packs of either operand), every input class the case
format has (uniform, small integers, IEEE special values...) and every placement of the
operands' data (aligned, off by an element, odd).
It is written against the op registry and the case format only, so a declarative model
of every dimension can replace :data:`TOPOLOGIES` and the draws below without changing
its callers.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable
from typing import Any

from pytest_xtc.core.cases import graphs
from pytest_xtc.core.cases.case import VALUE_KINDS, Case, Schedule
from pytest_xtc.core.execution.guard import ALIGNMENTS
from pytest_xtc.ops.builder import GraphBuilder, GraphDict, Operand

PREFIX = "fuzz"
_ID = re.compile(rf"^{PREFIX}-(?P<seed>\d+)-(?P<index>\d+)-")
DTYPES = ("float32", "float32", "float64")  # float64 relu, conv2d: XTC 0.3.2 fails (expected)
#: every input class the case format has (uniform drawn twice as often), and every
#: placement of the operands' data (aligned drawn twice as often)
VALUES = ("random", *VALUE_KINDS)
ALIGNS = ("aligned", *ALIGNMENTS)


def _rng(seed: int, index: int) -> random.Random:
    digest = hashlib.sha256(f"{PREFIX}:{seed}:{index}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "little"))


def _dim(rng: random.Random) -> int:
    return rng.choice((1, 2, 3, 5, 7, 8, 13, 16, 17, 19))


def _matmul(g: GraphBuilder, rng: random.Random, dtype: str) -> Operand:
    i, j, k = _dim(rng), _dim(rng), _dim(rng)
    return g.node("matmul", "C", [g.tensor("A", (i, k), dtype), g.tensor("B", (k, j), dtype)])


def _conv(g: GraphBuilder, rng: random.Random, dtype: str) -> Operand:
    r, s = rng.choice((1, 2, 3)), rng.choice((1, 2, 3))
    h, w = r + rng.randrange(0, 8), s + rng.randrange(0, 8)
    x = g.tensor("X", (rng.choice((1, 2)), h, w, rng.choice((1, 3, 4))), dtype)
    weights = g.tensor("W", (r, s, x.shape[3], rng.choice((1, 2, 5))), dtype)
    return g.node("conv2d", "C", [x, weights], stride=[rng.choice((1, 2)), rng.choice((1, 3))])


def _pad(g: GraphBuilder, rng: random.Random, x: Operand, name: str) -> Operand:
    axis = rng.randrange(len(x.shape))
    return g.node("pad", name, [x], padding={axis: [rng.randrange(3), rng.randrange(3)]},
                  constant_value=0)


def _chain(g: GraphBuilder, rng: random.Random, c: Operand) -> list[Operand]:
    return [g.node("relu", "R", [c]) if rng.random() < 0.5 else _pad(g, rng, c, "P")]


def _fan_out(g: GraphBuilder, rng: random.Random, c: Operand) -> list[Operand]:
    both = [g.node("relu", "R", [c]), _pad(g, rng, c, "P")]
    return both if rng.random() < 0.5 else both[::-1]


def _two_outputs(g: GraphBuilder, rng: random.Random, c: Operand) -> list[Operand]:
    other = g.node("relu", "S", [graphs_input(g, 0)])
    return [c, other] if rng.random() < 0.5 else [other, c]


def _output_feeds(g: GraphBuilder, rng: random.Random, c: Operand) -> list[Operand]:
    r = g.node("relu", "R", [c])
    return [c, r] if rng.random() < 0.5 else [r, c]


def graphs_input(g: GraphBuilder, position: int) -> Operand:
    entry = g.graph["inputs"][position]
    shape = tuple(entry["expr"]["type"]["shape"])
    return Operand(entry["name"], entry["uid"], shape, entry["expr"]["type"]["dtype"])


Topology = Callable[[GraphBuilder, random.Random, Operand], list[Operand]]
#: name -> the nodes after the contraction C, returning the graph's outputs in order
TOPOLOGIES: dict[str, Topology] = {
    "chain": _chain, "fanout": _fan_out, "twoout": _two_outputs, "feeds": _output_feeds,
}


#: Per contraction, the loops a parallel schedule may take (never a reduction: XTC's
#: ``parallelize`` does not check, and a parallel reduction races) and the loop order.
PARALLEL = {"matmul": ("i", "j"), "conv2d": ("b", "h", "w", "f")}


def _loop_sizes(graph: GraphDict) -> tuple[str, dict[str, int]]:
    """Node C's op and its loops' sizes, in XTC's loop order."""
    node = next(n for n in graphs.nodes(graph) if n.name == "C")
    known = graphs.operands(graph)
    out = known[node.uid].shape
    second = known[node.args[1]].shape
    if node.op.name == "matmul":
        return "matmul", {"i": out[0], "j": out[1], "k": known[node.args[0]].shape[1]}
    b, h, w, f = out
    return "conv2d", {"b": b, "h": h, "w": w, "f": f, "r": second[0], "s": second[1],
                      "c": second[2]}


def _schedule(rng: random.Random, graph: GraphDict) -> Schedule:
    """A random schedule of node C's loops, or none: tiles of any loop (reductions too)
    with factors that do or do not divide it, then maybe an interchange with unroll or
    vectorize of the innermost, a parallel outer loop, or a pack of either operand."""
    if rng.random() < 0.3:
        return Schedule()
    op, sizes = _loop_sizes(graph)
    steps: list[dict[str, Any]] = []
    order, tiled = list(sizes), []
    for loop in rng.sample(list(sizes), rng.randrange(1, 4)):
        factor = rng.choice((2, 3, 4, 8, 16))
        if factor < sizes[loop]:
            steps.append({"tile": [loop, {f"{loop}1": factor}]})
            tiled.append(f"{loop}1")
    if tiled and rng.random() < 0.5:
        rng.shuffle(order)
        steps.append({"interchange": [order + tiled]})
        last = tiled[-1]
        if rng.random() < 0.5:
            steps.append({"unroll": [{last: 2}]})
        elif last[:-1] == PARALLEL[op][-1] and rng.random() < 0.5:
            steps.append({"vectorize": [[last]]})
    chance = rng.random()
    if chance < 0.2 and order[0] in PARALLEL[op]:
        steps.append({"parallelize": [[order[0]]]})
    elif chance < 0.4 and tiled:
        steps.append({"pack_at": [rng.choice(tiled), rng.randrange(2)]})
    if not steps:
        return Schedule()
    return Schedule.from_data("sched", steps, node="C")


def draw(seed: int, index: int) -> Case:
    """Case ``index`` of the fuzz run seeded ``seed``: the same pair, the same case."""
    rng = _rng(seed, index)
    dtype = rng.choice(DTYPES)
    topology = rng.choice(sorted(TOPOLOGIES))
    g = GraphBuilder(f"{PREFIX}_{topology}")
    c = (_matmul if rng.random() < 0.7 else _conv)(g, rng, dtype)
    graph = g.output(*TOPOLOGIES[topology](g, rng, c))
    schedule = _schedule(rng, graph)
    values, align = rng.choice(VALUES), rng.choice(ALIGNS)
    shape = "x".join(map(str, graphs.outputs(graph)[0].shape))
    return Case(f"{PREFIX}-{seed}-{index}-{topology}", dtype, shape, schedule, graph,
                values=values, source="fuzz", tags=frozenset({PREFIX}), align=align)


def cases(count: int, seed: int, drawer: Callable[[int, int], Case] = draw) -> list[Case]:
    """``count`` cases of the fuzz run seeded ``seed``."""
    return [drawer(seed, index) for index in range(count)]


def is_fuzz(case: Case) -> bool:
    return PREFIX in case.tags


def rebuild(case_id: str, known: object = (), base_seed: int = 0) -> Case | None:
    """The fuzz case ``case_id`` names, drawn again from the seed and index in it (a
    bundle's failure replayed or shrunk); None for an id that is not a fuzz case's or
    that the draw does not give (another version of the generator)."""
    found = _ID.match(case_id)
    if found is None:
        return None
    case = draw(int(found["seed"]), int(found["index"]))
    return case if case.id == case_id else None
