"""The suite's power (issue 12): each class of fault is rejected, the real host is not.

Each faulty host variant (``selftest/faults.py``) runs on a few cases it should fail; the
real host runs on the same cases with three seeds and must pass them all.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from pytest_xtc.conformance import builtin_cases
from pytest_xtc.core.adapter import ONCE, TargetSpec
from pytest_xtc.core.cases import expectations, values
from pytest_xtc.core.cases.case import Case
from pytest_xtc.core.cases.selectors import Traits
from pytest_xtc.core.execution import guard, order
from pytest_xtc.core.execution.perf import DEFAULT_TIMING
from pytest_xtc.core.execution.runner import Settings, run_case
from pytest_xtc.core.judging import precision, reference
from pytest_xtc.core.outcome import Outcome, Status
from pytest_xtc.selftest import faults
from pytest_xtc.targets.host import HostTarget
from tests import DATA

SEEDS = (0, 1, 2)


def cases(*ids: str) -> list[Case]:
    found = {c.id: c for c in builtin_cases()}
    return [found[i] for i in ids]


def outcomes(adapter: HostTarget, chosen: list[Case], tmp: Path, seed: int = 0,
             **settings: object) -> list[Outcome]:
    """The cases run in this order, with the plugin's default timing (the timed calls are
    checked) unless ``settings`` says otherwise."""
    given: dict[str, object] = {"timing": DEFAULT_TIMING, "perf": False, **settings}
    return [
        run_case(adapter, case, tmp / f"{adapter.name}-{seed}-{n}", Settings(seed, **given))  # type: ignore[arg-type]
        for n, case in enumerate(chosen)
    ]


HOST = HostTarget(TargetSpec("host", "host"))

CLASSES = {
    # fault: (cases it must fail, a phrase of the failure)
    "writes-past-output": (
        ["matmul-float32-13x11x7-none", "conv2d-float32-1x9x9x3-3x3x8-s2-p1-tile"],
        "past the end of",
    ),
    "caches-by-shape": (
        ["matmul-float32-13x11x7-tile", "pad-float32-5x7-pad0:1-2_1:0-3-none"],
        "call 2 of 3 (fresh inputs)",
    ),
    "nan-to-zero": (
        ["relu-float32-64x129-none-special", "matmul-float32-12x10x7-none-special"],
        "expected nan",
    ),
    "negative-zero-lost": (
        ["pad-float32-5x7-pad0:1-2_1:0-3-none-special",
         "pad2d-float32-1x8x8x3-pad2-none-special"],
        "= 0x80000000",
    ),
    "tf32-inputs": (
        ["matmul-float32-64x64x2304-none", "conv2d-float32-1x7x7x256-3x3x32-s1-p1-none"],
        "effective precision",
    ),
    "wrong-when-batched": (
        ["conv2d-float32-2x8x8x3-3x3x4-s1-p0-none", "conv2d-float32-3x9x9x4-3x3x6-s2-p1-tile"],
        "exceed the bound",
    ),
    # issue 21: faults hiding behind the call count, the timing, the catalog's gaps
    "wrong-from-third-call": (
        ["matmul-float32-13x11x7-tile", "pad-float32-5x7-pad0:1-2_1:0-3-none"],
        "call 3 of 3 (timed, on call 1's inputs)",
    ),
    "wrong-when-timed": (
        ["matmul-float32-13x11x7-tile", "relu-float32-5x7-vectorize"],
        "call 3 of 3 (timed, on call 1's inputs)",
    ),
    "timed-on-stale-inputs": (
        ["matmul-float32-13x11x7-tile", "pad-float32-5x7-pad0:1-2_1:0-3-none"],
        "call 3 of 3 (timed, on call 1's inputs)",
    ),
    "pointwise-conv-offset": (
        ["conv2d-float32-2x10x11x16-1x1x8-s2-p0-tile",
         "conv2d-float32-1x13x1x3-1x1x1-s2x1-p0-strip_mine-element-offset"],
        "exceed the bound",
    ),
}

#: Faults of state kept from the case before, and cases each is rejected on by the order
#: check (run in this order without it, they pass).
ORDER_FAULTS = {
    "keeps-dtype-state": ["matmul-float64-13x11x7-tile+interchange",
                          "pad-float64-5x7-pad0:1-2_1:0-3-none"],
    "keeps-shape-state": ["matmul-float32-13x11x7-tile", "matmul-float32-13x11x7-unroll"],
}


@pytest.mark.parametrize("fault", sorted(CLASSES))
def test_each_fault_class_is_rejected_and_the_host_is_not(fault: str, tmp_path: Path) -> None:
    ids, phrase = CLASSES[fault]
    chosen = cases(*ids)
    for outcome in outcomes(faults.make(fault), chosen, tmp_path):
        assert outcome.status is Status.FAILED, (fault, outcome.case, outcome.message)
        assert phrase in outcome.message, outcome.message
    for seed in SEEDS:
        for outcome in outcomes(HOST, chosen, tmp_path, seed):
            assert outcome.status is Status.PASSED, (seed, outcome.case, outcome.message)
            assert outcome.guarded is True and outcome.calls == 3


@pytest.mark.parametrize("fault", sorted(ORDER_FAULTS))
def test_state_from_the_case_before_is_rejected_by_the_order_check(fault: str,
                                                                    tmp_path: Path) -> None:
    chosen = cases(*ORDER_FAULTS[fault])
    pool = order.pool(builtin_cases())
    for outcome in outcomes(faults.make(fault), chosen, tmp_path, order=pool):
        assert outcome.status is Status.FAILED, (fault, outcome.case, outcome.message)
        assert "right after" in outcome.message and "-float" in outcome.message
    plain = outcomes(faults.make(fault), chosen, tmp_path / "plain")  # hidden without it
    assert all(o.status is Status.PASSED for o in plain), [o.message for o in plain]
    for seed in SEEDS:
        for outcome in outcomes(HOST, chosen, tmp_path / "host", seed, order=pool):
            assert outcome.status is Status.PASSED, (seed, outcome.case, outcome.message)
            assert outcome.checks and outcome.checks["order"]["after"]


def test_every_call_is_checked_without_timing_too(tmp_path: Path) -> None:
    """--xtc-repeat=0 (no performance): the third call is made, once, and checked."""
    chosen = cases("matmul-float32-13x11x7-tile")
    (bad,) = outcomes(faults.make("wrong-from-third-call"), chosen, tmp_path, timing=ONCE)
    assert bad.status is Status.FAILED and "call 3 of 3" in bad.message
    (good,) = outcomes(HOST, chosen, tmp_path, timing=ONCE)
    assert good.status is Status.PASSED and good.calls == 3


def test_tf32_passes_the_rigorous_bound_and_fails_only_the_statistic(tmp_path: Path) -> None:
    (outcome,) = outcomes(faults.make("tf32-inputs"), cases("matmul-float32-32x32x4096-none"),
                          tmp_path)
    assert "exceed the bound" not in outcome.message
    assert outcome.message.count("effective precision") == 1
    assert outcome.precision is not None and outcome.precision["bits"] < 12


def test_host_reads_full_float32_precision_on_long_reductions(tmp_path: Path) -> None:
    chosen = cases("matmul-float32-64x64x2304-tile", "conv2d-float32-2x6x6x128-3x3x16-s1-p0-none")
    found = []
    for seed in SEEDS:
        for outcome in outcomes(HOST, chosen, tmp_path, seed):
            assert outcome.status is Status.PASSED, outcome.message
            assert outcome.precision is not None and outcome.precision["decided"]
            found.append(precision.Terms.from_dict(outcome.precision))
    assert precision.pool(found)["float32"].bits == 24.0


def test_repeat_check_keeps_its_meaning(tmp_path: Path) -> None:
    (outcome,) = outcomes(HOST, cases("matmul-float32-13x11x7-parallelize"), tmp_path,
                          repeat_check=True)
    assert outcome.status is Status.PASSED, outcome.message


# -- the pieces, without XTC -----------------------------------------------------------------


def test_guard_bands_name_the_operand_and_the_side() -> None:
    placed = guard.place("C", np.zeros((3, 4), np.float32))
    assert placed.view.ctypes.data % guard.ALIGN == 0
    assert guard.check([placed]) == []
    placed.buffer[placed.lead + 12 : placed.lead + 15] = 1.0
    placed.buffer[placed.lead - 2] = 0.0
    assert guard.check([placed]) == [
        "wrote 1 element(s) before the start of C (up to 2 before it)",
        "wrote 3 element(s) past the end of C (up to 3 past it)",
    ]


def test_guard_bands_of_a_large_operand_are_capped_and_still_see_overruns() -> None:
    weight = np.ones((4096, 1024), np.float32)  # 16 MiB: one plane would triple it
    placed = guard.place("B", weight)
    band = placed.lead
    assert band * 4 == guard.MAX_BAND_BYTES and placed.buffer.size == weight.size + 2 * band
    assert guard.check([placed]) == []
    end = placed.lead + weight.size
    placed.buffer[end : end + 1024] = 0.0  # one more row, as a kernel compiled for 4097 writes
    placed.buffer[band - 1] = 0.0
    assert guard.check([placed]) == [
        "wrote 1 element(s) before the start of B (up to 1 before it)",
        "wrote 1024 element(s) past the end of B (up to 1024 past it)",
    ]
    wide = guard.band_elements((2, 1 << 19), 4)  # a row longer than the cap: one row
    assert wide == 1 << 19


def test_unwritten_sentinel_is_a_signalling_nan_no_arithmetic_makes() -> None:
    for dtype in ("float32", "float64"):
        out = values.unwritten((4,), dtype)
        assert np.isnan(out).all() and values.unwritten_mask(out).all()
        with np.errstate(invalid="ignore"):
            assert not values.unwritten_mask(out * 1).any()  # arithmetic quiets it
        assert not values.unwritten_mask(np.full(4, np.nan, dtype)).any()


def test_special_inputs_hold_every_special_value() -> None:
    array = values.special_array((13, 11), "float32", np.random.default_rng(0))
    assert np.isnan(array).any() and np.isposinf(array).any() and np.isneginf(array).any()
    assert (np.signbit(array) & (array == 0)).any()
    tiny = np.finfo(np.float32).tiny
    assert ((array != 0) & (np.abs(array) < tiny)).any()


def test_contraction_ieee_rule() -> None:
    from pytest_xtc.conformance.families import FAMILIES

    graph, _ = FAMILIES["matmul"](3, 2, 2)
    a = np.array([[np.inf, 1], [np.nan, 1], [np.inf, -np.inf]], np.float32)
    b = np.array([[1, 0], [1, 1]], np.float32)
    ref = reference.evaluate(graph, [a, b], ieee=True)
    got = ref.values[0]
    assert got[0, 0] == np.inf and np.isnan(got[0, 1])  # Inf x 0 is NaN
    assert np.isnan(got[1]).all() and np.isnan(got[2, 0])  # NaN; Inf - Inf


def test_precision_statistic_separates_float32_from_tf32() -> None:
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(-1, 1, s).astype(np.float32) for s in ((32, 2048), (2048, 32)))
    exact = a.astype(np.float64) @ b.astype(np.float64)
    magnitude = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    honest = precision.terms("float32", a @ b, exact, magnitude, 2048)
    rounded = faults.tf32(a) @ faults.tf32(b)
    tf32 = precision.terms("float32", rounded, exact, magnitude, 2048)
    assert honest.bits == 24.0 and honest.problem() is None
    assert tf32.bits < 12 and "effective precision" in (tf32.problem() or "")
    assert precision.terms("float64", exact, exact, magnitude, 2048).problem() is None


# -- expected failures by properties -------------------------------------------------------


def write(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "x.expectations.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    expectations.load.cache_clear()
    return path


def test_expectations_select_by_properties_and_xtc_version(tmp_path: Path) -> None:
    path = write(tmp_path, "- {ops: [conv2d], dtypes: [float64], xtc: '<=0.3.2', "
                 "phase: compile, reason: r, url: u}\n- {pattern: 'relu-*', phase: run, "
                 "reason: r, url: u}\n")
    entries = expectations.load(path)
    conv = Traits("anything", frozenset({"pad2d", "conv2d"}), "float64", "host", frozenset())
    assert expectations.find(entries, conv, "0.3.2") is entries[0]
    assert expectations.find(entries, conv, "0.4.0") is None
    assert expectations.find(entries, "relu-float32-5x7-none") is entries[1]
    assert "phase: compile" in expectations.dumps(entries)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("- {pattern: x, phase: run, reason: r, url: u, opz: [relu]}\n", "unknown key opz"),
        ("- &a {pattern: x, phase: run, reason: r, url: u}\n- *a\n", "anchors and aliases"),
        (b"\xff\xfe- pattern", "not UTF-8"),
        ("- !!python/object:os.system {pattern: x}\n", "could not determine a constructor"),
        ("- {phase: run, reason: r, url: u}\n", "names no case"),
        ("- {ops: relu, xtc: 'later', phase: run, reason: r, url: u}\n", "version specifier"),
    ],
)
def test_bad_expectation_files_are_one_line_errors(tmp_path: Path, content: str | bytes,
                                                   message: str) -> None:
    with pytest.raises(expectations.ExpectationFileError, match=message) as info:
        expectations.load(write(tmp_path, content))
    assert "\n" not in str(info.value) and str(tmp_path) in str(info.value)


def test_host_expectations_cover_float64_conv2d_and_relu_only(tmp_path: Path) -> None:
    path = Path(HOST.expectations_file() or "")
    expectations.load.cache_clear()
    entries = expectations.load(path)
    covered = {c.id for c in builtin_cases() if expectations.find(entries, c, "0.3.2")}
    assert "conv2d-float64-2x8x8x3-3x3x4-s1-p0-vectorize" in covered
    assert "mlp-float64-1x16x32x10-none" in covered
    assert "matmul-float64-13x11x7-vectorize" not in covered
    assert not {c.id for c in builtin_cases() if expectations.find(entries, c, "0.4.0")}


def test_compile_failures_carry_the_compilers_diagnostic(tmp_path: Path) -> None:
    (outcome,) = outcomes(HOST, cases("relu-float64-5x7-none"), tmp_path)
    assert outcome.status is Status.FAILED
    assert "'linalg.yield' op type of yield operand 1 ('f32') doesn't match" in outcome.message


def test_a_float64_conv2d_user_case_named_anything_is_an_expected_failure(
    pytester: pytest.Pytester, run
) -> None:
    from pytest_xtc.conformance.families import FAMILIES

    graph, _ = FAMILIES["conv2d"](1, 6, 6, 2, 3, 3, 2, 1, 0, dtype="float64")
    graph["name"] = "my_layer"
    (pytester.path / "mine.yaml").write_text(yaml.safe_dump(graph))
    (pytester.path / "mlp.yaml").write_text((DATA / "xtc_mlp4.yaml").read_text())
    result = run("--xtc-target=host", "--xtc-cases=mine.yaml", "--xtc-cases=mlp.yaml",
                 "-k", "my_layer or mlp4")
    result.assert_outcomes(passed=2, xfailed=2)
