"""``conv2d``: NHWC input (any leading dimensions), RSCF weights, no padding (XTC pads
with a separate pad2d node), ``stride`` an integer or [sh, sw]."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from pytest_xtc.ops.contraction import Contraction
from pytest_xtc.ops.spec import Attr, Attrs, Shape


def _stride(value: Any, rank: int) -> tuple[int, int]:
    if isinstance(value, int) and not isinstance(value, bool):
        pair = (value, value)
    elif isinstance(value, (list, tuple)) and len(value) == 2 and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        pair = (int(value[0]), int(value[1]))
    else:
        raise ValueError("expected an integer or [sh, sw]")
    if min(pair) < 1:
        raise ValueError("strides must be at least 1")
    return pair


class Conv2d(Contraction):
    name = "conv2d"
    arity = 2
    loops, reductions = ("b", "h", "w", "f", "r", "s", "c"), ("r", "s", "c")
    attrs = (Attr("stride", _stride, (1, 1), "an integer or [sh, sw]"),)
    forms: ClassVar[Mapping[str, tuple[str, ...]]] = {"stride": ("pair", "int")}
    lacks: ClassVar[Mapping[str, str]] = {
        "groups": "XTC's conv2d has no grouped or depthwise form (XTC ignores groups= and "
                  "computes a full conv)"
    }

    def shape(self, shapes: Sequence[Shape], attrs: Attrs) -> Shape:
        x, w = shapes
        if len(x) < 3 or len(w) != 4:
            raise ValueError("input needs at least 3 dimensions (..., H, W, C), "
                             "weights 4 (R, S, C, F)")
        *lead, h, wd, c = x
        r, s, wc, f = w
        if c != wc:
            grouped = (" (XTC's conv2d has no grouped or depthwise form: the weights need "
                       "all the input's channels)" if c % wc == 0 else "")
            raise ValueError(f"input has {c} channels, weights {wc}{grouped}")
        sh, sw = attrs["stride"]
        if h < r or wd < s:
            raise ValueError(f"a {r}x{s} window does not fit in {h}x{wd}")
        return (*lead, (h - r) // sh + 1, (wd - s) // sw + 1, f)

    def forward(self, args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        """A tensordot over the windows: BLAS, in any summation order (the bound covers
        all)."""
        x, w = args
        r, s, _, _ = w.shape
        sh, sw = attrs["stride"]
        windows = np.lib.stride_tricks.sliding_window_view(x, (r, s), axis=(-3, -2))  # type: ignore[call-overload]
        windows = windows[..., ::sh, ::sw, :, :, :]  # (..., OH, OW, C, R, S)
        return np.tensordot(windows, w, axes=([-3, -2, -1], [2, 0, 1]))  # (..., OH, OW, F)

    def reduction(self, shapes: Sequence[Shape], attrs: Attrs) -> int:
        r, s, c, _ = shapes[1]
        return int(r * s * c)


OP = Conv2d()


Pair = int | Sequence[int]  # one value for both axes, or one per axis (sides)


def _sides(pad: Pair) -> tuple[int, int, int, int]:
    """Padding as (top, bottom, left, right): an integer pads every side."""
    if isinstance(pad, int):
        return (pad, pad, pad, pad)
    if len(pad) == 2:
        return (pad[0], pad[0], pad[1], pad[1])
    top, bottom, left, right = pad
    return (top, bottom, left, right)


def _strides(stride: Pair) -> tuple[int, int]:
    return (stride, stride) if isinstance(stride, int) else (stride[0], stride[1])


def _conv(g: Any, n: int, h: int, w: int, c: int, r: int, s: int, f: int, stride: Pair,
          pad: Pair, dtype: str, stride_form: str = "pair") -> Any:
    x = g.tensor("X", (n, h, w, c), dtype)
    top, bottom, left, right = _sides(pad)
    if top or bottom or left or right:
        x = g.node("pad2d", "P", [x], padding={1: [top, bottom], 2: [left, right]},
                   constant_value=0)
    pair = list(_strides(stride))
    return g.node("conv2d", "O", [x, g.tensor("W", (r, s, c, f), dtype)],
                  stride=pair[0] if stride_form == "int" else pair)


def label(n: int, h: int, w: int, c: int, r: int, s: int, f: int, stride: Pair,
          pad: Pair) -> str:
    """``NxHxWxC-RxSxF-sSTRIDE-pPAD``; strides that differ per axis read ``s1x2``, pads
    that differ per side ``p0-1_1-0`` (top-bottom_left-right)."""
    sh, sw = _strides(stride)
    sides = _sides(pad)
    strides = f"{sh}" if sh == sw else f"{sh}x{sw}"
    pads = (f"{sides[0]}" if len(set(sides)) == 1
            else f"{sides[0]}-{sides[1]}_{sides[2]}-{sides[3]}")
    return f"{n}x{h}x{w}x{c}-{r}x{s}x{f}-s{strides}-p{pads}"


def family(n: int, h: int, w: int, c: int, r: int, s: int, f: int, stride: Pair, pad: Pair,
           dtype: str = "float32", relu: bool = False, stride_form: str = "pair",
           ) -> tuple[dict, str]:
    """Catalog family ``conv2d``: [n, h, w, c, r, s, f, stride, pad] (stride: an integer
    or [sh, sw]; pad: a pad2d node before it, an integer or [top, bottom, left, right]);
    ``stride_form``: the stride written [sh, sw] (``pair``) or as one integer (``int``,
    sh for both axes)."""
    if stride_form == "int":
        stride = _strides(stride)[0]
    from pytest_xtc.ops.builder import GraphBuilder

    g = GraphBuilder("conv2d_relu" if relu else "conv2d")
    o = _conv(g, n, h, w, c, r, s, f, stride, pad, dtype, stride_form)
    if relu:
        o = g.node("relu", "R", [o])
    form = "-stride_int" if stride_form == "int" else ""
    return g.output(o), label(n, h, w, c, r, s, f, stride, pad) + form
