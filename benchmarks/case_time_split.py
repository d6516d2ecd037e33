"""Where a case's time goes (issue 56): host catalog cases through the runner (each in a
worker forked for it, as pytest runs them), each case's time split into compile, worker
(its start, the operands' way there and back, the reply: the executor's time less the
compile and the kernel calls), run (its kernel calls: two on fresh inputs, the timed one),
reference (numpy's, computed in this process while the worker works: it overlaps the
worker's time) and checks (the per-case checks of every call's results), before (every
case compiled: the kernel cache off) and after (its kernel taken from a warm cache),
alternating, several rounds; means in milliseconds per case.

    .venv/bin/python benchmarks/case_time_split.py [--every 10] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_xtc.conformance import builtin_cases
from pytest_xtc.core.adapter import TargetSpec
from pytest_xtc.core.adapters import kernel_cache
from pytest_xtc.core.execution import work
from pytest_xtc.core.execution.executors import forked
from pytest_xtc.core.execution.runner import Settings, run_case
from pytest_xtc.core.judging import checks
from pytest_xtc.targets.host import HostTarget

PARTS = ("compile", "worker", "run", "reference", "checks")
spent: dict[str, float] = dict.fromkeys(PARTS, 0.0)


def timed(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            spent[name] += time.perf_counter() - start

    return wrapper


def instrument() -> None:
    """Timers around the parts; the kernel calls' time comes back in ``Work.run_s``."""
    calls = work._call_all

    def all_calls(call: Any, request: Any, done: Any) -> Any:
        start = time.perf_counter()
        times = calls(call, request, done)
        done.run_s = time.perf_counter() - start  # every call, not the first alone
        return times

    work._call_all = all_calls  # forked workers inherit it
    run = forked.ForkedExecutor.run

    def executor_run(self: Any, request: Any, limits: Any, meanwhile: Any = None) -> Any:
        start = time.perf_counter()
        done = run(self, request, limits, meanwhile)
        wall = time.perf_counter() - start
        spent["compile"] += done.compile_s
        spent["run"] += done.run_s
        spent["worker"] += max(0.0, wall - done.compile_s - done.run_s)
        return done

    forked.ForkedExecutor.run = executor_run  # type: ignore[method-assign]
    checks.references = timed("reference", checks.references)
    checks.judge = timed("checks", checks.judge)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=int, default=10, help="every N-th catalog case")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    cases = [c for c in builtin_cases() if c.placement is None][:: args.every]
    tmp = Path(tempfile.mkdtemp(prefix="xtc-time-split-"))
    store = kernel_cache.opened("on", folder=tmp / "kernels")
    instrument()
    adapter = HostTarget(TargetSpec("host", "host"))
    base = Settings(0)  # performance recorded, as by default
    for n, case in enumerate(cases):  # the warm cache (and warm imports), untimed
        run_case(adapter, case, tmp / "fill" / str(n), replace(base, kernels=store))
    found: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    order = ["before", "after"]
    for r in range(args.rounds):
        for kind in order:
            settings = replace(base, kernels=store if kind == "after" else None)
            for part in PARTS:
                spent[part] = 0.0
            start, kept = time.perf_counter(), 0
            for n, case in enumerate(cases):
                outcome = run_case(adapter, case, tmp / f"{kind}-{r}" / str(n), settings)
                kept += bool(outcome.kernel_cached)
            total = time.perf_counter() - start
            found[kind].append({**spent, "total": total, "kept": kept})
        order.reverse()
    print(f"{len(cases)} host cases (every {args.every}th of the catalog), {args.rounds} rounds, "
          f"load {os.getloadavg()[0]:.1f}; ms per case (means; reference overlaps worker)")
    print(f"{'':<8}" + "".join(f"{p:>11}" for p in (*PARTS, "total")) + "  kernels kept")
    for kind, rounds in found.items():
        means = {p: statistics.median(r[p] for r in rounds) * 1000 / len(cases)
                 for p in (*PARTS, "total")}
        print(f"{kind:<8}" + "".join(f"{means[p]:>11.1f}" for p in (*PARTS, "total"))
              + f"  {rounds[-1]['kept']:.0f} of {len(cases)}")


if __name__ == "__main__":
    main()
