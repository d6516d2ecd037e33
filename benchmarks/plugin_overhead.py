"""Plugin overhead: the same host cases through the plugin and through plain XTC.

Each variant runs as a fresh process (interpreter start, XTC import, compile, run), the
variants alternating, several rounds; the ratio of the medians is the plugin's cost.
Goal: at most 1.10 for the same work (one compile and one run per case, checked). The
default run also records performance (5 timed repeats and numpy's time per case); its
ratio is printed too.

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
ONE = "matmul-float32-13x11x7-none]"
VARIANTS = {
    "plain XTC": PLAIN,
    "plugin, same work (--xtc-repeat=0)": [*PLUGIN, "--xtc-repeat=0"],
    "plugin, default (performance recorded)": PLUGIN,
    "plain XTC, first case alone": [*PLAIN, "--one"],
    "plugin, first case alone": [*PLUGIN[:-2], "-k", ONE, "--xtc-repeat=0"],
}


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
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for _ in range(rounds):
        for name, command in VARIANTS.items():
            times[name].append(timed(command, cwd))
    medians = {name: statistics.median(found) for name, found in times.items()}
    plain = medians["plain XTC"]
    print("28 matmul float32 cases (4 shapes x 7 schedules), compile + run, fresh process each")
    for name, found in times.items():
        each = ", ".join(f"{t:.2f}" for t in found)
        ratio = medians[name] / plain
        print(f"{name:<40}: median {medians[name]:.2f} s ({each}); ratio {ratio:.3f}")
    startup = medians["plugin, first case alone"] - medians["plain XTC, first case alone"]
    per_case = (
        medians["plugin, same work (--xtc-repeat=0)"] - medians["plugin, first case alone"]
    ) / (medians["plain XTC"] - medians["plain XTC, first case alone"])
    print(
        f"plugin start-up over plain: {startup:.2f} s; per case after the first: ratio "
        f"{per_case:.3f}"
    )
    print("goal: plugin, same work / plain XTC <= 1.10")


if __name__ == "__main__":
    main()
