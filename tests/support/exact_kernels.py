"""Right float64 kernels computed here, without XTC: each contraction's dot products
computed exactly (integers scaled by 2^2148) and rounded once (the correctly rounded dot
product), or accumulated by a sequential FMA (exact ``a*b + acc``, rounded at each step);
every other op by its numpy forward, which rounds nothing. A product or sum that involves
NaN or +-Inf follows IEEE arithmetic, as a kernel's would."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from pytest_xtc.core.cases import graphs
from pytest_xtc.ops.builder import GraphDict
from pytest_xtc.ops.contraction import Contraction

SCALE = 1074  # every finite float64 is an integer times 2^-1074
Pairs = list[tuple[float, float]]


class _Terms:
    """A dot product's factors, in the order the op's forward meets them."""

    __slots__ = ("pairs",)

    def __init__(self, pairs: Pairs) -> None:
        self.pairs = pairs

    def __mul__(self, other: _Terms) -> _Terms:
        return _Terms([(self.pairs[0][0], other.pairs[0][0])])

    def __add__(self, other: object) -> _Terms:
        if isinstance(other, _Terms):
            return _Terms(self.pairs + other.pairs)
        return self  # numpy's object sums start from 0

    __radd__ = __add__


def _scaled(x: float) -> int:
    n, d = x.as_integer_ratio()
    return n * ((1 << SCALE) // d)


def _rounded(total: int) -> float:
    """``total * 2^-2148`` rounded once to float64 (+-Inf beyond its range)."""
    try:
        return total / (1 << (2 * SCALE))  # int true division rounds correctly
    except OverflowError:
        return math.inf if total > 0 else -math.inf


def correctly_rounded(pairs: Pairs) -> float:
    if not all(math.isfinite(a) and math.isfinite(b) for a, b in pairs):
        return sum(a * b for a, b in pairs)
    return _rounded(sum(_scaled(a) * _scaled(b) for a, b in pairs))


def sequential_fma(pairs: Pairs) -> float:
    acc = 0.0
    for a, b in pairs:
        if math.isfinite(a) and math.isfinite(b) and math.isfinite(acc):
            acc = _rounded(_scaled(a) * _scaled(b) + (_scaled(acc) << SCALE))
        else:
            acc = a * b + acc
    return acc


def _contract(op: Contraction, args: Sequence[np.ndarray], attrs: dict,
              dot: Callable[[Pairs], float]) -> np.ndarray:
    leaves = []
    for array in args:
        leaf = np.empty(array.shape, object)
        flat = leaf.reshape(-1)
        for i, v in enumerate(array.reshape(-1).tolist()):
            flat[i] = _Terms([(v, 0.0)])
        leaves.append(leaf)
    terms = op.forward(leaves, attrs)
    return np.array([dot(t.pairs if isinstance(t, _Terms) else [])
                     for t in terms.reshape(-1)], np.float64).reshape(terms.shape)


def kernel(graph: GraphDict, inputs: Sequence[np.ndarray],
           dot: Callable[[Pairs], float]) -> list[np.ndarray]:
    """``graph``'s outputs on ``inputs`` with every contraction's dot products by ``dot``."""
    values = {e["uid"]: np.asarray(a, np.float64)
              for e, a in zip(graph["inputs"], inputs, strict=True)}
    dtype = inputs[0].dtype
    for node in graphs.nodes(graph):
        args = [values[a] for a in node.args]
        with np.errstate(all="ignore"):
            if isinstance(node.op, Contraction):
                result = _contract(node.op, args, node.attrs, dot)
            else:
                result = node.op.forward(args, node.attrs)
        values[node.uid] = result.astype(dtype)
    return [values[o["uid"]] for o in graph["outputs"]]
