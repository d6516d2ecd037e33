"""Exploration throughput: the plugin against a plain loop over the same strategy samples.

    python benchmarks/explore.py [--n N] [--rounds R] [--workers W]

A: ``pytest --xtc-target=host --xtc-explore=N -k <the explored float32 matmuls of SHAPES>``
(no performance records: ``--xtc-repeat=0``), serial; B: the plain loop in XTC over the
same samples (graph, ``Strategies.create``, ``sample(N, seed)``, ``generate``, compile,
then the suite's kernel calls, each compared with numpy: ``plain_xtc.checked_calls``,
two on fresh inputs and one more on the first, as the plugin makes), in a fresh
process; C: A with ``-n W``. Runs alternate A, B, C for R rounds; medians of wall time.
Prints A/B (goal <= 1.10), C/A (goal <= 0.6) and schedules checked per second, as
ratios of the medians and round by round (the median of the rounds' ratios, each from
runs made back to back, is the figure a drifting machine moves least). The plan
cache is warmed first (one untimed run): the draw of every catalog case's samples is
shared by the runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

SHAPES = [(13, 11, 7), (31, 37, 29), (33, 65, 17), (64, 64, 64)]


def plain(n: int, seed: int = 0) -> int:
    """The loop a user would write with XTC alone; returns the schedules checked."""
    from plain_xtc import checked_calls  # this folder: the suite's calls, as plain XTC

    from pytest_xtc.core.xtc.xtc_env import bootstrap
    from pytest_xtc.exploration.explore import PRT_SCHEME, strategy_seed

    bootstrap()
    import xtc.graphs.xtc.op as O
    from xtc.backends.mlir import Backend
    from xtc.search.strategies import Strategies

    workdir = tempfile.mkdtemp()
    checked = wrong = 0
    for i, j, k in SHAPES:
        key = f"matmul-float32-{i}x{j}x{k}-none"
        a, b = O.tensor((i, k), "float32", name="A"), O.tensor((k, j), "float32", name="B")
        with O.graph(name="matmul") as gb:
            O.matmul(a, b, name="C")
        graph = gb.graph
        for name in Strategies.names():
            try:
                extra = {"scheme": PRT_SCHEME} if name == "prt" else {}
                strategy = Strategies.create(name, graph, **extra)
                samples = list(strategy.sample(n, strategy_seed(seed, key, name)))
            except AssertionError:
                continue
            for sample in samples:
                backend = Backend(graph)
                scheduler = backend.get_scheduler()
                strategy.generate(scheduler, sample)
                compiler = backend.get_compiler(
                    shared_lib=True, dump_file=f"{workdir}/k{checked}"
                )
                module = compiler.compile(scheduler.schedule())
                wrong += bool(checked_calls(module, (i, j, k), checked))
                checked += 1
    print(f"plain: {checked} checked, {wrong} wrong")
    return checked


def _selection() -> str:
    shapes = " or ".join(f"matmul-float32-{i}x{j}x{k}-explore" for i, j, k in SHAPES)
    return f"explore and ({shapes})"


def _pytest(n: int, workers: int) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", "--xtc-target=host", f"--xtc-explore={n}",
           "--xtc-repeat=0", "-p", "no:cacheprovider", "-q", "-k", _selection()]
    return cmd + (["-n", str(workers)] if workers > 1 else [])


def _timed(cmd: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False,
                          cwd=tempfile.mkdtemp(), env=os.environ)
    elapsed = time.perf_counter() - start
    tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-300:]
    return elapsed, tail


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--plain", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plain:
        plain(args.n)
        return 0
    runs = {
        "A pytest": _pytest(args.n, 1),
        "B plain": [sys.executable, os.path.abspath(__file__), "--plain", f"--n={args.n}"],
        f"C pytest -n {args.workers}": _pytest(args.n, args.workers),
    }
    print("warm-up:", _timed(runs["A pytest"])[1])
    times: dict[str, list[float]] = {name: [] for name in runs}
    tails: dict[str, str] = {}
    for round_ in range(args.rounds):
        for name, cmd in runs.items():
            elapsed, tail = _timed(cmd)
            times[name].append(elapsed)
            tails[name] = tail
            print(f"round {round_ + 1} {name}: {elapsed:.1f} s  ({tail})", flush=True)
    median = {name: statistics.median(t) for name, t in times.items()}
    a, b, c = (median[name] for name in runs)
    collected = _timed([*runs["A pytest"][:-2], "--collect-only", "-k", _selection()])[1]
    count_a = int(collected.split("/")[0]) if collected.split("/")[0].isdigit() else 0
    count_b = int(tails["B plain"].split()[1]) if tails.get("B plain") else 0
    shapes = ", ".join("x".join(map(str, s)) for s in SHAPES)
    print(f"\nschedules: pytest {count_a}, plain {count_b} (matmul float32 {shapes}, "
          f"N={args.n}, XTC strategies that apply)")
    print(f"A pytest serial      {a:7.1f} s  {count_a / a:5.2f} schedules/s")
    print(f"B plain XTC loop     {b:7.1f} s  {count_b / b:5.2f} schedules/s")
    print(f"C pytest -n {args.workers}       {c:7.1f} s  {count_a / c:5.2f} schedules/s")
    print(f"A/B = {a / b:.2f} (goal <= 1.10)   C/A = {c / a:.2f} (goal <= 0.6)   "
          "(ratios of the medians)")
    names = list(runs)
    for label, (top, bottom) in {"A/B": names[:2], "C/A": (names[2], names[0])}.items():
        ratios = [x / y for x, y in zip(times[top], times[bottom], strict=True)]
        print(f"{label} round by round: {', '.join(f'{r:.2f}' for r in ratios)}, "
              f"median {statistics.median(ratios):.2f} (each round's runs back to back: a "
              "drift of the machine's speed cancels)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
