"""The float64 numpy reference of a graph, with an element-wise error bound per output.

Each op's module (``pytest_xtc/ops/``) says how it computes and how errors pass through
it (README, "When is a result right"):

* Data movement (pad, pad2d, unpad, transpose, reshape) and relu introduce no rounding:
  their bound is their argument's, zero for graph inputs, so alone they must be bit-exact.
* Contractions (matmul, conv2d) add Higham's rigorous ``gamma_K |A||B|`` for the case's
  dtype, times the case's factor ``c`` (1 by default: an error above it is a defect), and
  an absolute term for products that underflow (``Contraction.underflow``, never 0).
  Where a partial sum may exceed the dtype's range (``max|A| max|B| K``, even from inputs
  below sqrt(max)), the IEEE rule below decides. A node's floating constants (a pad's
  ``constant_value``) are taken as the dtype holds them.
* Exact inputs (small integers) make every product and partial sum representable: the
  bound is zero, bit for bit, as long as every ``|A||B|`` stays below ``2^p`` (p: the
  dtype's mantissa bits). A deeper graph whose integers outgrow that gets the rounding
  bound at the contraction where they do.

A bound is computed only where one can be non-zero: the inputs' bounds are exactly zero,
and so are the errors an exact op passes on from them.

With ``ieee`` (special-value inputs), each op's IEEE rule (``Op.ieee``) gives the NaN and
+-Inf results IEEE arithmetic fixes and the elements that depend on the compiler's choices
(only required written). An output made by data movement alone is compared bit for bit.
An output computed by a contraction straight from graph inputs also keeps ``|A||B|`` and
K (:class:`Sample`): the statistical precision check (``precision.py``) reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from pytest_xtc.core.cases import graphs
from pytest_xtc.core.cases.graphs import GraphDict
from pytest_xtc.ops.contraction import DEFAULT_C, Contraction, gamma, scaled
from pytest_xtc.ops.spec import Attrs, Bound

UNIT_ROUNDOFF = {"float16": 2.0**-11, "float32": 2.0**-24, "float64": 2.0**-53}

__all__ = ["DEFAULT_C", "UNIT_ROUNDOFF", "Reference", "evaluate", "forward", "forward_fn",
           "gamma"]


@dataclass
class Sample:
    """What the precision statistic needs of an output computed by one contraction from
    graph inputs: ``|A||B|`` (float64) and the reduction length K."""

    magnitude: np.ndarray
    k: int


@dataclass
class Reference:
    values: list[np.ndarray]  # float64, one per graph output (NaN, +-Inf where IEEE fixes them)
    bounds: list[np.ndarray]  # float64, >= 0, same shapes
    reductions: dict[str, int]  # node name -> reduction length K, for messages
    free: list[np.ndarray | None] = field(default_factory=list)  # only required written
    bitwise: list[bool] = field(default_factory=list)  # data movement alone: bit for bit
    samples: list[Sample | None] = field(default_factory=list)


def forward_fn(graph: GraphDict) -> Callable[[Sequence[np.ndarray]], list[np.ndarray]]:
    """A plain numpy evaluation of ``graph`` in its inputs' dtype, parsed once (it is the
    baseline that kernel times are compared with, so it is timed)."""
    steps = graphs.nodes(graph)
    in_uids = [entry["uid"] for entry in graph["inputs"]]
    out_uids = [o["uid"] for o in graph["outputs"]]

    def forward(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        values = dict(zip(in_uids, inputs, strict=True))
        for node in steps:
            values[node.uid] = node.op.forward([values[a] for a in node.args], node.attrs)
        return [values[uid] for uid in out_uids]

    return forward


def forward(graph: GraphDict, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``graph``'s outputs computed by numpy in the inputs' own dtype."""
    return forward_fn(graph)(inputs)


def evaluate(
    graph: GraphDict,
    inputs: Sequence[np.ndarray],
    exact: bool = False,
    c: float = DEFAULT_C,
    ieee: bool = False,
) -> Reference:
    """Evaluate ``graph`` in float64 on ``inputs``; bounds are zero when ``exact``; with
    ``ieee`` (also chosen when an input holds a special value: NaN, +-Inf, a subnormal or
    a magnitude whose square overflows), each op's IEEE rule for special values."""
    ieee = ieee or any(_special(a) for a in inputs)
    values: dict[str, np.ndarray] = {}
    bounds: dict[str, Bound] = {}
    free: dict[str, np.ndarray | None] = {}
    bitwise: dict[str, bool] = {}
    magnitudes: dict[str, Sample] = {}
    dtype = graph["inputs"][0]["expr"]["type"]["dtype"]
    u = 0.0 if exact else c * UNIT_ROUNDOFF[dtype]
    out = [o["uid"] for o in graph["outputs"]]
    for entry, array in zip(graph["inputs"], inputs, strict=True):
        uid = entry["uid"]
        values[uid], bounds[uid], free[uid], bitwise[uid] = (
            np.asarray(array, dtype=np.float64), None, None, True)
    reductions: dict[str, int] = {}
    for node in graphs.nodes(graph):
        op, attrs, uid = node.op, _in_dtype(node.attrs, dtype), node.uid
        args = [values[a] for a in node.args]
        errs = [bounds[a] for a in node.args]
        k = op.reduction([a.shape for a in args], attrs)
        if k:
            reductions[node.name] = k
        bitwise[uid] = op.copies and all(bitwise[a] for a in node.args)
        if ieee:
            values[uid], bounds[uid], free[uid] = op.ieee(
                args, errs, [free[a] for a in node.args], attrs, u, dtype)
            continue
        free[uid] = None
        if isinstance(op, Contraction) and u and _may_overflow(op, args, k, u, dtype):
            return evaluate(graph, inputs, exact, c, ieee=True)  # that rule decides
        values[uid] = op.forward(args, attrs)
        if exact and isinstance(op, Contraction):
            magnitude = op.magnitude(args, attrs)
            if magnitude.size and magnitude.max() >= 1 / UNIT_ROUNDOFF[dtype]:
                bounds[uid] = op.bound(args, errs, attrs, c * UNIT_ROUNDOFF[dtype])
            else:
                bounds[uid] = op.bound(args, errs, attrs, 0.0)
        elif isinstance(op, Contraction) and u and all(e is None for e in errs):
            magnitude = op.magnitude(args, attrs)  # computed once: bound and statistic
            bounds[uid] = scaled(op.rounding(k, u), magnitude) + op.underflow(k, u, dtype)
            if uid in out:
                magnitudes[uid] = Sample(magnitude, k)
        else:
            bound = op.bound(args, errs, attrs, u)
            if isinstance(op, Contraction) and u and bound is not None:
                bound = bound + op.underflow(k, u, dtype)
            bounds[uid] = bound
    return Reference(
        [values[uid] for uid in out],
        [_dense(bounds[uid], values[uid]) for uid in out],
        reductions,
        [free[uid] for uid in out],
        [bitwise[uid] for uid in out],
        [magnitudes.get(uid) for uid in out],
    )


def _special(array: np.ndarray) -> bool:
    if not np.issubdtype(array.dtype, np.floating) or not array.size:
        return False
    info = np.finfo(array.dtype)
    magnitude = np.abs(array)
    if not np.isfinite(magnitude).all() or magnitude.max() >= np.sqrt(info.max):
        return True
    return bool(((magnitude > 0) & (magnitude < info.tiny)).any())


def _in_dtype(attrs: Attrs, dtype: str) -> Attrs:
    """The node's floating constants (a pad's ``constant_value``...) as the target holds
    them: rounded to the graph's dtype (0.1 is not a float32; 1e39 is +Inf in float32).
    Kept in float64, a pad of 0.1 feeding a float32 matmul failed right kernels."""
    if not any(isinstance(v, float) for v in attrs.values()):
        return attrs
    with np.errstate(over="ignore", under="ignore"):
        return {k: float(np.asarray(v, dtype)) if isinstance(v, float) else v
                for k, v in attrs.items()}


def _may_overflow(op: Contraction, args: Sequence[np.ndarray], k: int, u: float,
                  dtype: str) -> bool:
    """Whether a partial sum of ``op`` on finite ``args`` may exceed the dtype's largest
    finite number: then the IEEE rule decides (such elements are only required written).
    Inputs below sqrt(max) alone do not rule it out: K products of nearly max add up."""
    if not all(a.size for a in args):
        return False
    largest = float(np.abs(args[0]).max()) * float(np.abs(args[1]).max())
    return largest * k * (1 + op.rounding(k, u)) > float(np.finfo(dtype).max)


def _dense(bound: Bound, value: np.ndarray) -> np.ndarray:
    return np.zeros(value.shape) if bound is None else bound
