"""The float64 numpy reference of a graph, with an element-wise error bound per output.

Error rules (README, "When is a result right"):

* Data movement (pad, pad2d, unpad, transpose, reshape) and relu introduce no rounding:
  their bound is the bound of their input, zero for graph inputs, so alone they must be
  bit-exact. relu is 1-Lipschitz, so it passes its input's bound through unchanged.
* A dot product of length K computed in floating point of unit roundoff u, in any
  summation order, with or without FMA, satisfies
  ``|fl(a.b) - a.b| <= gamma_K |a|.|b|`` with ``gamma_K = K u / (1 - K u)``
  (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., eq. 3.5).
  matmul has K = the shared dimension, conv2d K = R*S*C. The bound is rigorous, so the
  factor ``c`` on the target's term is 1 by default: an error above it is a defect, not
  noise. The reference's own float64 rounding, and the rounding in computing the bound,
  add ``2 gamma_K(2^-53)``. Inputs that carry an error (an earlier node's result) add
  the first-order propagation ``e_a |b| + |a| e_b + e_a e_b``.
* Exact inputs (small integers) make every product and partial sum representable: any
  order gives the exact result, so the bound is zero: bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_xtc.core.graphs import GraphDict, normalize_padding

UNIT_ROUNDOFF = {"float16": 2.0**-11, "float32": 2.0**-24, "float64": 2.0**-53}
DEFAULT_C = 1.0


def gamma(k: int, u: float) -> float:
    """Higham's gamma_k = k u / (1 - k u)."""
    if k * u >= 1:
        return float("inf")
    return k * u / (1 - k * u)


@dataclass
class Reference:
    values: list[np.ndarray]  # float64, one per graph output
    bounds: list[np.ndarray]  # float64, >= 0, same shapes
    reductions: dict[str, int]  # node name -> reduction length K, for messages


CONTRACTIONS = ("matmul", "conv2d")


def reduction_length(op: str, a_shape: Sequence[int], b_shape: Sequence[int]) -> int:
    """K of a contraction: matmul's shared dimension, conv2d's R*S*C (RSCF weights)."""
    if op == "matmul":
        return int(a_shape[-1])
    r, s, ch, _ = b_shape
    return int(r * s * ch)


def apply(op: str, args: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """One node in numpy, in its arguments' dtype: the reference runs it in float64 (and
    on error bounds), :func:`forward` in the case's own dtype."""
    if op == "matmul":
        return np.matmul(args[0], args[1])
    if op == "conv2d":
        return conv2d(args[0], args[1], tuple(attrs.get("stride", (1, 1))))
    x = args[0]
    if op == "relu":
        return np.maximum(x, 0)
    if op in ("pad", "pad2d"):
        pads = normalize_padding(attrs["padding"], x.ndim)
        widths = [pads.get(axis, (0, 0)) for axis in range(x.ndim)]
        return np.pad(x, widths, constant_values=attrs.get("constant_value", 0) or 0)
    if op == "unpad":
        pads = normalize_padding(attrs["padding"], x.ndim)
        index = tuple(
            slice(pads.get(axis, (0, 0))[0], x.shape[axis] - pads.get(axis, (0, 0))[1])
            for axis in range(x.ndim)
        )
        return x[index]
    if op == "transpose":
        return np.transpose(x, tuple(attrs["axes"]))
    if op == "reshape":
        return x.reshape(tuple(attrs["shape"]))
    raise ValueError(f"no numpy reference for op {op!r}")


Step = tuple[str, str, str, dict[str, Any], list[str]]  # name, uid, op, attrs, arg uids


def _steps(graph: GraphDict) -> list[Step]:
    steps = []
    for node in graph["nodes"]:
        expr = node["expr"]
        attrs = expr["op"].get("attrs") or {}
        steps.append((node["name"], node["uid"], expr["op"]["name"], attrs, list(expr["args"])))
    return steps


def forward_fn(graph: GraphDict) -> Callable[[Sequence[np.ndarray]], list[np.ndarray]]:
    """A plain numpy evaluation of ``graph`` in its inputs' dtype, parsed once (it is the
    baseline that kernel times are compared with, so it is timed)."""
    steps = _steps(graph)
    in_uids = [entry["uid"] for entry in graph["inputs"]]
    out_uids = [o["uid"] for o in graph["outputs"]]

    def forward(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        values = dict(zip(in_uids, inputs, strict=True))
        for _, uid, op, attrs, args in steps:
            values[uid] = apply(op, [values[a] for a in args], attrs)
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
    bounds: dict[str, np.ndarray] = {}
    dtype = graph["inputs"][0]["expr"]["type"]["dtype"]
    u = UNIT_ROUNDOFF[dtype]
    for entry, array in zip(graph["inputs"], inputs, strict=True):
        values[entry["uid"]] = np.asarray(array, dtype=np.float64)
        bounds[entry["uid"]] = np.zeros(array.shape)
    reductions: dict[str, int] = {}
    for name, uid, op, attrs, arg_uids in _steps(graph):
        args = [values[a] for a in arg_uids]
        errs = [bounds[a] for a in arg_uids]
        values[uid] = apply(op, args, attrs)
        if op in CONTRACTIONS:
            k, bounds[uid] = _contraction_bound(op, args, errs, attrs, 0.0 if exact else c * u)
            reductions[name] = k
        else:
            # Data movement moves the error with the data (padding adds exact zeros);
            # relu(e) = e for a bound e >= 0: relu passes its input's bound through.
            bounds[uid] = apply(op, errs, {**attrs, "constant_value": 0})
    out = [o["uid"] for o in graph["outputs"]]
    return Reference([values[uid] for uid in out], [bounds[uid] for uid in out], reductions)


def _contraction_bound(
    op: str, args: list[np.ndarray], errs: list[np.ndarray], attrs: dict, target_u: float
) -> tuple[int, np.ndarray]:
    a, b = args
    ea, eb = errs
    k = reduction_length(op, a.shape, b.shape)

    def contract(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        return apply(op, [x, w], attrs)

    magnitude = contract(np.abs(a) + ea, np.abs(b) + eb)
    # target_u == 0 means exact inputs: every partial sum is representable.
    rounding = gamma(k, target_u) + 2 * gamma(k, UNIT_ROUNDOFF["float64"]) if target_u else 0.0
    propagated = contract(ea, np.abs(b)) + contract(np.abs(a), eb) + contract(ea, eb)
    return k, rounding * magnitude + propagated


def conv2d(x: np.ndarray, w: np.ndarray, stride: tuple[int, int]) -> np.ndarray:
    """NHWC input, RSCF weights, no padding (XTC pads with a separate pad2d node).
    A tensordot over the windows: BLAS, in any summation order (the bound covers all)."""
    r, s, _, _ = w.shape
    windows = np.lib.stride_tricks.sliding_window_view(x, (r, s), axis=(-3, -2))  # type: ignore[call-overload]
    windows = windows[..., :: stride[0], :: stride[1], :, :, :]  # (..., OH, OW, C, R, S)
    return np.tensordot(windows, w, axes=([-3, -2, -1], [2, 0, 1]))  # (..., OH, OW, F)
