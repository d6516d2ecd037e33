"""The embedded road's cost and agreement: the catalog on ``aarch64-qemu`` (XTC's AArch64
code on an emulated cortex-a57) against ``host``, the same cases, one session after the
other in one run.

Run: ``python benchmarks/embedded_cost.py [-k EXPR] [-n WORKERS]`` (default: the whole
catalog, ``-n 2``), from anywhere: the sessions run in a scratch folder outside the
checkout, each leaving a report bundle. The cases are split in two halves
(``--xtc-shard``), run host, aarch64, aarch64, host (half 1, 1, 2, 2): each half's pair
runs back to back, and a load that rises or falls over the run weighs on both targets
alike. Prints each target's seconds and
``aarch64-qemu / host: R`` (the goal: R <= 2), then ``same status as host: X of Y`` (Y the
cases of the host session, X those with the same status on aarch64-qemu), and every case
that differs with the aarch64 verdict's reason (an expected failure's evidence, an
unsupported primitive's reason).

``--compare HOST_BUNDLE AARCH64_BUNDLE`` compares two bundles already made, runs nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def session(cwd: Path, target: str, bundle: Path, args: argparse.Namespace,
            shard: str) -> float:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
               f"--xtc-target={target}", f"--xtc-report={bundle}", "-n", args.n,
               f"--xtc-shard={shard}"]
    if args.k:
        command += ["-k", args.k]
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def statuses(*bundles: Path) -> dict[str, tuple[str, str]]:
    """Each case of the bundles: (status, message)."""
    found = {}
    for bundle in bundles:
        for line in (bundle / "results.jsonl").read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                found[row["case"]] = (row["status"], row.get("message") or "")
    return found


def compare(host: list[Path], aarch: list[Path]) -> int:
    """Print ``same status as host: X of Y`` and each difference; 0 when X == Y."""
    ours, theirs = statuses(*host), statuses(*aarch)
    same = [c for c in ours if theirs.get(c, ("missing", ""))[0] == ours[c][0]]
    print(f"same status as host: {len(same)} of {len(ours)}")
    for case in sorted(set(ours) - set(same)):
        status, message = theirs.get(case, ("missing", "not run on aarch64-qemu"))
        print(f"  {case}: host {ours[case][0]}, aarch64-qemu {status}: {message[:300]}")
    return 0 if len(same) == len(ours) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="a pytest -k expression (default: all)")
    parser.add_argument("-n", default="2", help="pytest-xdist workers for each session")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("HOST", "AARCH64"),
                        help="compare two report bundles, run nothing")
    args = parser.parse_args()
    if args.compare:
        return compare([args.compare[0]], [args.compare[1]])
    with tempfile.TemporaryDirectory(prefix="embedded-cost-") as scratch:
        root = Path(scratch)
        loads = [os.getloadavg()[0]]
        seconds = {"host": 0.0, "aarch64-qemu": 0.0}
        for half, order in (("1/2", ("host", "aarch64-qemu")), ("2/2", ("aarch64-qemu", "host"))):
            for target in order:
                bundle = root / f"{target}-{half[0]}"
                seconds[target] += session(root, target, bundle, args, half)
                loads.append(os.getloadavg()[0])
        host_s, aarch_s = seconds["host"], seconds["aarch64-qemu"]
        print(f"selection: {args.k or 'the whole catalog'}, -n {args.n}, load average "
              f"{min(loads):.1f} to {max(loads):.1f}")
        print(f"host: {host_s:.1f} s; aarch64-qemu: {aarch_s:.1f} s")
        print(f"aarch64-qemu / host: {aarch_s / host_s:.2f}")
        return compare([root / "host-1", root / "host-2"],
                       [root / "aarch64-qemu-1", root / "aarch64-qemu-2"])


if __name__ == "__main__":
    sys.exit(main())
