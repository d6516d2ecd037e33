"""The selftest's faulty host variants with the kernel cache on (issue 56): each variant as
``xtc-conformance selftest`` runs it (its cases up to the first it fails, the order check
on), twice: cold (an empty kernel cache, which its compiles fill) and warm (its kernels
taken from the cache). Every variant must be rejected both times; prints how many were,
and how many kernels the warm pass took from the cache.

    .venv/bin/python benchmarks/selftest_kernel_cache.py [--only NAME[,NAME...]]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from pytest_xtc.core.adapters import kernel_cache
from pytest_xtc.core.execution import runner
from pytest_xtc.selftest import faults, proof


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="variant names, comma-separated")
    args = parser.parse_args()
    names = [n for n in faults.FAULTS if not args.only or n in args.only.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="xtc-selftest-kernels-"))
    store = kernel_cache.opened("on", folder=tmp / "kernels")
    if store is None:
        sys.exit("no kernel cache here (PYTEST_XTC_CACHE=off, or no sealing key)")
    plain = proof.settings
    proof.settings = lambda *a, **k: replace(plain(*a, **k), kernels=store)  # type: ignore[assignment]
    hits = [0]
    real_run = runner.run_case

    def counted(*a, **k):  # type: ignore[no-untyped-def]
        outcome = real_run(*a, **k)
        hits[0] += bool(outcome.kernel_cached)
        return outcome

    proof.run_case = counted  # type: ignore[attr-defined]
    cases = proof.selected_cases()
    missed: dict[str, list[str]] = {"cold": [], "warm": []}
    for rerun in ("cold", "warm"):
        hits[0], start = 0, time.perf_counter()
        for name in names:
            tally = proof._run(faults.make(name), cases, proof.SEEDS[0], tmp / rerun, first=True)
            if not tally.rejected:
                missed[rerun].append(name)
            said = f"rejected at case {tally.cases}" if tally.rejected else "NOT REJECTED"
            print(f"{rerun} {name:<28} {said} ({tally.seconds:.1f} s)", flush=True)
        print(f"{rerun}: {len(names) - len(missed[rerun])} of {len(names)} faulty variants "
              f"rejected; kernels from the cache {hits[0]}; {time.perf_counter() - start:.0f} s; "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
    print("not rejected:", missed)


if __name__ == "__main__":
    main()
