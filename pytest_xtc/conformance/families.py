"""Graph families of the built-in suite: each turns catalog parameters into an XTC graph.

Operand names (A, B, C, X, W, ...) appear in placements and messages.
"""

from __future__ import annotations

from collections.abc import Callable

from pytest_xtc.core.graphs import GraphBuilder, GraphDict

Family = Callable[..., tuple[GraphDict, str]]


def _dims(*sizes: int) -> str:
    return "x".join(map(str, sizes))


def matmul(i: int, j: int, k: int, dtype: str = "float32") -> tuple[GraphDict, str]:
    g = GraphBuilder("matmul")
    c = g.node("matmul", "C", [g.tensor("A", (i, k), dtype), g.tensor("B", (k, j), dtype)])
    return g.output(c), _dims(i, j, k)


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


def _conv(g: GraphBuilder, n, h, w, c, r, s, f, stride, pad, dtype):  # type: ignore[no-untyped-def]
    x = g.tensor("X", (n, h, w, c), dtype)
    if pad:
        x = g.node("pad2d", "P", [x], padding={1: [pad, pad], 2: [pad, pad]}, constant_value=0)
    return g.node("conv2d", "O", [x, g.tensor("W", (r, s, c, f), dtype)], stride=[stride, stride])


def _conv_label(n, h, w, c, r, s, f, stride, pad) -> str:  # type: ignore[no-untyped-def]
    return f"{_dims(n, h, w, c)}-{_dims(r, s, f)}-s{stride}-p{pad}"


def conv2d(
    n: int,
    h: int,
    w: int,
    c: int,
    r: int,
    s: int,
    f: int,
    stride: int,
    pad: int,
    dtype: str = "float32",
) -> tuple[GraphDict, str]:
    g = GraphBuilder("conv2d")
    o = _conv(g, n, h, w, c, r, s, f, stride, pad, dtype)
    return g.output(o), _conv_label(n, h, w, c, r, s, f, stride, pad)


def conv2d_relu(
    n: int,
    h: int,
    w: int,
    c: int,
    r: int,
    s: int,
    f: int,
    stride: int,
    pad: int,
    dtype: str = "float32",
) -> tuple[GraphDict, str]:
    g = GraphBuilder("conv2d_relu")
    o = _conv(g, n, h, w, c, r, s, f, stride, pad, dtype)
    return g.output(g.node("relu", "R", [o])), _conv_label(n, h, w, c, r, s, f, stride, pad)


def relu(*shape: int, dtype: str = "float32") -> tuple[GraphDict, str]:
    g = GraphBuilder("relu")
    return g.output(g.node("relu", "Y", [g.tensor("X", shape, dtype)])), _dims(*shape)


def _padding_label(shape, padding) -> str:  # type: ignore[no-untyped-def]
    pads = "_".join(f"{a}:{b}-{e}" for a, (b, e) in sorted(padding.items()))
    return f"{_dims(*shape)}-pad{pads}"


def pad(
    shape: list[int], padding: dict[int, list[int]], dtype: str = "float32"
) -> tuple[GraphDict, str]:
    g = GraphBuilder("pad")
    y = g.node("pad", "Y", [g.tensor("X", shape, dtype)], padding=padding, constant_value=0)
    return g.output(y), _padding_label(shape, padding)


def pad2d(
    n: int, h: int, w: int, c: int, width: int, dtype: str = "float32"
) -> tuple[GraphDict, str]:
    g = GraphBuilder("pad2d")
    padding = {1: [width, width], 2: [width, width]}
    y = g.node(
        "pad2d", "Y", [g.tensor("X", (n, h, w, c), dtype)], padding=padding, constant_value=0
    )
    return g.output(y), f"{_dims(n, h, w, c)}-pad{width}"


def unpad(
    shape: list[int], padding: dict[int, list[int]], dtype: str = "float32"
) -> tuple[GraphDict, str]:
    g = GraphBuilder("unpad")
    y = g.node("unpad", "Y", [g.tensor("X", shape, dtype)], padding=padding)
    return g.output(y), _padding_label(shape, padding)


def transpose(shape: list[int], axes: list[int], dtype: str = "float32") -> tuple[GraphDict, str]:
    g = GraphBuilder("transpose")
    y = g.node("transpose", "Y", [g.tensor("X", shape, dtype)], axes=axes)
    return g.output(y), f"{_dims(*shape)}-axes{''.join(map(str, axes))}"


def reshape(shape: list[int], to: list[int], dtype: str = "float32") -> tuple[GraphDict, str]:
    g = GraphBuilder("reshape")
    y = g.node("reshape", "Y", [g.tensor("X", shape, dtype)], shape=to)
    return g.output(y), f"{_dims(*shape)}-to{_dims(*to)}"


FAMILIES: dict[str, Family] = {
    "matmul": matmul,
    "conv2d": conv2d,
    "relu": relu,
    "pad": pad,
    "pad2d": pad2d,
    "unpad": unpad,
    "transpose": transpose,
    "reshape": reshape,
    "matmul+relu": matmul_relu,
    "conv2d+relu": conv2d_relu,
    "mlp": mlp,
}
