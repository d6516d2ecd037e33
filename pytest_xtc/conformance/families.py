"""Graph families of the built-in suite: each turns catalog parameters into an XTC graph.

Every op module brings its own single-op family (``pytest_xtc/ops/<op>.py``, ``family``);
the graphs of several ops are here. Operand names (A, B, C, X, W, ...) appear in
placements and messages.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from pytest_xtc import ops
from pytest_xtc.ops import conv2d
from pytest_xtc.ops.builder import GraphBuilder, GraphDict

Family = Callable[..., tuple[GraphDict, str]]


def _dims(*sizes: int) -> str:
    return "x".join(map(str, sizes))


def matmul_relu(i: int, j: int, k: int, dtype: str = "float32") -> tuple[GraphDict, str]:
    g = GraphBuilder("matmul_relu")
    c = g.node("matmul", "C", [g.tensor("A", (i, k), dtype), g.tensor("B", (k, j), dtype)])
    return g.output(g.node("relu", "R", [c])), _dims(i, j, k)


def mlp(
    batch: int, features: int, hidden: int, out: int, dtype: str = "float32"
) -> tuple[GraphDict, str]:
    """Two layers: relu(X W1) W2."""
    g = GraphBuilder("mlp")
    x = g.tensor("X", (batch, features), dtype)
    w1, w2 = g.tensor("W1", (features, hidden), dtype), g.tensor("W2", (hidden, out), dtype)
    h = g.node("relu", "H", [g.node("matmul", "L1", [x, w1])])
    return g.output(g.node("matmul", "Y", [h, w2])), _dims(batch, features, hidden, out)


def _families() -> dict[str, Family]:
    single: dict[str, Family] = {name: module.family for name, module in ops.modules().items()}
    return {
        **single,
        "matmul+relu": matmul_relu,
        "conv2d+relu": partial(conv2d.family, relu=True),
        "mlp": mlp,
    }


FAMILIES: dict[str, Family] = _families()
