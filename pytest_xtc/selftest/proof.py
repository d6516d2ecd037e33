"""The suite proves its own power: every faulty host variant must be rejected, and the real
host target must pass three runs with different seeds. Used by ``xtc-conformance selftest``.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_xtc.core.adapter import TargetAdapter, TargetSpec
from pytest_xtc.core.cases.case import Case
from pytest_xtc.core.execution.runner import Settings, run_case
from pytest_xtc.core.outcome import Status
from pytest_xtc.report.render.progress import Progress
from pytest_xtc.selftest import faults
from pytest_xtc.selftest.faults_numbers import ACCEPTED
from pytest_xtc.targets.host import HostTarget

# A small, varied slice of the catalog: sizes that are and are not multiples of the tiles,
# strided and padded conv2d (batch 1 and 2, a 1x1 stride-2 projection), graphs, data
# movement, random, exact and special inputs, a long reduction (the precision statistic),
# and float64 cases after the float32 ones (state kept from another dtype).
SHAPES = frozenset({
    "13x11x7", "64x64x64", "1x9x9x3-3x3x8-s2-p1", "5x7", "8x64x128x10",
    "5x7-pad0:1-2_1:0-3", "2x5x3x1-pad1", "8x10-pad0:1-2_1:0-3",
    "2x8x8x3-3x3x4-s1-p0", "64x64x2304", "12x10x7", "6x5",
})
SCHEDULES = frozenset({"none", "tile", "vectorize"})
COVERED = (  # all-pairs cases of the catalog (conformance/coverage.py)
    "matmul-float32-64x17x29-none", "matmul-float32-16x17x4099-vectorize",
    "conv2d-float32-2x10x11x16-1x1x8-s2-p0-tile", "conv2d-float32-1x7x11x3-3x1x17-s1x2-p0-none",
    "matmul-float64-1x3x8-tile", "matmul-float64-16x37x1-none",
    "pad-float64-5x7-pad0:1-2_1:0-3-none",
)
#: The catalog's dimensions of issue 33, one case each: outputs and operands past 2^16
#: elements, loops of matmul and conv2d past 2^16 iterations, a tiled reduction with a
#: remainder (matmul k, conv2d c), non-square filters with per-axis strides, asymmetric
#: padding, twins differing only in attributes, in dtype and in shapes (run right after
#: their twin), operands off alignment.
DIMENSIONS = (
    "relu-float32-9x65537-none", "relu-float32-65537x3-tile",
    "matmul-float32-257x259x257-vectorize", "matmul-float32-4x4x65537-none",
    "matmul-float32-65537x2x3-none", "conv2d-float32-1x65538x2x1-65537x1x4-s1-p0-none",
    "conv2d-float32-1x2x2x65537-1x1x4-s1-p0-none", "conv2d-float32-1x1x1x1-1x1x65537-s1-p0-none",
    "matmul-float32-31x17x13-unroll_k", "conv2d-float32-1x7x8x17-5x3x8-s1-p0-2_1-0-tile_c",
    "conv2d-float32-1x10x1x3-3x1x5-s3x2-p1-1_0-0-split",
    "conv2d-float32-1x8x8x3-3x3x4-s2-p0-1_0-1-none", "pad2d-float32-1x5x6x3-pad1-0_0-1-none",
    "pad2d-float64-1x8x8x3-pad2-none", "matmul-float32-1x1x8-vectorize",
    "matmul-float32-16x37x8-tile_ijk-odd-offset", "matmul-float32-64x3x29-unroll-odd-offset",
)
#: The model's dimensions (issue 52), one case each: a pad constant of an IEEE class
#: (NaN, Inf), a padding written with axes from the end, a value read by two nodes, a wide
#: dynamic range in one reduction, operands moved after the first call, pack_at of the
#: first input, special values in a convolution of stride 1 along W.
MODEL = (
    "pad-float32-5x7-pad0:1-2_1:0-3-vnan-tile", "pad2d-float32-2x8x3x3-pad1-vinf-int-none",
    "pad-float32-5x17-pad0:1-2_1:1-0-v-2.5-negative_axes-tile-element-offset",
    "graph-float32-matmul-relu-fan_out-3x3-none",
    "matmul-float32-16x16x29-descript-wide-odd_then_aligned-offset",
    "matmul-float32-16x17x13-strip_mine-exact-aligned_then_odd-offset",
    "matmul-float32-13x11x7-model_pack_at",
    "conv2d-float32-1x1x8x3-1x5x8-s2x1-p0-0_1-2-descript-special-aligned_then_odd-offset",
)
#: Past 2^24 elements (a float32 counter): last, over the default memory budget (the
#: self-test raises it to :data:`BUDGET`).
HUGE = ("relu-float32-8193x4096-none",)
BUDGET = 2 << 30
#: Hand-picked shapes whose vectorize case the catalog runs in float64 (it turns their
#: dtype): that case (float64, vectorized with a remainder), and another float32 schedule
#: of the conv2d shape whose float64 fails on the host (an expected failure of XTC).
TURNED = ("matmul-float64-13x11x7-vectorize", "conv2d-float32-2x8x8x3-3x3x4-s1-p0-unroll")
SEEDS = (0, 1, 2)


def selected_cases() -> list[Case]:
    from pytest_xtc.conformance import builtin_cases

    every = builtin_cases()
    by_id = {c.id: c for c in every}
    # the dimensions' cases first: a faulty variant stops at the first case rejecting it
    return [by_id[i] for i in (*DIMENSIONS, *MODEL)] + [
        c for c in every
        if c.dtype == "float32" and c.shape in SHAPES and c.schedule.name in SCHEDULES
    ] + [by_id[i] for i in (*TURNED, *COVERED, *HUGE)]


def settings(seed: int, perf: bool = False, repeat_check: bool = False) -> Settings:
    """What a certification runs with: the plugin's default timing (the timed calls are
    checked too) and the order check; ``perf``: performance recorded (a fault of the
    kernel times is rejected by its records marked invalid)."""
    from pytest_xtc.conformance import builtin_cases
    from pytest_xtc.core.execution import order
    from pytest_xtc.core.execution.perf import DEFAULT_TIMING

    return Settings(seed, timing=DEFAULT_TIMING, perf=perf, repeat_check=repeat_check,
                    order=order.pool(builtin_cases()), max_case_bytes=BUDGET)


@dataclass
class Tally:
    name: str
    cases: int = 0
    rejected: list[str] = field(default_factory=list)  # case ids, with the first cause
    causes: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _run(adapter: TargetAdapter, cases: Sequence[Case], seed: int, workdir: Path,
         first: bool = False, repeat_check: bool = False,
         progress: Progress | None = None) -> Tally:
    """Every case on ``adapter``; with ``first``, up to the first case it fails (enough to
    reject a faulty variant). A variant whose fault is its kernel times (``perf_fault``)
    runs with performance recorded, and fails a case whose record is invalid."""
    tally = Tally(adapter.name, 0)
    start = time.perf_counter()
    perf = bool(getattr(adapter, "perf_fault", False))
    for n, case in enumerate(cases):
        outcome = run_case(adapter, case, workdir / f"{adapter.name}-{seed}-{n}",
                           settings(seed, perf, repeat_check))
        tally.cases += 1
        if progress is not None and not first:
            progress.advance(note=f"host, seed {seed}")
        invalid = (outcome.perf or {}).get("invalid")
        if outcome.status is not Status.PASSED or invalid:
            tally.rejected.append(case.id)
            tally.causes.append(f"[{outcome.phase}] {outcome.message}" if not invalid
                                else f"[performance] record invalid: {invalid}")
            if first:
                break
    tally.seconds = time.perf_counter() - start
    return tally


def run(log: Callable[[str], None] = print) -> bool:
    """Run every fault and the real host; log what was caught. True when all went right."""
    cases = selected_cases()
    ok = True
    with tempfile.TemporaryDirectory(prefix="xtc-selftest-") as tmp:
        workdir = Path(tmp)
        log(f"selftest: {len(faults.FAULTS)} faulty host variants over {len(cases)} cases")
        # a variant counts as one case (most stop at their first): an estimate, on a TTY
        progress = Progress("selftest runs", len(faults.FAULTS) + len(SEEDS) * len(cases))
        rejected = 0
        for name in faults.FAULTS:
            tally = _run(faults.make(name), cases, SEEDS[0], workdir, first=True)
            progress.advance(note=name)
            caught = len(tally.rejected)
            rejected += bool(caught)
            verdict = (f"REJECTED at case {tally.cases} of {len(cases)}" if caught
                       else f"NOT REJECTED by any of {len(cases)} cases")
            log(f"  {name:<22} {verdict} ({tally.seconds:.1f} s)")
            for case_id, cause in list(zip(tally.rejected, tally.causes, strict=True))[:3]:
                log(f"      {case_id}: {cause.splitlines()[0][:150]}")
            ok &= bool(caught)
        log(f"faulty variants rejected: {rejected} of {len(faults.FAULTS)}")
        host = HostTarget(TargetSpec("host", "host"))
        for seed in SEEDS:
            tally = _run(host, cases, seed, workdir, progress=progress)
            passed = tally.cases - len(tally.rejected)
            log(f"host, seed {seed}: {passed} of {tally.cases} passed ({tally.seconds:.1f} s)")
            for case_id, cause in zip(tally.rejected, tally.causes, strict=True):
                log(f"      {case_id}: {cause.splitlines()[0][:300]}")
            ok &= not tally.rejected
        for name, variant in ACCEPTED.items():  # right variants, the repeat check on
            tally = _run(variant(TargetSpec(name, name)), cases, SEEDS[0], workdir,
                         repeat_check=True)
            passed = tally.cases - len(tally.rejected)
            log(f"{name} (right, --xtc-repeat-check): {passed} of {tally.cases} passed "
                f"({tally.seconds:.1f} s)")
            for case_id, cause in zip(tally.rejected, tally.causes, strict=True):
                log(f"      {case_id}: {cause.splitlines()[0][:300]}")
            ok &= not tally.rejected
        from pytest_xtc.selftest import fuzzing  # a fault only fuzzing finds

        ok &= fuzzing.run(workdir, log)
    log("selftest " + ("passed" if ok else "FAILED"))
    return ok
