"""Twins: the catalog pairs cases that differ only in attributes (every one), only in dtype
or only in shapes (one case a family), in disjoint pairs, each twin run right after its
twin (next to it in the order: in the worker its twin's own run kept)."""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import replace

import pytest

from pytest_xtc.conformance import builtin_cases
from pytest_xtc.core.cases import twins


def _told_apart_by(case) -> set[str]:  # type: ignore[no-untyped-def]
    """What a cache key could leave out and still confuse ``case`` with its twin."""
    return {kind for kind in twins.LEFT_OUT
            if twins.structure(case, kind) == twins.structure(case.twin, kind)}


def test_each_twin_differs_in_one_thing_and_every_family_gets_dtype_and_shape_twins() -> None:
    every = builtin_cases()
    kinds: dict[str, set[str]] = defaultdict(set)
    for case in every:
        if case.twin is None:
            continue
        assert case.twin.graph != case.graph, case.id
        told = _told_apart_by(case)
        assert len(told) == 1, (case.id, case.twin.id, told)
        kinds[case.op] |= told
    assert {"attributes", "dtype", "shapes"} <= set().union(*kinds.values())
    for family in ("matmul", "conv2d", "relu", "pad2d", "mlp", "matmul+relu"):
        assert {"dtype", "shapes"} <= kinds[family], (family, kinds[family])
    # a few runs more, not one a case: at most one dtype and one shape twin a family
    extra = sum(1 for c in every if c.twin is not None and "attributes" not in _told_apart_by(c))
    assert extra <= 2 * len({c.op for c in every})


def test_dtype_and_shape_twins_prefer_random_float32_small_cases() -> None:
    chosen = {c.id: c.twin.id for c in builtin_cases()
              if c.twin is not None and _told_apart_by(c) == {"shapes"}}
    assert chosen["matmul-float32-1x1x8-vectorize"] == "matmul-float32-1x1x1-vectorize"


def test_user_files_pair_attribute_twins_only_and_an_unknown_kind_is_refused() -> None:
    every = [c for c in builtin_cases() if c.op == "mlp"]
    plain = [replace(c, twin=None) for c in every]
    assert not any(c.twin for c in twins.pair(plain))  # mlp has no attributes
    assert sum(c.twin is not None for c in twins.pair(plain, also=("dtype",))) == 1
    with pytest.raises(ValueError, match="'layout' is not one of attributes, dtype, shapes"):
        twins.pair(plain, also=("layout",))


def test_twins_come_in_disjoint_pairs_that_hold_every_attribute_only_case() -> None:
    every = builtin_cases()
    by_id = {c.id: c for c in every}
    firsts = [c.twin.id for c in every if c.twin is not None]
    assert all(by_id[i].twin is None for i in firsts)  # a pair's first is never a twin
    graphs = [twins._graph(c) for c in every]
    in_pairs = {c.id for c in every if c.twin is not None} | set(firsts)
    groups = twins._groups(every, graphs, "attributes", range(len(every)))
    for group in groups:
        assert {every[n].id for n in group} <= in_pairs
    # one twin each, bar an odd group's last (and the dtype-only and shape-only pairs)
    odd = sum(len(group) % 2 for group in groups)
    assert len(set(firsts)) >= len(firsts) - odd - 2


def test_adjacent_moves_each_twin_right_after_its_twin() -> None:
    every = builtin_cases()
    ordered = twins.adjacent(every)
    assert sorted(c.id for c in ordered) == sorted(c.id for c in every)
    paired = [c for c in every if c.twin is not None]
    # each first followed by a twin of its own (an odd group's first has two: one follows)
    firsts = {c.twin.id for c in paired}
    assert sum(twins.follows(a, b) for a, b in itertools.pairwise(ordered)) == len(firsts)
    twin = paired[0]
    first = next(c for c in every if c.id == twin.twin.id)
    assert twins.follows(first, twin) and not twins.follows(twin, first)
    assert not twins.follows(first, None)
    # a twin whose twin is not among the cases stays where it was
    assert twins.adjacent([paired[0]]) == [paired[0]]
