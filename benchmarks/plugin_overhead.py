"""Plugin overhead: the same host cases through the plugin and through plain XTC.

Both run as fresh processes (interpreter start, XTC import, compile, run), alternating,
several rounds; the ratio of the medians is the plugin's cost. Goal: at most 1.10.

    .venv/bin/python benchmarks/plugin_overhead.py [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHAPES = ("13x11x7", "31x37x29", "33x65x17", "64x64x64")
SELECT = " or ".join(f"matmul-float32-{shape}-" for shape in SHAPES)
PLUGIN = [
    sys.executable,
    "-m",
    "pytest",
    "-q",
    "-p",
    "no:cacheprovider",
    "--xtc-target=host",
    "-k",
    f"({SELECT}) and not exact",
]
PLAIN = [sys.executable, str(HERE / "plain_xtc.py")]


def timed(command: list[str], cwd: str) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    cwd = tempfile.mkdtemp()  # an empty directory: the plugin collects only the suite
    plugin, plain = [], []
    for _ in range(rounds):
        plain.append(timed(PLAIN, cwd))
        plugin.append(timed(PLUGIN, cwd))
    p, q = statistics.median(plugin), statistics.median(plain)
    print("28 matmul float32 cases (4 shapes x 7 schedules), compile + run, fresh process each")
    for label, times, median in (("plain XTC", plain, q), ("plugin", plugin, p)):
        each = ", ".join(f"{t:.2f}" for t in times)
        print(f"{label:<10}: median {median:.2f} s over {rounds} rounds ({each})")
    print(f"ratio plugin/plain: {p / q:.3f} (goal <= 1.10)")


if __name__ == "__main__":
    main()
