"""Graph families of the built-in suite: each turns catalog parameters into an XTC graph.

Every op module brings its own single-op family (``pytest_xtc/ops/<op>.py``, ``family``);
the graphs of several ops are here. Operand names (A, B, C, X, W, ...) appear in
placements and messages.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from pytest_xtc import ops
from pytest_xtc.conformance.model import TOPOLOGIES
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


def graph(n: int, head: str, consumer: str, topology: str,
          dtype: str = "float32") -> tuple[GraphDict, str]:
    """A value V (n x n) made by ``head`` (matmul of n x 5 and 5 x n, pad adding a row and
    a column, relu), read by ``consumer`` (pad adding a row, or relu) and flowing as
    ``topology`` says (conformance/model.py, TOPOLOGIES)."""
    g = GraphBuilder(f"graph_{topology}")
    if head == "matmul":
        v = g.node("matmul", "V", [g.tensor("A", (n, 5), dtype), g.tensor("B", (5, n), dtype)])
    elif head == "pad":
        v = g.node("pad", "V", [g.tensor("X", (n - 1, n - 1), dtype)],
                   padding={0: [1, 0], 1: [0, 1]}, constant_value=0.0)
    else:
        v = g.node("relu", "V", [g.tensor("X", (n, n), dtype)])
    if consumer == "pad":
        used = g.node("pad", "P", [v], padding={0: [0, 1]}, constant_value=0.0)
    else:
        used = g.node("relu", "P", [v])
    label = f"{head}-{consumer}-{topology}-{_dims(n, n)}"
    if topology == "chain":
        return g.output(used), label
    if topology == "fan_out":
        return g.output(g.node("matmul", "Y", [used, v])), label
    if topology.startswith("two_outputs"):
        square = g.node("matmul", "Y", [v, v])
        outs = (used, square) if topology == "two_outputs" else (square, used)
        return g.output(*outs), label
    if topology.startswith("output_feeds_node"):
        outs = (v, used) if topology == "output_feeds_node" else (used, v)
        return g.output(*outs), label
    raise ValueError(f"topology {topology!r}: expected one of {', '.join(TOPOLOGIES)}")


def _families() -> dict[str, Family]:
    single: dict[str, Family] = {name: module.family for name, module in ops.modules().items()}
    return {
        **single,
        "matmul+relu": matmul_relu,
        "conv2d+relu": partial(conv2d.family, relu=True),
        "mlp": mlp,
        "graph": graph,
    }


FAMILIES: dict[str, Family] = _families()
