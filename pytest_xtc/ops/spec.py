"""What an op module declares: its attributes, shape rule, numpy forward, error-bound rule,
FLOP count and catalog family. No pytest, no XTC.

Error-bound rules (README, "When is a result right"): an op's ``bound`` gives, element-wise,
how far a correct target's result may be from the float64 reference, from the reference's
arguments, their own bounds (``None``: exactly zero, as for graph inputs) and the unit
roundoff ``u`` of the case's dtype (0 for exact inputs).

IEEE rules (special values: NaN, +-Inf, -0.0, subnormals, large magnitudes): an op's
``ieee`` gives the reference value with the NaN and +-Inf that IEEE 754 arithmetic fixes,
its bound, and the elements whose value depends on choices the op leaves to the compiler
(summation order, where an intermediate may overflow): those are only required written.
``copies`` ops (data movement) are IEEE copy operations: bit for bit, NaN payloads and the
sign of zero included. Other ops' NaN results may carry any payload, and their zero
results either sign (an accumulator starting at +0, ``maximum(-0, +0)``: the graph does
not fix it).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

Shape = tuple[int, ...]
Attrs = dict[str, Any]
Bound = np.ndarray | None  # None: exactly zero everywhere
REQUIRED = object()


class OpError(ValueError):
    """A node the registry cannot take: unknown op or attribute, bad value or shapes."""


@dataclass(frozen=True)
class Attr:
    """One attribute: its name, a parser that checks and normalizes a value for an input
    of the given rank (raising ValueError with what is expected), and its default."""

    name: str
    parse: Callable[[Any, int], Any]
    default: Any = REQUIRED
    doc: str = ""


class Op(ABC):
    """One XTC op. Subclasses live in ``ops/``, one module each, as ``OP = Subclass()``."""

    name: str
    arity: int = 1
    attrs: tuple[Attr, ...] = ()
    #: Introduces no rounding: its result is exact given exact arguments.
    exact: bool = True
    #: Moves values without arithmetic (IEEE copy): results are compared bit for bit.
    copies: bool = True
    #: Attributes other frameworks have and XTC's op lacks, with what to say of them.
    lacks: ClassVar[Mapping[str, str]] = {}
    #: XTC's loop names for the op's node, outer to inner (its MLIR backend's dims), and
    #: which are reductions (never parallelized or vectorized). () where not declared.
    loops: tuple[str, ...] = ()
    reductions: tuple[str, ...] = ()
    #: The model of what can vary (conformance/model.py): each attribute's legal forms,
    #: by name (its spellings; for a floating attribute, each IEEE class of
    #: :data:`IEEE_CLASSES`). Every attribute of ``attrs`` has an entry.
    forms: ClassVar[Mapping[str, tuple[str, ...]]] = {}

    def normalize(self, attrs: Mapping[str, Any] | None, shapes: Sequence[Shape]) -> Attrs:
        """The node's attributes checked and with defaults; refuses what is not declared."""
        given = dict(attrs or {})
        if len(shapes) != self.arity:
            raise OpError(f"op {self.name} takes {self.arity} operands, got {len(shapes)}")
        declared = {a.name: a for a in self.attrs}
        unknown = sorted(set(given) - set(declared))
        if unknown:
            known = ", ".join(declared) or "none"
            notes = "".join(f"; {self.lacks[u]}" for u in unknown if u in self.lacks)
            raise OpError(f"op {self.name} has no attribute {', '.join(unknown)} "
                          f"(declared: {known}){notes}")
        rank = len(shapes[0])
        result: Attrs = {}
        for attr in self.attrs:
            if attr.name not in given:
                if attr.default is REQUIRED:
                    raise OpError(f"op {self.name} needs attribute {attr.name} ({attr.doc})")
                result[attr.name] = attr.default
                continue
            try:
                result[attr.name] = attr.parse(given[attr.name], rank)
            except (ValueError, TypeError) as exc:
                raise OpError(f"op {self.name}, attribute {attr.name}={given[attr.name]!r}: "
                              f"{exc}") from None
        try:
            self.shape(shapes, result)
        except (ValueError, IndexError) as exc:
            shown = " and ".join("x".join(map(str, s)) or "scalar" for s in shapes)
            raise OpError(f"op {self.name} cannot take operands {shown}: {exc}") from None
        return result

    @abstractmethod
    def shape(self, shapes: Sequence[Shape], attrs: Attrs) -> Shape:
        """The result's shape, by XTC's rule; ValueError when the operands do not fit."""

    @abstractmethod
    def forward(self, args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        """The result in numpy, in the arguments' dtype (float64 for the reference)."""

    def bound(self, args: Sequence[np.ndarray], errs: Sequence[Bound], attrs: Attrs,
              u: float) -> Bound:
        """The result's error bound. Default, for ops that only move or select values and
        are 1-Lipschitz in each argument: the arguments' bounds move with the data."""
        if all(e is None for e in errs):
            return None
        zeros = [np.zeros(a.shape) if e is None else e for a, e in zip(args, errs, strict=True)]
        return self.forward(zeros, self.error_attrs(attrs))

    def ieee(self, args: Sequence[np.ndarray], errs: Sequence[Bound],
             free: Sequence[np.ndarray | None], attrs: Attrs, u: float,
             dtype: str) -> tuple[np.ndarray, Bound, np.ndarray | None]:
        """Value, bound and free elements (None: none) on arguments that may hold special
        values (``free``: the arguments' elements only required written). Default, for ops
        that move or select values: numpy's float64 forward is the IEEE result."""
        value = self.forward(args, attrs)
        bound = self.bound(args, errs, attrs, u)
        if bound is not None:
            bound = np.where(np.isfinite(value), bound, 0.0)
        return value, bound, self.spread(free, [a.shape for a in args], attrs)

    def spread(self, masks: Sequence[np.ndarray | None], shapes: Sequence[Shape],
               attrs: Attrs) -> np.ndarray | None:
        """The result elements that depend on the True elements of the arguments' masks
        (None: no element). Default: the op moves each element (1-Lipschitz, one
        argument)."""
        if all(m is None for m in masks):
            return None
        floats = [np.zeros(s) if m is None else m.astype(np.float64)
                  for m, s in zip(masks, shapes, strict=True)]
        return self.forward(floats, self.error_attrs(attrs)) > 0

    def error_attrs(self, attrs: Attrs) -> Attrs:
        """The attributes to move error bounds with (padding adds exact constants: 0)."""
        return attrs

    def reduction(self, shapes: Sequence[Shape], attrs: Attrs) -> int:
        """Length K of the dot products the op computes; 0 when it computes none."""
        return 0

    def flops(self, shapes: Sequence[Shape], attrs: Attrs) -> int:
        """Floating-point operations of one evaluation (contractions: 2 per multiply-add)."""
        return 0


# -- the IEEE classes of a floating attribute (a pad constant, a threshold) ---------------

#: Each class of value a floating attribute may take, by name (``subnormal``: of the
#: case's dtype); ``positive`` and ``negative`` are ordinary values.
IEEE_CLASSES = ("zero", "negative_zero", "positive", "negative", "subnormal", "inf",
                "negative_inf", "nan")
_ORDINARY = {"zero": 0.0, "negative_zero": -0.0, "positive": 1.5, "negative": -2.5,
             "inf": float("inf"), "negative_inf": float("-inf"), "nan": float("nan")}


def ieee_value(value: float | str, dtype: str) -> float:
    """A floating attribute's value: a number as given, or the value of an IEEE class
    (:data:`IEEE_CLASSES`) in ``dtype``. ValueError for a class it does not know."""
    if not isinstance(value, str):
        return float(value)
    if value == "subnormal":
        return float(np.finfo(dtype).smallest_subnormal) * 3
    if value not in _ORDINARY:
        raise ValueError(f"IEEE class {value!r}: expected one of {', '.join(IEEE_CLASSES)}")
    return _ORDINARY[value]


def value_label(value: float | str) -> str:
    """How a case id shows a floating attribute: ordinary numbers as numbers (``1.5``),
    other classes by name (``nan``, ``negative_zero``)."""
    if isinstance(value, str) and value in ("positive", "negative"):
        value = _ORDINARY[value]
    return f"{value:g}" if not isinstance(value, str) else value


# -- attribute parsers shared by several ops ------------------------------------------------


def integer(value: Any, rank: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("expected an integer")
    return value


def number(value: Any, rank: int) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("expected a number")
    return float(value)


def axis(value: Any, rank: int) -> int:
    index = integer(value, rank)
    if not -rank <= index < rank:
        raise ValueError(f"axis {index} out of range for rank {rank}")
    return index % rank


def _pair(value: Any) -> tuple[int, int]:
    if isinstance(value, int) and not isinstance(value, bool):
        return (value, value)
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        return (int(value[0]), int(value[1]))
    raise ValueError(f"expected an integer or [before, after], got {value!r}")


def padding(value: Any, rank: int) -> dict[int, tuple[int, int]]:
    """XTC's padding forms, as {axis: (before, after)} with non-negative axes: an integer
    (every axis), ``[before, after]`` (every axis), a list of per-axis widths (the last
    axes), or ``{axis: width or [before, after]}``."""
    if isinstance(value, int) and not isinstance(value, bool):
        widths = {a: (value, value) for a in range(rank)}
    elif isinstance(value, (list, tuple)) and len(value) == 2 and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        widths = {a: (int(value[0]), int(value[1])) for a in range(rank)}
    elif isinstance(value, (list, tuple)):
        if len(value) > rank:
            raise ValueError(f"{len(value)} widths for rank {rank}")
        widths = {rank - len(value) + i: _pair(v) for i, v in enumerate(value)}
    elif isinstance(value, Mapping):
        widths = {axis(int(k), rank): _pair(v) for k, v in value.items()}
    else:
        raise ValueError("expected an integer, [before, after], a list or a mapping")
    if any(b < 0 or e < 0 for b, e in widths.values()):
        raise ValueError("widths must be non-negative")
    return {a: w for a, w in sorted(widths.items()) if w != (0, 0)}


def int_tuple(value: Any, rank: int) -> tuple[int, ...]:
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise ValueError("expected a list of integers")
    return tuple(int(v) for v in value)
