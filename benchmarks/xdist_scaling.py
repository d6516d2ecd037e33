"""pytest-xdist's scaling on the host suite: the whole built-in catalog on host, serial and
with ``-n 2`` (``--xtc-repeat=0``: the verdicts, not the timing loops), the two modes
alternating, side by side in one run. Goal (issue 24): ``-n 2`` at most 0.55 of serial.

    .venv/bin/python benchmarks/xdist_scaling.py [--rounds N] [--workers W]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def timed(workers: int, cwd: str) -> tuple[float, str]:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               "--xtc-target=host", "--xtc-repeat=0"]
    if workers > 1:
        command += ["-n", str(workers)]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    last = (done.stdout.strip().splitlines() or [done.stderr[-300:]])[-1]
    if done.returncode not in (0, 1):
        sys.exit(f"{' '.join(command)} failed: {last}")
    return elapsed, last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    cwd = tempfile.mkdtemp()  # an empty directory: only the suite is collected
    times: dict[int, list[float]] = {1: [], args.workers: []}
    for _ in range(args.rounds):
        for workers in times:
            elapsed, said = timed(workers, cwd)
            times[workers].append(elapsed)
            print(f"workers {workers}: {elapsed:7.1f} s  ({said})", flush=True)
    serial, parallel = (statistics.median(times[w]) for w in times)
    print(f"cores: {os.cpu_count()}; medians of {args.rounds} round(s): serial {serial:.1f} s, "
          f"-n {args.workers} {parallel:.1f} s; ratio {parallel / serial:.2f} (goal <= 0.55)")


if __name__ == "__main__":
    main()
