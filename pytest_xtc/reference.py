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

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pytest_xtc.graphs import GraphDict, normalize_padding

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
    for node in graph["nodes"]:
        expr = node["expr"]
        op, attrs = expr["op"]["name"], expr["op"].get("attrs") or {}
        args = [values[uid] for uid in expr["args"]]
        errs = [bounds[uid] for uid in expr["args"]]
        if op in ("matmul", "conv2d"):
            k, value, bound = _contraction(op, args, errs, attrs, 0.0 if exact else c * u)
            reductions[node["name"]] = k
        else:
            value, bound = _movement(op, args[0], errs[0], attrs)
        values[node["uid"]], bounds[node["uid"]] = value, bound
    out = [o["uid"] for o in graph["outputs"]]
    return Reference([values[uid] for uid in out], [bounds[uid] for uid in out], reductions)


def _contraction(
    op: str, args: list[np.ndarray], errs: list[np.ndarray], attrs: dict, target_u: float
) -> tuple[int, np.ndarray, np.ndarray]:
    a, b = args
    ea, eb = errs
    if op == "matmul":
        k = a.shape[1]
        apply = np.matmul
    else:
        r, s, ch, _ = b.shape
        k = r * s * ch
        stride = tuple(attrs.get("stride", (1, 1)))

        def apply(x: np.ndarray, w: np.ndarray) -> np.ndarray:
            return conv2d(x, w, stride)

    value = apply(a, b)
    magnitude = apply(np.abs(a) + ea, np.abs(b) + eb)
    # target_u == 0 means exact inputs: every partial sum is representable.
    rounding = gamma(k, target_u) + 2 * gamma(k, UNIT_ROUNDOFF["float64"]) if target_u else 0.0
    propagated = apply(ea, np.abs(b)) + apply(np.abs(a), eb) + apply(ea, eb)
    return k, value, rounding * magnitude + propagated


def _movement(
    op: str, x: np.ndarray, err: np.ndarray, attrs: dict
) -> tuple[np.ndarray, np.ndarray]:
    if op == "relu":
        return np.maximum(x, 0.0), err
    if op in ("pad", "pad2d"):
        pads = normalize_padding(attrs["padding"], x.ndim)
        widths = [pads.get(axis, (0, 0)) for axis in range(x.ndim)]
        fill = float(attrs.get("constant_value", 0) or 0)
        return np.pad(x, widths, constant_values=fill), np.pad(err, widths)
    if op == "unpad":
        pads = normalize_padding(attrs["padding"], x.ndim)
        index = tuple(
            slice(pads.get(axis, (0, 0))[0], x.shape[axis] - pads.get(axis, (0, 0))[1])
            for axis in range(x.ndim)
        )
        return x[index], err[index]
    if op == "transpose":
        axes = tuple(attrs["axes"])
        return np.transpose(x, axes), np.transpose(err, axes)
    if op == "reshape":
        shape = tuple(attrs["shape"])
        return x.reshape(shape), err.reshape(shape)
    raise ValueError(f"no numpy reference for op {op!r}")


def conv2d(x: np.ndarray, w: np.ndarray, stride: tuple[int, int]) -> np.ndarray:
    """NHWC input, RSCF weights, no padding (XTC pads with a separate pad2d node)."""
    r, s, _, _ = w.shape
    windows = np.lib.stride_tricks.sliding_window_view(x, (r, s), axis=(-3, -2))
    windows = windows[..., :: stride[0], :: stride[1], :, :, :]  # (..., OH, OW, C, R, S)
    return np.einsum("...hwcrs,rscf->...hwf", windows, w)
