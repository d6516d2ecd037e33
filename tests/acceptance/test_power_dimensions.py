"""The catalog's new dimensions (issue 33, classes 1 to 6): for each, a faulty host variant
(``selftest/faults_dimensions.py``) is rejected by a catalog case, and the real host passes
the same cases with three seeds; the coverage shows the dimensions; user cases differing
only in attributes get distinct ids and run back to back."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from pytest_xtc.conformance import builtin_cases, coverage_table
from pytest_xtc.core.adapter import TargetSpec
from pytest_xtc.core.cases.case import Case, load_case_paths
from pytest_xtc.core.execution import guard
from pytest_xtc.core.execution.runner import Settings, run_case
from pytest_xtc.core.outcome import Status
from pytest_xtc.ops.builder import GraphBuilder
from pytest_xtc.selftest import faults
from pytest_xtc.targets.host import HostTarget

SEEDS = (0, 1, 2)
#: fault -> catalog cases that must reject it (the dimension it hides in)
CAUGHT_BY = {
    "output-index-16bit": ["relu-float32-9x65537-none"],  # class 1
    "input-index-16bit": ["matmul-float32-257x259x257-vectorize"],
    "column-index-8bit": ["relu-float32-9x65537-none"],
    "column-index-16bit": ["relu-float32-9x65537-none"],
    "rows-past-256-unwritten": ["relu-float32-65537x3-tile"],
    "rows-past-65536-unwritten": ["relu-float32-65537x3-tile"],
    # one loop of a compute op past 2^16 (its bound kept in 16 bits), or a conv2d channel
    # loop past 2^8: no matmul or conv2d loop of the catalog ran past 4,099 before
    "loop-bound-16bit": ["matmul-float32-4x4x65537-none", "matmul-float32-65537x2x3-none",
                         "conv2d-float32-1x65538x2x1-65537x1x4-s1-p0-none"],
    "conv-channels-8bit": ["conv2d-float32-1x2x2x65537-1x1x4-s1-p0-none",
                           "conv2d-float32-1x1x1x1-1x1x65537-s1-p0-none"],
    "last-partial-tile-unwritten": ["matmul-float32-13x11x7-none"],  # a vector remainder
    "reduction-remainder-dropped": ["matmul-float32-31x17x13-unroll_k"],  # class 2
    "reduction-remainder-twice": ["conv2d-float32-1x7x8x17-5x3x8-s1-p0-2_1-0-tile_c"],
    "square-filter-assumed": ["conv2d-float32-1x10x1x3-3x1x5-s3x2-p1-1_0-0-split"],  # class 3
    "strides-swapped": ["conv2d-float32-1x10x1x3-3x1x5-s3x2-p1-1_0-0-split"],
    "pad-sides-swapped": ["conv2d-float32-1x8x8x3-3x3x4-s2-p0-1_0-1-none"],  # class 4
    "cache-without-attributes": ["pad2d-float32-1x5x6x3-pad1-0_0-1-none"],  # class 5
    "cache-without-dtype": ["pad2d-float64-1x8x8x3-pad2-none"],
    "cache-without-shapes": ["matmul-float32-1x1x8-vectorize"],
    "aligned-loads": ["matmul-float32-16x37x8-tile_ijk-odd-offset"],  # class 6
    "aligned-stores": ["matmul-float32-64x3x29-unroll-odd-offset"],
    "aligned-64-loads": ["matmul-float32-16x37x8-tile_ijk-odd-offset"],
}


def catalog(*ids: str) -> list[Case]:
    found = {c.id: c for c in builtin_cases()}
    return [found[i] for i in ids]


@pytest.mark.parametrize("name", sorted(CAUGHT_BY))
def test_dimension_fault_rejected_real_host_accepted(name: str, tmp_path: Path) -> None:
    chosen = catalog(*CAUGHT_BY[name])
    bad = faults.make(name)
    verdicts = [run_case(bad, c, tmp_path / f"bad-{n}", Settings(0)) for n, c in enumerate(chosen)]
    assert all(o.status is Status.FAILED for o in verdicts), [o.message for o in verdicts]
    host = HostTarget(TargetSpec("host", "host"))
    for seed in SEEDS:
        for n, case in enumerate(chosen):
            outcome = run_case(host, case, tmp_path / f"host-{seed}-{n}", Settings(seed))
            assert outcome.status is Status.PASSED, (seed, case.id, outcome.message)


def test_every_dimension_fault_is_in_the_selftest() -> None:
    from pytest_xtc.selftest import proof

    assert set(CAUGHT_BY) <= set(faults.FAULTS)
    ids = {c.id for c in proof.selected_cases()}
    assert {i for chosen in CAUGHT_BY.values() for i in chosen} <= ids


def test_coverage_shows_the_new_dimensions() -> None:
    table = coverage_table()
    conv = table["conv2d"]
    for name in ("r", "s", "stride_h", "stride_w", "pad_top", "pad_bottom", "pad_left",
                 "pad_right", "align"):
        assert name in conv.values and all(conv.values[name].values()), name
    assert conv.complete
    assert {"tile_k", "split_k", "strip_mine_k"} <= set(table["matmul"].values["schedule"])
    assert {"tile_c", "tile_rs"} <= set(conv.values["schedule"])
    assert set(table["pad2d"].values) >= {"top", "bottom", "left", "right",
                                          "constant_value_form", "align"}
    lines = "\n".join(conv.lines())
    assert "pad_left" in lines and "align" in lines
    assert "one loop past 2^16 iterations per case: " in lines and len(conv.loops) == 7
    assert table["matmul"].to_dict()["loops_past_16_bits"] == ["65537x2x3", "2x65537x3",
                                                                "4x4x65537"]


def test_a_catalog_family_key_misspelt_is_refused() -> None:
    from pytest_xtc.conformance import check_family_keys

    check_family_keys("matmul", {"schedules": {}, "loops": []})
    with pytest.raises(ValueError, match="family matmul: unknown key 'loop'; a family holds"):
        check_family_keys("matmul", {"schedules": {}, "loop": []})


def test_every_loop_of_matmul_and_conv2d_runs_past_16_bits_in_some_case() -> None:
    """Each loop of each compute op's nest, alone past 2^16 iterations (its others
    short); a long reduction with the 16 outputs the precision check decides on."""
    from pytest_xtc.core.cases import graphs

    loops = {"matmul": {"i": ("A", 0), "k": ("A", 1), "j": ("B", 1)},
             "conv2d": {"n": ("X", 0), "c": ("X", 3), "r": ("W", 0), "s": ("W", 1),
                        "f": ("W", 3)}}
    every = builtin_cases()
    for op, axes in loops.items():
        for loop, (operand, axis) in axes.items():
            found = [c for c in every if c.op == op and any(
                t["name"] == operand and t["expr"]["type"]["shape"][axis] > 65536
                for t in c.graph["inputs"])]
            assert found, (op, loop)
            if loop in ("k", "c", "r", "s"):
                assert any(np.prod(graphs.outputs(c.graph)[0].shape) >= 16
                           for c in found), (op, loop)
    conv_out = {tuple(graphs.outputs(c.graph)[0].shape) for c in every if c.op == "conv2d"}
    assert any(shape[1] > 65536 for shape in conv_out)  # h
    assert any(shape[2] > 65536 for shape in conv_out)  # w


def test_catalog_crosses_16_bit_widths_and_pairs_non_square_filters() -> None:
    every = builtin_cases()
    from pytest_xtc.core.cases import graphs

    big = {c.op for c in every
           if any(np.prod(o.shape) > 65536 for o in graphs.outputs(c.graph))}
    assert {"matmul", "conv2d", "relu", "pad", "pad2d", "unpad", "transpose", "reshape"} <= big
    filters = {tuple(c.graph["inputs"][1]["expr"]["type"]["shape"][:2])
               for c in every if c.op == "conv2d"}
    assert {(1, 3), (3, 1)} <= filters
    assert sum(c.twin is not None for c in every) >= 4


def test_operand_offsets() -> None:
    assert guard.offset("aligned", 4, 0) == 0
    assert guard.offset("element", 8, 3) == 8
    assert [guard.offset("odd", 4, n) for n in range(3)] == [1, 3, 5]
    with pytest.raises(ValueError, match="operand alignment"):
        guard.offset("sideways", 4, 0)
    placed = guard.place("A", np.arange(6, dtype=np.float32), shift=3)
    assert placed.view.ctypes.data % guard.ALIGN == 3
    assert placed.view.tolist() == list(range(6))
    assert not placed.violations()


def _pad_file(folder: Path, sides: list[int]) -> Path:
    g = GraphBuilder("padded")
    y = g.node("pad2d", "Y", [g.tensor("X", (1, 4, 5, 2), "float32")],
               padding={1: sides[:2], 2: sides[2:]}, constant_value=0)
    folder.mkdir()
    path = folder / "padded.yaml"
    path.write_text(yaml.safe_dump(g.output(y)))
    return path


def test_attribute_twins_in_user_files_get_distinct_ids_and_run_back_to_back(
        tmp_path: Path) -> None:
    first = _pad_file(tmp_path / "a", [0, 1, 1, 0])
    second = _pad_file(tmp_path / "b", [1, 0, 0, 1])
    loaded = load_case_paths([first, second])
    ids = [c.id for c in loaded]
    assert len(set(ids)) == len(ids), ids
    assert any("Y.padding=1:0_1_2:1_0" in i for i in ids), ids
    # in pairs (random inputs, exact inputs): the second of each runs after the first
    sources = {c.id for c in loaded if c.twin is None}
    assert len(sources) == 2 and all(c.twin.id in sources for c in loaded if c.twin), ids
    bad = faults.make("cache-without-attributes")
    verdicts = [run_case(bad, c, tmp_path / f"w{n}", Settings(0)) for n, c in enumerate(loaded)]
    assert [o.status for o in verdicts] == [
        Status.PASSED if c.id in sources else Status.FAILED for c in loaded]


#: An attribute-only pair of the catalog: the twin runs right after the first.
FIRST, TWIN = "pad2d-float32-1x5x6x3-pad0-1_1-0-none", "pad2d-float32-1x5x6x3-pad1-0_0-1-none"


def test_a_twin_right_after_its_twin_runs_in_the_worker_its_twin_kept(tmp_path: Path) -> None:
    """No run of the twin of its own when the twin's own run, just before, kept its
    worker (the plugin asks for it when the next item is its twin); a faulty cache still
    fails the second. Run alone, the twin runs its twin first ("-twin-first")."""
    first, twin = catalog(FIRST, TWIN)
    assert first.twin is None and twin.twin is not None and twin.twin.id == first.id
    keep = replace(Settings(0), keep_worker=True)
    bad = faults.make("cache-without-attributes")
    assert run_case(bad, first, tmp_path / "bad-a", keep).status is Status.PASSED
    chained = run_case(bad, twin, tmp_path / "bad-b", Settings(0))
    assert chained.status is Status.FAILED, chained.message
    assert not (tmp_path / "bad-b-twin-first").exists()
    alone = run_case(bad, twin, tmp_path / "bad-c", Settings(0))
    assert alone.status is Status.FAILED and (tmp_path / "bad-c-twin-first").exists()
    host = HostTarget(TargetSpec("host", "host"))
    for seed in SEEDS:
        ran = run_case(host, first, tmp_path / f"a{seed}", replace(keep, base_seed=seed))
        assert ran.status is Status.PASSED, ran.message
        outcome = run_case(host, twin, tmp_path / f"b{seed}", Settings(seed))
        assert outcome.status is Status.PASSED, outcome.message
        assert not (tmp_path / f"b{seed}-twin-first").exists()


def test_the_plugin_runs_each_twin_right_after_its_twin_in_the_same_worker(
        vendor, run, pytester: pytest.Pytester) -> None:  # type: ignore[no-untyped-def]
    """Given in any order, the pair runs first then twin; the twin reuses the first's
    worker (no "-twin-first" run) and the faulty cache fails it; selected alone, the twin
    runs its twin first and fails too; the real host passes the pair."""
    vendor("faulty_xtc", {"faulty-cache": "pytest_xtc.selftest.faults_dimensions:"
                                          "CacheWithoutAttributes"})
    picked = (f"--xtc-case={TWIN}", f"--xtc-case={FIRST}", "-v")
    for target, verdicts in (("host", ["PASSED", "PASSED"]),
                             ("faulty-cache", ["PASSED", "FAILED"])):
        result = run(f"--xtc-target={target}", f"--basetemp={target}", *picked)
        ran = [m.groups() for line in result.outlines  # -v's lines
               if (m := re.match(r"\S+::test_conformance\[(\S+)\] (PASSED|FAILED)", line))]
        assert ran == [(f"{target}-{FIRST}", verdicts[0]), (f"{target}-{TWIN}", verdicts[1])]
        assert not list((pytester.path / target).glob("*twin-first*"))
    alone = run("--xtc-target=faulty-cache", "--basetemp=alone", f"--xtc-case={TWIN}")
    alone.assert_outcomes(failed=1)
    assert list((pytester.path / "alone").glob("*twin-first*"))
