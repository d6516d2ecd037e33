"""The suite's power over special values and performance claims (issue 33, classes 7 and
8): each faulty host variant (``selftest/faults_numbers.py``) is rejected by catalog cases
with default options, and the real host passes the same cases with three seeds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pytest_xtc.conformance import builtin_cases
from pytest_xtc.core.adapter import TargetSpec
from pytest_xtc.core.cases import values
from pytest_xtc.core.cases.case import Case
from pytest_xtc.core.execution import perf
from pytest_xtc.core.execution.perf import DEFAULT_TIMING
from pytest_xtc.core.execution.runner import Settings, run_case
from pytest_xtc.core.judging import plausibility
from pytest_xtc.core.outcome import Outcome, Status
from pytest_xtc.selftest import faults, faults_numbers
from pytest_xtc.targets.host import HostTarget

SEEDS = (0, 1, 2)
HOST = HostTarget(TargetSpec("host", "host"))


def cases(*ids: str) -> list[Case]:
    found = {c.id: c for c in builtin_cases()}
    return [found[i] for i in ids]


def outcomes(adapter: HostTarget, chosen: list[Case], tmp: Path, seed: int = 0,
             **settings: object) -> list[Outcome]:
    given: dict[str, object] = {"timing": DEFAULT_TIMING, "perf": False, **settings}
    return [run_case(adapter, case, tmp / f"{adapter.name}-{seed}-{n}",
                     Settings(seed, **given))  # type: ignore[arg-type]
            for n, case in enumerate(chosen)]


RELU = ["relu-float32-6x5-none-special", "relu-float32-6x5-tile-special"]
MATMUL = ["matmul-float32-12x10x7-none-special", "matmul-float64-12x10x7-tile-special"]
CONV = ["conv2d-float32-2x9x9x3-3x3x8-s2-p1-none-special"]
MOVES = ["pad-float32-5x7-pad0:1-2_1:0-3-none-special",
         "unpad-float64-8x10-pad0:1-2_1:0-3-none-special"]
#: fault: the special cases it must fail, each of them (3 seeds for the real host)
SPECIAL_FAULTS = {
    "relu-float16-threshold": RELU,
    "relu-drops-nan": RELU,
    "flushes-subnormals": RELU + MOVES,
    "contraction-flushes-subnormals": MATMUL + CONV,
    "skips-zero-products": MATMUL,
    "skips-zero-filters": MATMUL + CONV,
    "saturates-overflow": RELU + MOVES + MATMUL,
}


@pytest.mark.parametrize("fault", sorted(SPECIAL_FAULTS))
def test_each_special_value_fault_is_rejected_and_the_host_is_not(fault: str,
                                                                  tmp_path: Path) -> None:
    chosen = cases(*SPECIAL_FAULTS[fault])
    for seed in SEEDS:  # in every case, whatever the seed: not by luck
        for outcome in outcomes(faults.make(fault), chosen, tmp_path / "bad", seed):
            assert outcome.status is Status.FAILED, (fault, seed, outcome.case)
            assert "exceed the bound" in outcome.message
    for seed in SEEDS:
        for outcome in outcomes(HOST, chosen, tmp_path / "host", seed):
            assert outcome.status is Status.PASSED, (seed, outcome.case, outcome.message)


def test_special_inputs_hold_every_class_even_in_a_6x5_input() -> None:
    for dtype in ("float32", "float64"):
        pool = values.specials(dtype)
        assert len(pool) <= 30
        for seed in SEEDS:
            array = values.special_array((6, 5), dtype, np.random.default_rng(seed))
            bits = {v.tobytes() for v in array.reshape(-1)}
            assert all(v.tobytes() in bits for v in pool if not np.isnan(v))
            assert np.isnan(array).any()
    f32 = values.specials("float32")  # what a float16 threshold or flush loses
    with np.errstate(over="ignore"):
        assert ((f32 > 0) & (f32.astype(np.float16) == 0)).any()
        assert (np.isfinite(f32) & np.isinf(f32.astype(np.float16))).any()
        f64 = values.specials("float64")
        assert ((f64 > 0) & (f64.astype(np.float32) == 0)).any()


def test_contraction_operands_meet_zeros_with_every_special() -> None:
    (case,) = cases("matmul-float32-12x10x7-none-special")
    a, b = case.make_inputs(0)
    assert (a[0] == 0).all() and np.signbit(a[0]).any()  # meets B's Inf: 0 x Inf
    assert (b[:, 0] == 0).all()
    tiny = np.finfo(np.float32).tiny
    assert (np.abs(b[:, 1]) <= tiny).all() and (b[:, 1] != 0).all()  # a subnormal column
    assert np.isinf(b).any() and np.isinf(a).any()


# -- class 8: performance plausibility ------------------------------------------------------

TIMED = ["matmul-float32-64x64x64-tile", "pad-float32-1x16-pad1:4-4-none",
         "relu-float32-1x1-none"]


def test_times_too_short_are_marked_invalid_and_the_host_is_not(tmp_path: Path) -> None:
    chosen = cases(*TIMED)
    bad = outcomes(faults.make("times-too-short"), chosen, tmp_path / "bad", perf=True)
    for outcome in bad:  # right results: passed, but the record says why it is impossible
        assert outcome.status is Status.PASSED, outcome.message
    assert any(o.perf and o.perf["invalid"] for o in bad), [o.perf for o in bad]
    for seed in SEEDS:
        for outcome in outcomes(HOST, chosen, tmp_path / "host", seed, perf=True):
            assert outcome.status is Status.PASSED and outcome.perf is not None
            assert outcome.perf["invalid"] is None, outcome.perf


def test_plausibility_bounds() -> None:
    ceilings = plausibility.Ceilings(1e12, 1e12, 1e-9, "test")
    assert plausibility.invalid({"min_s": 1e-6, "flops": 1e6, "bytes": 1e3}, ceilings) is None
    assert "GFLOP/s" in plausibility.invalid({"min_s": 1e-7, "flops": 1e6}, ceilings)
    assert "GB/s" in plausibility.invalid({"min_s": 1e-8, "bytes": 1e5}, ceilings)
    assert "cycle" in plausibility.invalid({"min_s": 1e-10}, ceilings)
    assert "positive" in plausibility.invalid({"min_s": 0.0}, ceilings)
    # a declared peak bounds a target that declares no physical limits
    default = plausibility.default_ceilings(1e9)
    assert plausibility.invalid({"min_s": 1e-3, "flops": 3e6}, default)
    assert plausibility.invalid({"min_s": 1e-3, "flops": 1.5e6}, default) is None
    host = HOST.physical_limits("float32")
    assert host is not None and host.flops_per_s and host.flops_per_s >= 2 * 6.2e9 * 64


def test_invalid_records_show_in_the_summary_and_the_terminal_lines() -> None:
    from pytest_xtc.report.render.invalid_perf import invalid_lines

    good = {"median_s": 1e-3, "invalid": None}
    bad = {"median_s": 1e-12, "invalid": "a call of 1e-12 s is shorter than one cycle"}
    lines = invalid_lines([("t", "a", good), ("t", "b", bad)])
    assert lines == [lines[0]] and "1 of 2 performance records INVALID" in lines[0]
    assert "b: a call of 1e-12 s" in lines[0]
    assert invalid_lines([("t", "a", good)]) == []


def test_record_is_marked_from_the_graph(tmp_path: Path) -> None:
    (case,) = cases("matmul-float32-64x64x64-tile")
    inputs = case.make_inputs(0)
    limits = HOST.physical_limits("float32")
    fast = perf.record(case.graph, inputs, [1e-12] * 3, DEFAULT_TIMING, limits=limits)
    assert fast["invalid"] and fast["bytes"] == 2 * 64 * 64 * 4
    slow = perf.record(case.graph, inputs, [1e-3] * 3, DEFAULT_TIMING, limits=limits)
    assert slow["invalid"] is None


# -- the repeat check honours deterministic = False -------------------------------------------

REPEATED = ["matmul-float32-31x37x29-tile", "matmul-float32-64x64x2304-none",
            "matmul-float32-12x10x7-none-special", "relu-float32-5x7-none"]


def test_a_varying_but_right_target_passes_the_repeat_check(tmp_path: Path) -> None:
    chosen = cases(*REPEATED)
    right = faults_numbers.VaryingSum(TargetSpec("varying-sum", "varying-sum"))
    found = outcomes(right, chosen, tmp_path / "right", repeat_check=True)
    for outcome in found:
        assert outcome.status is Status.PASSED, (outcome.case, outcome.message)
    assert any(o.checks and o.checks["repeat"]["differing"] for o in found)  # it did vary
    beyond = faults.make("varying-beyond-bound")
    for outcome in outcomes(beyond, chosen[:2], tmp_path / "beyond", repeat_check=True):
        assert outcome.status is Status.FAILED and "repeat run" in outcome.message
    for seed in SEEDS:
        for outcome in outcomes(HOST, chosen, tmp_path / "host", seed, repeat_check=True):
            assert outcome.status is Status.PASSED, (seed, outcome.case, outcome.message)
