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
    "matmul-float32-64x17x13-tile", "matmul-float32-31x37x13-vectorize",
    "conv2d-float32-2x10x11x16-1x1x8-s2-p0-tile", "conv2d-float32-1x13x8x3-3x3x5-s2-p1-none",
    "matmul-float64-16x37x8-tile", "matmul-float64-2x17x13-none",
    "pad-float64-5x7-pad0:1-2_1:0-3-none",
)
SEEDS = (0, 1, 2)


def selected_cases() -> list[Case]:
    from pytest_xtc.conformance import builtin_cases

    every = builtin_cases()
    by_id = {c.id: c for c in every}
    return [
        c for c in every
        if c.dtype == "float32" and c.shape in SHAPES and c.schedule.name in SCHEDULES
    ] + [by_id[i] for i in COVERED]


def settings(seed: int) -> Settings:
    """What a certification runs with: the plugin's default timing (the timed calls are
    checked too) and the order check."""
    from pytest_xtc.conformance import builtin_cases
    from pytest_xtc.core.execution import order
    from pytest_xtc.core.execution.perf import DEFAULT_TIMING

    return Settings(seed, timing=DEFAULT_TIMING, perf=False, order=order.pool(builtin_cases()))


@dataclass
class Tally:
    name: str
    cases: int = 0
    rejected: list[str] = field(default_factory=list)  # case ids, with the first cause
    causes: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _run(adapter: TargetAdapter, cases: Sequence[Case], seed: int, workdir: Path,
         first: bool = False, progress: Progress | None = None) -> Tally:
    """Every case on ``adapter``; with ``first``, up to the first case it fails (enough to
    reject a faulty variant)."""
    tally = Tally(adapter.name, 0)
    start = time.perf_counter()
    for n, case in enumerate(cases):
        outcome = run_case(adapter, case, workdir / f"{adapter.name}-{seed}-{n}", settings(seed))
        tally.cases += 1
        if progress is not None and not first:
            progress.advance(note=f"host, seed {seed}")
        if outcome.status is not Status.PASSED:
            tally.rejected.append(case.id)
            tally.causes.append(f"[{outcome.phase}] {outcome.message}")
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
    log("selftest " + ("passed" if ok else "FAILED"))
    return ok
