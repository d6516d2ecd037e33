"""The float64 numpy reference of a graph, with an element-wise error bound per output.

Each op's module (``pytest_xtc/ops/``) says how it computes and how errors pass through
it (README, "When is a result right"):

* Data movement (pad, pad2d, unpad, transpose, reshape) and relu introduce no rounding:
  their bound is their argument's, zero for graph inputs, so alone they must be bit-exact.
* Contractions (matmul, conv2d) add Higham's rigorous ``gamma_K |A||B|`` for the case's
  dtype, times the case's factor ``c`` (1 by default: an error above it is a defect).
* Exact inputs (small integers) make every product and partial sum representable: the
  bound is zero, bit for bit.

A bound is computed only where one can be non-zero: the inputs' bounds are exactly zero,
and so are the errors an exact op passes on from them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from pytest_xtc.core import graphs
from pytest_xtc.core.graphs import GraphDict
from pytest_xtc.ops.contraction import gamma
from pytest_xtc.ops.spec import Bound

UNIT_ROUNDOFF = {"float16": 2.0**-11, "float32": 2.0**-24, "float64": 2.0**-53}
DEFAULT_C = 1.0

__all__ = ["DEFAULT_C", "UNIT_ROUNDOFF", "Reference", "evaluate", "forward", "forward_fn",
           "gamma"]


@dataclass
class Reference:
    values: list[np.ndarray]  # float64, one per graph output
    bounds: list[np.ndarray]  # float64, >= 0, same shapes
    reductions: dict[str, int]  # node name -> reduction length K, for messages


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
    graph: GraphDict, inputs: Sequence[np.ndarray], exact: bool = False, c: float = DEFAULT_C
) -> Reference:
    """Evaluate ``graph`` in float64 on ``inputs``; bounds are zero when ``exact``."""
    values: dict[str, np.ndarray] = {}
    bounds: dict[str, Bound] = {}
    dtype = graph["inputs"][0]["expr"]["type"]["dtype"]
    u = 0.0 if exact else c * UNIT_ROUNDOFF[dtype]
    for entry, array in zip(graph["inputs"], inputs, strict=True):
        values[entry["uid"]] = np.asarray(array, dtype=np.float64)
        bounds[entry["uid"]] = None
    reductions: dict[str, int] = {}
    for node in graphs.nodes(graph):
        args = [values[a] for a in node.args]
        values[node.uid] = node.op.forward(args, node.attrs)
        bounds[node.uid] = node.op.bound(args, [bounds[a] for a in node.args], node.attrs, u)
        k = node.op.reduction([a.shape for a in args], node.attrs)
        if k:
            reductions[node.name] = k
    out = [o["uid"] for o in graph["outputs"]]
    return Reference(
        [values[uid] for uid in out],
        [_dense(bounds[uid], values[uid]) for uid in out],
        reductions,
    )


def _dense(bound: Bound, value: np.ndarray) -> np.ndarray:
    return np.zeros(value.shape) if bound is None else bound
