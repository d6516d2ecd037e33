"""The fuzz mode's power (``--xtc-fuzz``): a faulty host variant the catalog cannot see,
found by fuzzing. Used by ``xtc-conformance selftest``.

The fault is an offload adapter's classic slip: it reads a conv2d's results back with its
own size arithmetic, written for odd windows (a half-width ``r // 2`` each side of a centre
tap, so ``(h - 2 * (r // 2) - 1) // stride + 1`` rows). Every window of the catalog has odd
sides (1, 3, 5, 7, 65537), where that is the true size: :func:`catalog_blind` checks it case
by case. The fuzz draw takes windows of side 2, where a stride that leaves no remainder
gets one row or column short, left unwritten.

(Its fault until 2026-11-29, the outputs left to XTC in production order, is now seen by
the generated catalog: 16 of its 916 graphs declare their outputs the other way round.)
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pytest_xtc.core.adapter import ONCE, Artifact, RunResult, TargetSpec, Timing
from pytest_xtc.core.cases import graphs, values
from pytest_xtc.core.cases.case import Case
from pytest_xtc.core.execution.runner import Settings, run_case
from pytest_xtc.core.outcome import Outcome, Status
from pytest_xtc.exploration import fuzz, shrink
from pytest_xtc.targets.host import HostTarget

FAULT = "conv-window-assumed-odd"

Region = tuple[int, ...]


def read_back(case: Case) -> list[Region]:
    """Per output of ``case``, the region the fault reads back: the whole output, except
    one of a conv2d's shape, cut to the rows and columns odd-window arithmetic gives."""
    known = graphs.operands(case.graph)
    believed = {}
    for node in graphs.nodes(case.graph):
        if node.op.name == "conv2d":
            b, h, w, _ = known[node.args[0]].shape
            r, s, _, f = known[node.args[1]].shape
            sh, sw = node.attrs["stride"]
            rows = max(0, (h - 2 * (r // 2) - 1) // sh + 1)
            cols = max(0, (w - 2 * (s // 2) - 1) // sw + 1)
            believed[known[node.uid].shape] = (b, rows, cols, f)
    return [believed.get(out.shape, out.shape) for out in graphs.outputs(case.graph)]


class ConvWindowAssumedOdd(HostTarget):
    """The host, its conv2d results read back by odd-window size arithmetic."""

    def compile(self, case: Case, workdir: Path) -> Artifact:
        artifact = super().compile(case, workdir)
        artifact.handle = (artifact.handle, read_back(case))
        return artifact

    def run(self, artifact: Artifact, inputs: Sequence[np.ndarray],
            outputs: Sequence[np.ndarray], timing: Timing = ONCE) -> RunResult:
        module, regions = artifact.handle
        device = [np.empty_like(o) for o in outputs]
        result = super().run(Artifact(artifact.directory, module), inputs, device, timing)
        for out, computed, region in zip(outputs, device, regions, strict=True):
            values.fill_unwritten(out)
            kept = tuple(slice(0, n) for n in region)
            out[kept] = computed[kept]
        return result


@contextlib.contextmanager
def outputs_left_to_xtc() -> Iterator[None]:
    """XTC's graph builder told nothing about the outputs (its ``set_outputs`` ignored)."""
    from xtc.graphs.xtc.builder import graph_builder

    saved = graph_builder.set_outputs
    graph_builder.set_outputs = lambda self, *outs: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        graph_builder.set_outputs = saved  # type: ignore[method-assign]


class OutputsInProductionOrder(HostTarget):
    """The earlier fault (the suite's own host until 2026-11-29): the kernels' outputs
    inferred by XTC, the results no node reads in production order, instead of declared.
    The generated catalog sees it; ``--xtc-fuzz`` tests and ``test_xtc_env`` still use it."""

    def compile(self, case: Case, workdir: Path) -> Artifact:
        with outputs_left_to_xtc():
            return super().compile(case, workdir)


def catalog_blind(cases: Sequence[Case]) -> list[str]:
    """The cases whose results the fault reads back short (none: the catalog cannot
    reject it)."""
    return [case.id for case in cases
            if read_back(case) != [o.shape for o in graphs.outputs(case.graph)]]


@dataclass
class Found:
    drawn: int  # fuzz cases run before the fault failed one (that one included)
    case: str  # "" where none of them failed it
    cause: str
    host_passed: bool
    seconds: float
    drawn_case: Case | None = None
    outcome: Outcome | None = None


def find(seed: int, count: int, workdir: Path,
         drawer: Callable[[int, int], Case] = fuzz.draw) -> Found:
    """Fuzz cases of ``seed`` on the fault, up to the first it fails that the real host
    passes (a case XTC itself fails, such as a float64 relu, decides nothing)."""
    fault = ConvWindowAssumedOdd(TargetSpec(FAULT, "host"))
    host = HostTarget(TargetSpec("host", "host"))
    start = time.perf_counter()
    for index in range(count):
        case = drawer(seed, index)
        settings = Settings(0, perf=False)
        bad = run_case(fault, case, workdir / f"fault-{index}", settings)
        if bad.status is Status.PASSED:
            continue
        good = run_case(host, case, workdir / f"host-{index}", settings)
        if good.status is Status.PASSED:
            return Found(index + 1, case.id, bad.message, True,
                         time.perf_counter() - start, case, bad)
    return Found(count, "", "", False, time.perf_counter() - start)


def shrunk(found: Found, workdir: Path, attempts: int = 40) -> shrink.Result:
    """The fuzz failure ``found`` shrunk to a case file, as ``--xtc-fuzz`` does."""
    assert found.drawn_case is not None and found.outcome is not None
    fault = ConvWindowAssumedOdd(TargetSpec(FAULT, "host"))
    return shrink.shrink(fault, found.drawn_case, found.outcome, workdir / "shrunk",
                         Settings(0, perf=False), shrink.Budget(attempts, 120.0))


def run(workdir: Path, log: Callable[[str], None] = print, seed: int = 0,
        count: int = 40) -> bool:
    """The catalog blind to the fault, fuzzing finding it: True when both hold."""
    from pytest_xtc.conformance import builtin_cases

    every = builtin_cases()
    start = time.perf_counter()
    seen = catalog_blind(every)
    log(f"  {FAULT}: the catalog's {len(every)} graphs are read back whole "
        f"by the fault in {len(every) - len(seen)} ({time.perf_counter() - start:.1f} s)")
    found = find(seed, count, workdir)
    if found.case:
        log(f"  {FAULT}: fuzzing (seed {seed}) REJECTED it at case {found.drawn} "
            f"({found.seconds:.1f} s): {found.case}: {found.cause.splitlines()[0][:150]}")
        log(f"  {FAULT}: {shrunk(found, workdir).describe().splitlines()[0]}")
    else:
        log(f"  {FAULT}: NOT REJECTED by {count} fuzz cases (seed {seed})")
    return not seen and bool(found.case)
