"""The model of what can vary, from which the catalog is generated (issue 52).

Each op module declares its attributes' legal forms (``Op.forms``: every spelling XTC's op
factory takes, every IEEE class of a floating attribute); this module adds what the graph
and the runner vary: dtypes, input value distributions, where the operands lie on each
call, graph topologies, size classes at the index-width boundaries, and each scheduler
primitive on each loop and operand it takes. ``catalog.yaml``'s ``cover`` sections are
all-pairs covering arrays over these dimensions (the model's are added to each section:
:func:`cover_dimensions`), and :func:`missing_schedules` writes the schedules that apply
each primitive where the hand-written ones do not. :func:`audit` says what a catalog
leaves out of the model (tests/unit/conformance/test_model.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_xtc import ops
from pytest_xtc.core.cases import values

DTYPES = ("float32", "float64")
#: Input distributions (core/cases/values.py): uniform, small integers, IEEE specials, a
#: wide dynamic range within one operand, large magnitudes.
VALUE_KINDS = values.KINDS
#: Where the operands lie: the same on every call, or moved after the first call.
ALIGNMENTS = (*values.ALIGNMENTS, f"aligned{values.THEN}odd", f"odd{values.THEN}aligned")
#: What every family's cover varies besides its op's parameters and its schedule.
RUNNER_DIMENSIONS: dict[str, tuple[str, ...]] = {
    "dtype": DTYPES, "values": VALUE_KINDS, "align": ALIGNMENTS}
#: How values flow between nodes (conformance/families.py, ``graph``): a chain; a value
#: read by two nodes; two outputs, declared in the order they are produced or reversed;
#: an output that also feeds a node, declared first or last.
TOPOLOGIES = ("chain", "fan_out", "two_outputs", "two_outputs_reversed", "output_feeds_node",
              "output_feeds_node_reversed")
#: Operand sizes past each index width (elements): 8-bit, 16-bit and float32-exact
#: counters. A case of the family past the boundary in its largest operand or output.
SIZE_CLASSES = {"past_2^8": 1 << 8, "past_2^16": 1 << 16, "past_2^24": 1 << 24}
#: The families whose cases cross 2^24 elements (``huge``): relu, 8193x4096 (a float32
#: operand of 128 MiB, the case about 1.3 GiB with its reference: over the default
#: --xtc-max-case-bytes, so run where the budget is raised; one costs as much as a hundred
#: small cases).
HUGE_FAMILIES = ("relu",)

# -- schedules: each primitive of XTC's scheduler on each loop and operand it takes ----------

#: Each op's loops as XTC's MLIR scheduler names them (relu's nest is one flat loop) and
#: which are reductions.
LOOPS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "matmul": (("i", "j", "k"), ("k",)),
    "conv2d": (("b", "h", "w", "f", "r", "s", "c"), ("r", "s", "c")),
    "relu": (("i",), ()),
    "pad": (("i", "j"), ()),
    "pad2d": (("b", "h", "w", "c"), ()),
    "unpad": (("i", "j"), ()),
}
#: Ops the model schedules no loop of, and why.
UNSCHEDULED = {
    "transpose": "XTC 0.3.2's MLIR backend compiles no transpose on the host",
    "reshape": "XTC 0.3.2's MLIR backend compiles no reshape on the host",
}
#: Members of XTC's scheduler interface the model leaves out, and why (the audit of
#: tests/unit/conformance/test_model_xtc.py fails on any other member missing).
NOT_MODELLED = {
    "schedule": "the schedule built, not a primitive",
    "backend": "the backend, not a primitive",
    "get_loop_nest": "reads the loop nest, schedules nothing",
    "set_dims": "renames the loops (descript's own step), schedules nothing",
    "external_at": "replaces a loop's body by a C function the target links: no kernel of "
                   "XTC's to check",
    "define_memory_mesh": "MPPA only (its adapter's cases)",
    "define_processor_mesh": "MPPA only (its adapter's cases)",
    "distribute": "MPPA only (its adapter's cases)",
    "distributed_buffer_at": "MPPA only (its adapter's cases)",
}
#: The primitives scheduled on another node's result (graph families: matmul+relu,
#: conv2d's pad2d), by op: target "input N" or "output".
FUSIONS = {"conv2d": {"fuse_producer_at:0"}, "relu": {"fuse_producer_at:0"},
           "matmul": {"fuse_consumer_at:output"}}


def schedule_targets(op: str) -> set[str]:
    """Every ``primitive:target`` the model applies to ``op``'s node: tile, strip_mine,
    split, unroll and buffer_at on every loop, interchange of the nest, parallelize on
    every parallel loop, vectorize on the innermost parallel one, pack_at on every input
    of a contraction, and the fusions of :data:`FUSIONS`."""
    if op not in LOOPS:
        return set()
    loops, reductions = LOOPS[op]
    parallel = [loop for loop in loops if loop not in reductions]
    found = {f"{p}:{loop}" for p in ("tile", "strip_mine", "split", "unroll", "buffer_at")
             for loop in loops}
    found |= {f"parallelize:{loop}" for loop in parallel} | {f"vectorize:{parallel[-1]}"}
    if len(loops) > 1:
        found.add("interchange:nest")
    if op in ("matmul", "conv2d"):
        found |= {"pack_at:0", "pack_at:1"}
    return found | FUSIONS.get(op, set())


def primitives() -> set[str]:
    """Every scheduler primitive the model applies somewhere."""
    return {t.split(":")[0] for op in LOOPS for t in schedule_targets(op)}


def applied(op: str, steps: Sequence[tuple[str, Sequence[Any]]]) -> set[str]:
    """The ``primitive:target`` pairs that ``steps`` (one node's) apply to an ``op``
    node: a loop a step names is taken back to the op's loop it was cut from."""
    base = {loop: loop for loop in LOOPS.get(op, ((), ()))[0]}
    found = set()
    for primitive, args in steps:
        first = args[0] if args else None
        if primitive in ("tile", "strip_mine", "split") and isinstance(first, str):
            found.add(f"{primitive}:{base.get(first, first)}")
            if len(args) > 1 and isinstance(args[1], Mapping):
                base.update({str(n): base.get(first, first) for n in args[1]})
        elif primitive == "unroll" and isinstance(first, Mapping):
            found |= {f"unroll:{base.get(str(n), n)}" for n in first}
        elif primitive in ("vectorize", "parallelize") and isinstance(first, Sequence):
            names = [first] if isinstance(first, str) else first
            found |= {f"{primitive}:{base.get(str(n), n)}" for n in names}
        elif primitive == "buffer_at" and isinstance(first, str):
            found.add(f"buffer_at:{base.get(first, first)}")
        elif primitive in ("pack_at", "fuse_producer_at") and len(args) > 1:
            found.add(f"{primitive}:{args[1]}")
        elif primitive == "interchange":
            found.add("interchange:nest")
        elif primitive == "fuse_consumer_at":
            found.add("fuse_consumer_at:output")
    return found


def missing_schedules(op: str, have: set[str]) -> dict[str, list[dict[str, Any]]]:
    """Schedules (catalog steps) applying each ``primitive:target`` of ``op`` that
    ``have`` lacks: one per primitive over all its missing loops (tile by 2, strip_mine
    by 4 and 2, unroll by 2 on the loops themselves, buffer_at each), one split per loop
    (cut after its first iteration, an interchange in each segment as XTC needs),
    parallelize (one per loop, moved outermost: nested parallel loops time out under
    QEMU), vectorize (a tile of 8, moved
    innermost), pack_at of every missing
    input under a tile of the first loop, the nest reversed."""
    loops = LOOPS.get(op, ((), ()))[0]
    want = sorted(schedule_targets(op) - have - FUSIONS.get(op, set()))
    by: dict[str, list[str]] = {}
    for target in want:
        primitive, _, what = target.partition(":")
        by.setdefault(primitive, []).append(what)
    made: dict[str, list[dict[str, Any]]] = {}
    for primitive, targets in by.items():
        if primitive == "tile":
            made["model_tile"] = [{"tile": [t, {f"{t}_t": 2}]} for t in targets]
        elif primitive == "strip_mine":
            made["model_strip_mine"] = [{"strip_mine": [t, {f"{t}_s": 4, f"{t}_s2": 2}]}
                                        for t in targets]
        elif primitive == "unroll":
            made["model_unroll"] = [{"unroll": [{t: 2 for t in targets}]}]
        elif primitive == "buffer_at":
            made["model_buffer_at"] = [{"buffer_at": [t]} for t in targets]
        elif primitive == "parallelize":  # moved outermost: XTC parallelizes outer axes
            for t in targets:
                made[f"model_parallelize_{t}"] = [
                    {"interchange": [[t, *(n for n in loops if n != t)]]},
                    {"parallelize": [[t]]}]
        elif primitive == "interchange":
            made["model_interchange"] = [{"interchange": [list(reversed(loops))]}]
        elif primitive == "pack_at":
            made["model_pack_at"] = [{"tile": [loops[0], {f"{loops[0]}_p": 2}]},
                                     *({"pack_at": [f"{loops[0]}_p", int(t)]} for t in targets)]
        elif primitive == "vectorize":
            (t,) = targets
            order = [loop for loop in loops if loop != t] + [t, f"{t}_v"]
            made["model_vectorize"] = [{"tile": [t, {f"{t}_v": 8}]}, {"interchange": [order]},
                                       {"vectorize": [[f"{t}_v"]]}]
        elif primitive == "split":
            for t in targets:
                made[f"model_split_{t}"] = [
                    {"split": [t, {f"{t}_lo": 0, f"{t}_hi": 1}]},
                    {"interchange": [[f"{t}_lo", f"{t}_hi"]]},
                    {"interchange": [list(loops)], "root": f"./{t}_lo"},
                    {"interchange": [list(loops)], "root": f"./{t}_hi"}]
    return made


def misplaced_parallel(op: str, steps: Sequence[tuple[str, Sequence[Any]]]) -> list[str]:
    """The loops ``steps`` (one node's, on its root) parallelize that XTC's scheduler does
    not take ("outer and parallel axes", unchecked by XTC): a reduction (the threads race
    on its sums) or a loop nested in another (a parallel region forked on each of its
    iterations: matmul's j under i timed out on the host under load, pad's i, j under
    QEMU). A tile's new loops are taken innermost, as XTC places them."""
    loops, reductions = LOOPS.get(op, ((), ()))
    base = {loop: loop for loop in loops}
    order, found = list(loops), []
    for primitive, args in steps:
        first = args[0] if args else None
        if primitive in ("tile", "strip_mine") and len(args) > 1 and isinstance(args[1], Mapping):
            base.update({str(n): base.get(str(first), str(first)) for n in args[1]})
            order += [str(n) for n in args[1]]
        elif primitive == "interchange" and isinstance(first, Sequence):
            order = [str(n) for n in first]
        elif primitive == "parallelize" and isinstance(first, Sequence):
            for name in [first] if isinstance(first, str) else [str(n) for n in first]:
                outer = order[:order.index(name)] if name in order else []
                if base.get(name) in reductions or outer:
                    found.append(name)
    return found


# -- the dimensions of each family, and what a catalog leaves out ----------------------------


def op_of(family: str) -> str | None:
    """The op a single-op family is named after (None for graph families)."""
    return family if family in ops.modules() else None


def cover_dimensions(family: str) -> dict[str, tuple[Any, ...]]:
    """The model's dimensions of ``family``'s cover: the runner's, each attribute's forms
    (``<attr>_form``), and for the ``graph`` family the topology."""
    found: dict[str, tuple[Any, ...]] = dict(RUNNER_DIMENSIONS)
    op = op_of(family)
    if op is not None:
        found |= {f"{attr}_form": forms for attr, forms in ops.get(op).forms.items()}
    if family == "graph":
        found["topology"] = TOPOLOGIES
    return found


def size_classes(family: str) -> dict[str, int]:
    """The size classes ``family``'s cases must cross (2^24 for :data:`HUGE_FAMILIES`)."""
    return {name: size for name, size in SIZE_CLASSES.items()
            if size < 1 << 24 or family in HUGE_FAMILIES}


def audit(covers: Mapping[str, Mapping[str, Mapping[Any, int]]],
          taken: Mapping[str, Mapping[str, set[Any]]],
          sizes: Mapping[str, int], scheduled: Mapping[str, set[str]]) -> list[str]:
    """What the catalog leaves out of the model, one line each: ``covers``: each
    family's cover axes with each value's case count; ``taken``: each family's values
    per dimension over all its cases (a value the cover leaves out for a reason, e.g. a
    threshold XTC ignores, may be taken by a hand-picked case); ``sizes``: each family's
    largest operand, in elements; ``scheduled``: each op's applied ``primitive:target``."""
    problems = []
    for family, axes in covers.items():
        for name, wanted in cover_dimensions(family).items():
            if name not in axes:
                problems.append(f"{family}: dimension {name} is not a cover axis")
                continue
            seen = {v for v, n in axes[name].items() if n}
            seen |= set(taken.get(family, {}).get(name, ()))
            problems += [f"{family}: {name} never takes {v!r}" for v in wanted if v not in seen]
        for name, size in size_classes(family).items():
            if sizes.get(family, 0) <= size:
                problems.append(f"{family}: no case {name} elements")
    for op in LOOPS:
        problems += [f"{op}: no schedule applies {t}"
                     for t in sorted(schedule_targets(op) - scheduled.get(op, set()))]
    return problems

