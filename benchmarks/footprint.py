"""Footprint: what pytest-xtc costs a pytest session that does not use XTC.

A project of two trivial tests; ``python -m pytest --co -q`` run there, as fresh
processes, alternately with the plugin (installed, autoloaded) and with ``-p no:xtc``,
many rounds; the median difference and the ratio of the medians are printed.
Goal: at most 20 ms. pytest-benchmark, when installed, is switched off in both
(``-p no:benchmark``): it is no part of pytest-xtc's cost.

    .venv/bin/python benchmarks/footprint.py [--rounds N] [--importtime]

``--importtime`` prints instead the modules the plugin's session imports that the other
does not, with their cumulative import time (``python -X importtime``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASE = [sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider",
        "-p", "no:benchmark"]
VARIANTS = {"with pytest-xtc": BASE, "-p no:xtc": [*BASE, "-p", "no:xtc"]}
TESTS = "def test_a():\n    pass\n\n\ndef test_b():\n    pass\n"


def project(root: Path) -> Path:
    (root / "test_two.py").write_text(TESTS)
    return root


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("PYTEST_", "XTC_"))}


def once(argv: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env(), check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def importtime(cwd: Path) -> None:
    def modules(argv: list[str]) -> dict[str, int]:
        done = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], cwd=cwd, env=env(),
                              capture_output=True, text=True, check=True)
        found = {}
        for line in done.stderr.splitlines():
            if line.startswith("import time:") and "|" in line:
                _, cumulative, name = line.split("|")
                if cumulative.strip().isdigit():
                    found[name.strip()] = int(cumulative)
        return found

    mine, other = modules(VARIANTS["with pytest-xtc"]), modules(VARIANTS["-p no:xtc"])
    extra = sorted(((us, n) for n, us in mine.items() if n not in other), reverse=True)
    for us, name in extra[:30]:
        print(f"{us / 1e3:8.2f} ms  {name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--importtime", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="xtc-footprint-") as tmp:
        cwd = project(Path(tmp))
        if args.importtime:
            importtime(cwd)
            return 0
        for argv in VARIANTS.values():  # warm the file cache
            once(argv, cwd)
        times: dict[str, list[float]] = {name: [] for name in VARIANTS}
        for _ in range(args.rounds):
            for name, argv in VARIANTS.items():
                times[name].append(once(argv, cwd))
        created = sorted(p.name for p in cwd.iterdir() if p.name != "test_two.py"
                         and p.name != "__pycache__")
    medians = {name: statistics.median(t) for name, t in times.items()}
    print(f"pytest --co -q on a 2-test project, {args.rounds} alternating rounds")
    for name, median in medians.items():
        print(f"{name:16}: median {median * 1e3:.1f} ms (min {min(times[name]) * 1e3:.1f})")
    mine, other = medians["with pytest-xtc"], medians["-p no:xtc"]
    print(f"median difference: {(mine - other) * 1e3:.1f} ms; ratio {mine / other:.3f}")
    print(f"files left in the project: {', '.join(created) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
