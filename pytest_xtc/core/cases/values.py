"""Input values and the bit patterns the checks rely on. No pytest, no XTC.

* **Unwritten sentinel.** Output buffers (and guard bands, :mod:`guard`) are filled with a
  signalling-NaN bit pattern with a fixed payload (float32 ``0x7FA5A5A5``, float64
  ``0x7FF5A5A5A5A5A5A5``). No arithmetic produces a signalling NaN (IEEE 754 §6.2: every
  operation on one delivers a quiet NaN), and the suite's inputs hold none, so an output
  element that still has these exact bits after a run was never written. Compared by bits,
  never by "is NaN": a legitimate NaN result is not "unwritten".
* **Input kinds** (``Case.values``): ``random`` (uniform in [-1, 1)), ``exact`` (small
  integers: every product and sum exact), ``special`` (random, with every IEEE special
  value class of :func:`specials` in every input: NaN, +-Inf, +-0.0, subnormals, the
  smallest normals, magnitudes near overflow, and the values a narrower format loses;
  contraction operands also hold a slice of zeros and one of subnormals, :func:`roles`),
  ``wide`` (a wide dynamic range within one operand: magnitudes log-uniform in
  [1e-3, 1e3], either sign, :func:`wide_array`), ``large`` (magnitudes near the square
  root of the dtype's largest finite over 2^16, :func:`large_array`: products and sums
  of up to 2^16 of them stay finite, where an algorithm's transforms lose most).
  What each op must do with them is its module's ``ieee`` rule (README, "Special values";
  docs/correctness-values-and-performance.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

KINDS = ("random", "exact", "special", "wide", "large")
#: The specials every ``special`` input holds even where it has little room: the first of
#: :func:`specials` (NaN, +Inf, -Inf, -0.0); every one of them where it has room.
ALWAYS = 4

#: Where the runner puts a case's operands (``Case.align``; core/execution/guard.py):
#: 256-byte aligned, one element past, an odd byte offset.
ALIGNMENTS = ("aligned", "element", "odd")
#: Joins a case's first call's alignment to its later calls' (``aligned_then_odd``): the
#: operands move between calls, as a caller's buffers do.
THEN = "_then_"


def for_call(align: str, call: int) -> str:
    """The alignment of a case's call number ``call`` (0: the first; the timed call counts
    as a later one): ``align`` itself, or for ``FIRST_then_LATER`` the part that call has.
    ValueError naming the choices for a spelling it does not know."""
    first, then, later = align.partition(THEN)
    if first not in ALIGNMENTS or (then and later not in ALIGNMENTS):
        raise ValueError(f"operand alignment {align!r}: expected one of {', '.join(ALIGNMENTS)}"
                         f", or two joined by {THEN!r} (the first call's, the later calls')")
    return later if then and call > 0 else first


_UNWRITTEN = {
    "float16": (np.uint16, 0x7D5A),
    "float32": (np.uint32, 0x7FA5A5A5),
    "float64": (np.uint64, 0x7FF5A5A5A5A5A5A5),
}


def _pattern(dtype: np.dtype | str) -> tuple[type, int]:
    name = np.dtype(dtype).name
    if name not in _UNWRITTEN:
        raise ValueError(f"no unwritten sentinel for dtype {name}")
    return _UNWRITTEN[name]


def unwritten(shape: Sequence[int], dtype: np.dtype | str) -> np.ndarray:
    """An array of ``shape`` whose every element holds the unwritten sentinel."""
    array = np.empty(tuple(shape), dtype)
    fill_unwritten(array)
    return array


def fill_unwritten(array: np.ndarray) -> None:
    """Set every element of ``array`` (any float array, a view included) to the sentinel."""
    uint, bits = _pattern(array.dtype)
    array.view(uint)[...] = bits


def unwritten_mask(array: np.ndarray) -> np.ndarray:
    """True where ``array`` still holds the sentinel bits."""
    uint, bits = _pattern(array.dtype)
    return np.ascontiguousarray(array).view(uint) == uint(bits)


#: IEEE formats narrower than a dtype: a kernel computing (or comparing, or storing) in one
#: of them by mistake meets the values it cannot hold.
NARROWER = {"float32": ("float16",), "float64": ("float16", "float32")}


def specials(dtype: np.dtype | str) -> np.ndarray:
    """The special values put into ``special`` inputs, in ``dtype``: every class the ops'
    IEEE rules tell apart, in this order (the first ones where an input has little room):
    NaN, +-Inf, -0.0, +0.0; the smallest subnormal, a mid subnormal and the smallest
    normal, each signed; magnitudes whose square overflows, half the largest finite and
    the largest finite; and for each narrower format F (:data:`NARROWER`) the values a
    kernel working in F by mistake loses: +-F's smallest subnormal / 4 (0 in F: a float16
    threshold or flush), F's smallest normal / 4 (a subnormal of F: flushed to zero where F
    flushes) and twice F's largest finite (Inf in F, or saturated)."""
    info = np.finfo(dtype)
    tiny = info.smallest_subnormal
    big = np.ldexp(1.0, int(info.maxexp) // 2)  # its square overflows; times 1 it does not
    values = [
        np.nan, np.inf, -np.inf, -0.0, 0.0,
        tiny, -tiny, info.tiny * 0.375, -info.tiny * 0.625,  # subnormals
        info.tiny, -info.tiny,  # smallest normals
        big, -big, info.max / 2, -info.max / 2, info.max,  # near overflow
    ]
    for name in NARROWER.get(np.dtype(dtype).name, ()):
        narrow = np.finfo(name)
        lost = float(narrow.smallest_subnormal) / 4
        values += [lost, -lost, float(narrow.tiny) / 4, float(narrow.max) * 2]
    return np.array(values, dtype=dtype)


def tiny_values(dtype: np.dtype | str) -> np.ndarray:
    """The dtype's own subnormals and smallest normals, each signed: a dot product of
    these with ordinary values is itself subnormal, so that a kernel flushing subnormals
    to zero (inputs or results) errs by far more than the underflow bound allows."""
    info = np.finfo(dtype)
    return np.array([info.smallest_subnormal, -info.smallest_subnormal * 3,
                     info.tiny * 0.375, -info.tiny * 0.625, info.tiny, -info.tiny], dtype)


def special_array(shape: Sequence[int], dtype: str, rng: np.random.Generator,
                  role: str = "", reach: np.ndarray | None = None) -> np.ndarray:
    """Uniform values in [-1, 1) holding every special value of :func:`specials` at
    seeded positions (the first ones where the array has no room for all), so that what
    a case meets never depends on the seed. ``role`` (:func:`roles`): for a contraction's
    ``first`` operand, its first slice along axis 0 is zeros of both signs (they meet
    every NaN and Inf of the other operand: 0 x Inf is NaN, a kernel skipping zero
    products misses it); for its ``second``, the first slice along the last axis too, and
    the next one :func:`tiny_values` (a result column of subnormals). ``reach``: the
    elements that reach an output (:func:`reached`; None: all), where the specials go."""
    array = rng.uniform(-1.0, 1.0, size=tuple(shape)).astype(dtype)
    free = np.ones(array.shape, bool)
    if role == "first" and array.ndim and array.shape[0] >= 2:
        _reserve(array[:1], free[:1], np.array([0.0, -0.0], dtype))
    if role == "second" and array.ndim and array.shape[-1] >= 3:
        _reserve(array[..., :1], free[..., :1], np.array([-0.0, 0.0], dtype))
        _reserve(array[..., 1:2], free[..., 1:2], tiny_values(dtype))
    pool = specials(dtype)
    places = np.flatnonzero(free if reach is None else free & reach.reshape(free.shape))
    count = min(places.size, len(pool))
    array.flat[rng.choice(places, size=count, replace=False)] = pool[:count]
    return array


def _reserve(view: np.ndarray, free: np.ndarray, cycle: np.ndarray) -> None:
    """Fill ``view`` with ``cycle`` repeated, and mark it taken in ``free``."""
    view[...] = np.resize(cycle, view.size).reshape(view.shape)
    free[...] = False


def roles(graph: dict) -> dict[str, str]:
    """``first`` or ``second`` for each graph input (by uid) that is, through data
    movement alone, that operand of a contraction (matmul's A and B, conv2d's X and W:
    axis 0 of the first and the last axis of the second are output axes)."""
    from pytest_xtc.core.cases import graphs
    from pytest_xtc.ops.contraction import Contraction

    source = {o.uid: o.uid for o in graphs.inputs(graph)}
    found: dict[str, str] = {}
    for node in graphs.nodes(graph):
        if node.op.copies and node.args and node.args[0] in source:
            source[node.uid] = source[node.args[0]]
        if isinstance(node.op, Contraction):
            for arg, role in zip(node.args, ("first", "second"), strict=False):
                if arg in source:
                    found.setdefault(source[arg], role)
    return found


def reached(graph: dict, uid: str) -> np.ndarray | None:
    """Which elements of input ``uid`` reach an output, for a graph of data movement alone
    (unpad and strided views drop some); None where every element may (an op that
    computes is taken to read all of its argument)."""
    from pytest_xtc.core.cases import graphs

    steps = graphs.nodes(graph)
    if not all(node.op.copies for node in steps):
        return None
    known: dict[str, np.ndarray] = {o.uid: np.zeros(o.shape) for o in graphs.inputs(graph)}
    count = known[uid].size
    known[uid] = np.arange(1.0, count + 1).reshape(known[uid].shape)
    for node in steps:  # padding constants as 0: only the input's elements are counted
        known[node.uid] = node.op.forward([known[a] for a in node.args],
                                          node.op.error_attrs(node.attrs))
    mask = np.zeros(count, bool)
    for out in graph["outputs"]:
        seen = known[out["uid"]].reshape(-1)
        mask[seen[seen > 0].astype(np.int64) - 1] = True
    return mask.reshape(known[uid].shape)


def wide_array(shape: Sequence[int], rng: np.random.Generator) -> np.ndarray:
    """Magnitudes log-uniform in [1e-3, 1e3], either sign: one reduction meets terms six
    orders of magnitude apart (a kernel summing in a narrower format, or reassociating
    with a lost carry, errs by far more than the bound)."""
    size = tuple(shape)
    return np.sign(rng.uniform(-1.0, 1.0, size)) * 10.0 ** rng.uniform(-3.0, 3.0, size)


def large_array(shape: Sequence[int], dtype: str, rng: np.random.Generator,
                depth: int = 1) -> np.ndarray:
    """Uniform in [-1, 1) times 2^e, e the dtype's largest exponent over 2^depth, less 9
    (``depth``: the most contractions one value of the graph goes through,
    :func:`contraction_depth`): a product of two is below max / 2^18, so a sum of 2^16
    of them stays finite, and so on through every contraction of the graph, while a
    kernel that scales, squares or transforms them (a float32 intermediate for float64, a
    Winograd transform) overflows or loses them."""
    exponent = int(np.finfo(dtype).maxexp) // (1 << max(depth, 1)) - 9
    return rng.uniform(-1.0, 1.0, size=tuple(shape)) * np.ldexp(1.0, max(exponent, 0))


def contraction_depth(graph: dict) -> int:
    """The most contractions (matmul, conv2d) on one path from an input to an output."""
    from pytest_xtc.core.cases import graphs
    from pytest_xtc.ops.contraction import Contraction

    depth: dict[str, int] = {o.uid: 0 for o in graphs.inputs(graph)}
    for node in graphs.nodes(graph):
        depth[node.uid] = max((depth.get(a, 0) for a in node.args), default=0) + int(
            isinstance(node.op, Contraction))
    return max(depth.values(), default=0)
