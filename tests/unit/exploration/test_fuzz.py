"""The fuzz generator (exploration/fuzz.py): one case from a seed, reproducible, every
drawn graph valid, and over a few hundred draws every dimension it varies taken."""

from __future__ import annotations

from collections import Counter

from pytest_xtc.core.cases import graphs
from pytest_xtc.core.cases.case import VALUE_KINDS, Case
from pytest_xtc.core.execution.guard import ALIGNMENTS
from pytest_xtc.exploration import fuzz


def test_the_same_seed_draws_the_same_cases_and_another_seed_others() -> None:
    first, again = fuzz.cases(20, 7), fuzz.cases(20, 7)
    assert [c.id for c in first] == [c.id for c in again]
    assert [graphs.canonical(c.graph) for c in first] == [graphs.canonical(c.graph)
                                                           for c in again]
    assert [c.id for c in fuzz.cases(20, 8)] != [c.id for c in first]
    assert len({c.id for c in fuzz.cases(200, 0)}) == 200  # the index is in the name


def test_draws_cover_topologies_orders_dtypes_values_and_schedules() -> None:
    drawn = fuzz.cases(300, 0)
    topologies = Counter(c.op.rsplit("-", 1)[1] for c in drawn)
    assert set(topologies) == set(fuzz.TOPOLOGIES)
    assert {c.dtype for c in drawn} == {"float32", "float64"}
    assert {c.values for c in drawn} == set(VALUE_KINDS) >= {"random", "exact", "special"}
    assert {c.align for c in drawn} == set(ALIGNMENTS) >= {"aligned", "odd"}
    assert {c.schedule.name for c in drawn} == {"none", "sched"}
    assert {p for c in drawn for step in c.schedule.steps for p in [step[0]]} >= {
        "tile", "interchange", "unroll", "vectorize", "parallelize", "pack_at"}
    ops = {op for c in drawn for op in c.ops}
    assert ops >= {"matmul", "conv2d", "relu", "pad"}
    orders = set()
    for case in drawn:
        made = [n.uid for n in graphs.nodes(case.graph)]  # valid: every node checked
        declared = [o["uid"] for o in case.graph["outputs"]]
        if len(declared) > 1:
            orders.add(made.index(declared[0]) < made.index(declared[1]))
        assert fuzz.is_fuzz(case)
    assert orders == {True, False}  # outputs declared in and against production order


def test_the_drawer_is_the_interface() -> None:
    base = fuzz.draw(0, 0)

    def drawer(seed: int, index: int) -> Case:
        return fuzz.draw(seed + 1, index)

    assert fuzz.cases(1, 0, drawer)[0].id != base.id
    assert fuzz.cases(1, 0, drawer)[0].id == fuzz.draw(1, 0).id


def test_a_fuzz_case_is_rebuilt_from_its_id_alone() -> None:
    case = fuzz.draw(3, 5)
    again = fuzz.rebuild(case.id)
    assert again is not None and again.id == case.id
    assert graphs.canonical(again.graph) == graphs.canonical(case.graph)
    assert again.schedule == case.schedule and again.align == case.align
    assert fuzz.rebuild("matmul-float32-13x11x7-none") is None
    assert fuzz.rebuild(case.id.replace("-5-", "-6-", 1)) is None  # not what index 6 draws
