"""Every term of the contraction bound, each checked against a trap of its own dtype: a
constant that underflows to 0 (float64's eta), products that underflow (subnormal or
tiny normal inputs), sums that overflow from inputs below sqrt(max). Right kernels pass
(the correctly rounded dot product, a sequential FMA, numpy's float32 matmul); faulty
ones are still rejected."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pytest

from pytest_xtc.conformance import builtin_cases
from pytest_xtc.conformance.families import FAMILIES
from pytest_xtc.core.cases import case as cases
from pytest_xtc.core.cases import graphs, values
from pytest_xtc.core.execution.perf import flop_count
from pytest_xtc.core.judging import checking, reference
from pytest_xtc.core.judging.checks.base import evaluate
from pytest_xtc.ops import matmul
from pytest_xtc.ops.builder import GraphBuilder, GraphDict
from pytest_xtc.ops.contraction import FLOAT64_TINY, Contraction
from tests.support.exact_kernels import Pairs, correctly_rounded, kernel, sequential_fma

ALL_F64_SPECIAL = [c for c in builtin_cases() if c.dtype == "float64" and c.values == "special"]
#: The exact kernels here are pure Python (2148-bit integers a product: about 9 us a
#: multiply-add), so a case over this many flops a call is left to the real kernels: the
#: three matmuls with K=4099 (0.9M to 34M flops: 3 to 147 s a call, hours over 10 seeds,
#: 2 calls and 2 kernels) and one conv2d of 0.7M. Every other float64 special case runs.
EXACT_FLOPS = 2**18
F64_SPECIAL = [c for c in ALL_F64_SPECIAL if flop_count(c.graph) <= EXACT_FLOPS]
KERNELS = {"correctly-rounded": correctly_rounded, "sequential-fma": sequential_fma}


def _failures(dot: Callable[[Pairs], float], seeds: Sequence[int],
              spoil: Callable[[np.ndarray], None] = lambda a: None) -> list[str]:
    """Every (seed, case, call) where the kernel ``dot`` fails a float64 special case
    (calls 1 and 2: the timed third repeats call 1's inputs)."""
    found = []
    for seed in seeds:
        for case in F64_SPECIAL:
            for call in range(2):
                given = case.make_inputs(case.seed(seed, call))
                for array in given:
                    spoil(array)
                out = kernel(case.graph, given, dot)
                for array in out:
                    spoil(array)
                names = [o.name for o in graphs.outputs(case.graph)]
                if not checking.compare(names, out, evaluate(case, given)).ok:
                    found.append(f"{seed} {case.id} call {call + 1}")
    return found


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_right_float64_kernels_pass_every_special_case_on_seeds_0_to_9(name: str) -> None:
    assert {op for c in F64_SPECIAL for op in c.ops} >= {"matmul", "conv2d", "relu", "pad"}
    assert len(ALL_F64_SPECIAL) - len(F64_SPECIAL) <= 4 and len(F64_SPECIAL) >= 60
    assert _failures(KERNELS[name], range(10)) == []


def test_the_old_float64_eta_failed_the_correctly_rounded_dot_product(monkeypatch) -> None:
    assert np.finfo(np.float64).smallest_subnormal / 2 == 0.0  # the trap itself

    def old(self: Contraction, k: int, u: float, dtype: str) -> float:
        eta = float(np.finfo(dtype).smallest_subnormal) / 2
        return k * eta * (1 + u)

    monkeypatch.setattr(Contraction, "underflow", old)
    assert "0 matmul-float64-12x10x7-tile-special call 2" in _failures(correctly_rounded, [0])


def _flush(array: np.ndarray) -> None:
    """FTZ/DAZ: subnormals to zero of the same sign (selftest's flushes-subnormals)."""
    array[(array != 0) & (np.abs(array) < np.finfo(array.dtype).tiny)] *= 0


def test_flushing_subnormals_still_fails_the_float64_contraction_special_cases() -> None:
    """On each seed, most of them (13 or 14 of 23 here): the others' special values put no
    flushed subnormal where it moves a result past its bound (K=1, a pad's fan-out...)."""
    contractions = [c for c in F64_SPECIAL if {"matmul", "conv2d"} & set(c.ops)]
    failed = _failures(correctly_rounded, range(3), _flush)
    for seed in range(3):
        caught = [c.id for c in contractions if any(f.startswith(f"{seed} {c.id} ")
                                                    for f in failed)]
        assert 2 * len(caught) > len(contractions), (seed, caught)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_the_underflow_term_is_never_zero_and_at_least_k_eta(dtype: str) -> None:
    u = reference.UNIT_ROUNDOFF[dtype]
    eta = float(np.finfo(dtype).smallest_subnormal) / 2  # float64's: 0.0, the trap
    for k in (1, 2, 7, 27, 64):
        term = matmul.OP.underflow(k, u, dtype)
        assert term > 0 and math.isfinite(term)
        assert term >= k * (eta if eta else FLOAT64_TINY / 2)
        assert term >= (2 * k + 2) * FLOAT64_TINY  # the reference's and the bound's own
    if dtype == "float64":  # a few subnormal steps: far below any flushed subnormal
        assert matmul.OP.underflow(7, u, dtype) <= 40 * FLOAT64_TINY


def _matmul(dtype: str, m: int = 4, n: int = 3, k: int = 7) -> cases.Case:
    graph, _ = FAMILIES["matmul"](m, n, k, dtype)
    return cases.Case("matmul", dtype, f"{m}x{n}x{k}", cases.Schedule(), graph)


def _judged(case: cases.Case, given: list[np.ndarray], out: np.ndarray) -> bool:
    return checking.compare(["C"], [out], evaluate(case, given)).ok


def test_products_of_tiny_normal_float32_inputs_underflow_and_still_pass() -> None:
    case = _matmul("float32")
    rng = np.random.default_rng(0)
    a = (rng.uniform(0.5, 1, (4, 7)) * 1e-25).astype(np.float32)  # normal; products are not
    b = (rng.uniform(0.5, 1, (7, 3)) * 1e-25).astype(np.float32)
    right = a @ b  # float32: every product underflows to 0 or a subnormal
    assert np.abs(right).max() < np.finfo(np.float32).tiny
    assert _judged(case, [a, b], right)
    assert not _judged(case, [a, b], right + np.float32(1e-40))  # a subnormal step too far


def test_sums_that_overflow_from_inputs_below_sqrt_max_need_only_be_written() -> None:
    case = _matmul("float32")
    big = np.float32(1.5e19)  # below sqrt(max) = 1.8e19: products finite, their sum is not
    a, b = np.full((4, 7), big, np.float32), np.full((7, 3), big, np.float32)
    with np.errstate(over="ignore"):
        right = a @ b
    assert np.isinf(right).all()
    assert _judged(case, [a, b], right)
    assert _judged(case, [a, b], np.full_like(right, np.finfo(np.float32).max))  # FMA order
    unwritten = right.copy()
    values.fill_unwritten(unwritten[1:2, 1:2])
    assert not _judged(case, [a, b], unwritten)
    a /= np.float32(8.0)  # sums below max: strict again, an inf is wrong
    assert _judged(case, [a, b], a @ b)
    assert not _judged(case, [a, b], np.full_like(right, np.inf))


def test_a_two_matmul_chain_in_float64_subnormals_keeps_its_propagated_bound() -> None:
    graph, _ = FAMILIES["mlp"](3, 5, 4, 2, "float64")
    case = cases.Case("mlp", "float64", "x", cases.Schedule(), graph)
    for seed in range(5):
        rng = np.random.default_rng(seed)
        x = rng.uniform(-1, 1, (3, 5)) * 1e-160  # normal inputs, subnormal hidden layer
        w1, w2 = rng.uniform(-1, 1, (5, 4)) * 1e-160, rng.uniform(-1, 1, (4, 2))
        for dot in KERNELS.values():
            (out,) = kernel(graph, [x, w1, w2], dot)
            assert checking.compare(["Y"], [out], evaluate(case, [x, w1, w2])).ok, seed


def test_an_infinite_gamma_times_a_zero_magnitude_is_a_zero_bound_not_nan() -> None:
    """K u >= 1 (here a case file's c of 1e8) makes gamma_K infinite: no bound. Where
    |A||B| is 0, inf x 0 was NaN, a bound no result meets: a right 0 failed."""
    graph, _ = FAMILIES["matmul"](3, 2, 7, "float32")
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (3, 7)).astype(np.float32)
    b = rng.uniform(-1, 1, (7, 2)).astype(np.float32)
    a[0] = 0
    for ieee in (False, True):
        ref = reference.evaluate(graph, [a, b], c=1e8, ieee=ieee)
        assert not np.isnan(ref.bounds[0]).any()
        assert checking.compare(["C"], [a @ b], ref).ok
    mlp, _ = FAMILIES["mlp"](2, 7, 3, 2, "float32")  # the infinite bound passed on
    w2 = rng.uniform(-1, 1, (3, 2)).astype(np.float32)
    w2[:, 0] = 0
    ref = reference.evaluate(mlp, [a[:2], b[:, :1].repeat(3, 1), w2], c=1e8)
    assert not np.isnan(ref.bounds[0]).any()


def _pad_matmul(constant: float) -> GraphDict:
    g = GraphBuilder("pad_matmul")
    x, b = g.tensor("X", (2, 1), "float32"), g.tensor("B", (1, 64), "float32")
    padded = g.node("pad", "P", [x], padding={0: [1, 0]}, constant_value=constant)
    return g.output(g.node("matmul", "C", [padded, b]))


@pytest.mark.parametrize("constant", [0.1, 1e39, 1e-46, -3.0])
def test_a_pad_constant_is_judged_as_the_dtype_holds_it(constant: float) -> None:
    """0.1 is no float32 (kept in float64, a right K = 1 matmul after it failed 20 seeds
    of 20, by 1.2 bounds), 1e39 is +Inf in float32, 1e-46 is 0."""
    graph = _pad_matmul(constant)
    rng = np.random.default_rng(0)
    for _ in range(5):
        x = rng.uniform(-1, 1, (2, 1)).astype(np.float32)
        b = rng.uniform(-1, 1, (1, 64)).astype(np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            held = np.asarray(constant, np.float32)
            right = np.pad(x, [(1, 0), (0, 0)], constant_values=held) @ b
            wrong = np.pad(x, [(1, 0), (0, 0)], constant_values=held * 2) @ b
        ref = reference.evaluate(graph, [x, b])
        assert checking.compare(["C"], [right], ref).ok
        if held != 0 and np.isfinite(held):
            assert not checking.compare(["C"], [wrong], ref).ok
