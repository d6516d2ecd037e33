"""What a fresh child per case costs against one reused child, at the worker level: the
same catalog cases compiled by the real host adapter in an ``isolation.Worker``, one child
reused for all (the design before issue 34) or a child per case forked from the template
(``fresh``), alternating, side by side in one process. Wall time per call, and the CPU
time of the whole machine (``/proc/stat``: the template, its children and their compiler
processes; what ``-n`` as many as cores pays). docs/design-workers.md reads its figures.

Handlers: ``nothing`` (fork, sentinel, fingerprints, kill, reap), ``failing`` (a float64
conv2d whose compile fails in MLIR's parser: the shortest compile), ``matmul`` (a whole
compile: MLIR, then mlir-translate, opt, llc, cc).

    .venv/bin/python benchmarks/fresh_child.py [--rounds N] [--cases N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from machine_cpu import used  # benchmarks/, this script's folder

HANDLERS = {"nothing": "", "failing": "conv2d-float64-", "matmul": "matmul-float32-"}


def per_call(handler: Callable[[Any, Any], Any], requests: list[Any],
             fresh: bool) -> tuple[float, float]:
    """Wall and machine CPU seconds per call, after two calls that warm the worker."""
    from pytest_xtc.core.workers import containment, isolation

    worker = isolation.Worker(handler, fresh=fresh)
    for request in requests[:2]:
        worker.call(request, {"run": 300.0}, "run")
    start, cpu = time.perf_counter(), sum(used())
    for request in requests:
        worker.call(request, {"run": 300.0}, "run")
    wall, spent = time.perf_counter() - start, sum(used()) - cpu
    worker.stop()
    containment.reap_dying(block=True)
    return wall / len(requests), spent / len(requests)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", type=int, default=30)
    args = parser.parse_args()
    from pytest_xtc.conformance import builtin_cases
    from pytest_xtc.core.adapter import TargetSpec
    from pytest_xtc.targets.host import HostTarget

    adapter = HostTarget(TargetSpec("host", "host"))
    scratch = Path(tempfile.mkdtemp(prefix="xtc-fresh-child-"))
    adapter.prepare(scratch)

    def compile_one(case: Any, report: Any) -> str:
        report("run")
        if case is None:
            return "nothing"
        try:
            adapter.compile(case, Path(tempfile.mkdtemp(dir=scratch)))
        except Exception as exc:  # the failing handler's expected end
            return type(exc).__name__
        return "compiled"

    every = builtin_cases()
    for name, prefix in HANDLERS.items():
        requests: list[Any] = ([c for c in every if c.id.startswith(prefix)][: args.cases]
                               if prefix else [None] * args.cases)
        found: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
        for n in range(args.rounds):
            for fresh in ((False, True) if n % 2 == 0 else (True, False)):
                found[fresh].append(per_call(compile_one, requests, fresh))
        (reused_wall, reused_cpu), (fresh_wall, fresh_cpu) = (
            (statistics.median(w for w, _ in found[f]), statistics.median(c for _, c in found[f]))
            for f in (False, True))
        print(f"{name:8s} ({len(requests)} calls, {args.rounds} rounds): one child reused "
              f"{reused_wall * 1e3:6.1f} ms wall {reused_cpu * 1e3:6.1f} ms CPU; a child per "
              f"call {fresh_wall * 1e3:6.1f} ms wall {fresh_cpu * 1e3:6.1f} ms CPU: "
              f"{(fresh_wall - reused_wall) * 1e3:+.1f} ms wall, "
              f"{(fresh_cpu - reused_cpu) * 1e3:+.1f} ms CPU a call", flush=True)


if __name__ == "__main__":
    main()
