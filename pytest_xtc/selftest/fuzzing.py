"""The fuzz mode's power (``--xtc-fuzz``): a faulty host variant the catalog cannot see,
found by fuzzing. Used by ``xtc-conformance selftest``.

The fault is the one this suite's own host adapter had until 2026-11-29: the graph's
outputs are left to XTC, which takes the results no node reads, in production order. Every
catalog graph has one output, the last node, so the fault compiles each of them to the
very function the host compiles (:func:`catalog_blind` checks it graph by graph, in XTC);
a fuzz case with two outputs declared the other way round, or an output that also feeds
a node, gets its results in the wrong buffers or none.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_xtc.core.adapter import Artifact, TargetSpec
from pytest_xtc.core.cases.case import Case
from pytest_xtc.core.execution.runner import Settings, run_case
from pytest_xtc.core.outcome import Outcome, Status
from pytest_xtc.exploration import fuzz, shrink
from pytest_xtc.targets.host import HostTarget

FAULT = "outputs-in-production-order"


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
    """The host, its kernels' outputs inferred by XTC instead of declared."""

    def compile(self, case: Case, workdir: Path) -> Artifact:
        with outputs_left_to_xtc():
            return super().compile(case, workdir)


def catalog_blind(cases: Sequence[Case]) -> list[str]:
    """The cases whose XTC graph gets other outputs with the fault (none: the catalog
    cannot reject it)."""
    from pytest_xtc.core.xtc import xtc_env

    differ = []
    for case in cases:
        declared = [n.name for n in xtc_env.build_graph(case).outputs_nodes]
        with outputs_left_to_xtc():
            inferred = [n.name for n in xtc_env.build_graph(case).outputs_nodes]
        if declared != inferred:
            differ.append(case.id)
    return differ


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
    fault = OutputsInProductionOrder(TargetSpec(FAULT, "host"))
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
    fault = OutputsInProductionOrder(TargetSpec(FAULT, "host"))
    return shrink.shrink(fault, found.drawn_case, found.outcome, workdir / "shrunk",
                         Settings(0, perf=False), shrink.Budget(attempts, 120.0))


def run(workdir: Path, log: Callable[[str], None] = print, seed: int = 0,
        count: int = 40) -> bool:
    """The catalog blind to the fault, fuzzing finding it: True when both hold."""
    from pytest_xtc.conformance import builtin_cases

    every = builtin_cases()
    start = time.perf_counter()
    seen = catalog_blind(every)
    log(f"  {FAULT}: the catalog's {len(every)} graphs compile to the host's own "
        f"functions in {len(every) - len(seen)} ({time.perf_counter() - start:.1f} s)")
    found = find(seed, count, workdir)
    if found.case:
        log(f"  {FAULT}: fuzzing (seed {seed}) REJECTED it at case {found.drawn} "
            f"({found.seconds:.1f} s): {found.case}: {found.cause.splitlines()[0][:150]}")
        log(f"  {FAULT}: {shrunk(found, workdir).describe().splitlines()[0]}")
    else:
        log(f"  {FAULT}: NOT REJECTED by {count} fuzz cases (seed {seed})")
    return not seen and bool(found.case)
