"""Real-model layers at real size (examples/model-cases/large) on host, with the default
isolation and with --xtc-no-isolation, side by side in one run: per-layer seconds, ratio.

    python benchmarks/model_cases.py [-k EXPR]     # e.g. -k "gpt2 or mobilenet"
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

LARGE = Path(__file__).parent.parent / "examples" / "model-cases" / "large"


def timed(case_file: Path, *extra: str) -> tuple[float, str]:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
               "--xtc-target=host", f"--xtc-cases={case_file}", "--xtc-only-cases",
               "--xtc-repeat=0", "--rootdir", str(case_file.parent), *extra]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=case_file.parent)
    last = (done.stdout.strip().splitlines() or ["?"])[-1]
    return time.perf_counter() - start, last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-k", default="", help="only the files whose name contains this")
    args = parser.parse_args()
    print(f"{'layer':32} {'isolated s':>11} {'in-process s':>13} {'ratio':>6}  outcome")
    for path in sorted(LARGE.glob("*.yaml")):
        if args.k and args.k not in path.stem:
            continue
        isolated, said = timed(path)
        plain, said_plain = timed(path, "--xtc-no-isolation")
        print(f"{path.stem:32} {isolated:11.2f} {plain:13.2f} {isolated / plain:6.2f}  "
              f"{said} | {said_plain}")


if __name__ == "__main__":
    main()
