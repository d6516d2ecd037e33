"""Smaller schedules: a step dropped with the loops it made, factors brought down and
clamped to their dimensions. No pytest."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

Step = tuple[str, tuple[Any, ...]]  # a primitive and its arguments
Steps = tuple[Step, ...]
_TILES = ("tile", "strip_mine")
_MAKES = ("tile", "strip_mine", "split")


def drop_step(steps: Sequence[Step], index: int) -> Steps:
    """The steps without step ``index``, and without the loops it made in the steps after
    it (a step left with nothing to act on goes too)."""
    primitive, args = steps[index]
    gone: set[str] = set()
    if primitive in _MAKES and len(args) > 1 and isinstance(args[1], Mapping):
        gone = set(args[1])
    kept: list[Step] = []
    for later in steps[index + 1:]:
        name, a = later
        root = a[-1] if a and isinstance(a[-1], str) and a[-1].startswith(".") else None
        if root is not None and any(root == f"./{g}" or root.startswith(f"./{g}/")
                                    for g in gone):
            continue
        first = a[0] if a else None
        if isinstance(first, str):
            if first in gone:
                continue
            if name in _MAKES and len(a) > 1 and isinstance(a[1], Mapping):
                gone_inner = {k for k in a[1] if k in gone}
                if gone_inner:
                    continue
            kept.append(later)
        elif isinstance(first, list):
            left = [x for x in first if x not in gone]
            if left or not first:
                kept.append((name, (left, *a[1:])))
        elif isinstance(first, Mapping):
            left_map = {k: v for k, v in first.items() if k not in gone}
            if left_map or not first:
                kept.append((name, (left_map, *a[1:])))
        else:
            kept.append(later)
    return (*steps[:index], *kept)


def factor_candidates(steps: Sequence[Step]) -> Iterator[Steps]:
    """The steps with one tile, unroll or vector factor brought down: to 1, 2, about its
    half (both sides: a failure may need an odd factor), or by one."""
    for index, (primitive, args) in enumerate(steps):
        for position, arg in enumerate(args):
            if not isinstance(arg, Mapping) or primitive == "split":
                continue
            for key, value in arg.items():
                if isinstance(value, bool) or not isinstance(value, int):
                    continue
                for smaller in dict.fromkeys((1, 2, value // 2, value // 2 + 1, value - 1)):
                    if 1 <= smaller < value:
                        new_arg = {**arg, key: smaller}
                        new_args = (*args[:position], new_arg, *args[position + 1:])
                        yield (*steps[:index], (primitive, new_args), *steps[index + 1:])


def clamp_factors(steps: Sequence[Step], sizes: Mapping[str, int]) -> Steps | None:
    """The steps with every tile no larger than its dimension (and than the tile outside
    it) and every unroll factor no larger than its loop; None when a split cuts past its
    dimension. ``sizes``: the scheduled node's dimensions (unknown ones left alone)."""
    owner: dict[str, str] = {d: d for d in sizes}
    extent: dict[str, int] = dict(sizes)
    out: list[Step] = []
    for primitive, args in steps:
        if primitive in _TILES and len(args) > 1 and isinstance(args[1], Mapping):
            dim = owner.get(str(args[0]))
            limit = extent.get(str(args[0]))
            tiles = {}
            for loop, size in args[1].items():
                if limit is not None and isinstance(size, int):
                    size = max(1, min(size, limit))
                    limit = size
                tiles[loop] = size
                if dim is not None:
                    owner[loop], extent[loop] = dim, size if isinstance(size, int) else 0
            args = (args[0], tiles, *args[2:])
        elif primitive == "split" and len(args) > 1 and isinstance(args[1], Mapping):
            limit = extent.get(str(args[0]))
            if limit is not None and any(s >= limit for s in list(args[1].values())[1:]):
                return None
            for segment in args[1]:
                owner[segment] = owner.get(str(args[0]), str(args[0]))
        elif primitive == "unroll" and args and isinstance(args[0], Mapping):
            args = ({k: (max(1, min(v, extent[k])) if k in extent and isinstance(v, int)
                         and extent[k] > 0 else v) for k, v in args[0].items()}, *args[1:])
        out.append((primitive, tuple(args)))
    return tuple(out)
