"""The catalog's cost: the host conformance suite with ``-n 2`` on an old catalog (a git
ref, its own code: a temporary worktree) and on this tree's, alternating order each round,
side by side in one run, then a table of both (median, cases, verdicts, time a case).
Goal (issues 33, 52): the new catalog at most 1.25 times the old.
A third variant, "old catalog, this code" (the old ref's ``pytest_xtc/conformance``, its
catalog and the code expanding it, in a copy of this tree), separates the catalog's own
growth (new / it) from the code's (it / old: the pristine worker per case of issue 34
among it). Each run has an empty kernel cache of its own: every case compiles.

``--shard I/N`` runs one shard of each suite (``--xtc-shard``, the same hash of the case
ids): a sample, for a machine that cannot spare the whole suite twice per round.

    .venv/bin/python benchmarks/catalog_cost.py [--old main] [--rounds N] [--shard 1/4]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine_cpu import used  # benchmarks/, this script's folder

ROOT = Path(__file__).resolve().parents[1]
GOAL = 1.25


def timed(tree: Path, workers: int, shard: str | None) -> tuple[float, str]:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               "--xtc-target=host", "--xtc-repeat=0", "-n", str(workers),
               str(tree / "pytest_xtc" / "conformance")]
    if shard:
        command.append(f"--xtc-shard={shard}")
    # that tree's code, not the installed one; an empty kernel cache (issue 56) of its own:
    # every run compiles every case, as the old code did
    kept = tempfile.mkdtemp(prefix="xtc-catalog-cost-kernels-")
    env = {**os.environ, "PYTHONPATH": str(tree), "XTC_KERNEL_CACHE": kept}
    start, before = time.perf_counter(), used()
    done = subprocess.run(command, cwd=tree, capture_output=True, text=True, env=env)
    shutil.rmtree(kept, ignore_errors=True)
    elapsed = time.perf_counter() - start
    spent = [after - then for after, then in zip(used(), before, strict=True)]
    last = (done.stdout.strip().splitlines() or [done.stderr[-300:]])[-1]
    last += f"; machine CPU {spent[0]:.1f} s user, {spent[1]:.1f} s system"
    if done.returncode not in (0, 1) or not re.search(r"\d+ (passed|failed)", last):
        sys.exit(f"{' '.join(command)} failed ({done.returncode}): {last}")
    return elapsed, last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", default="main", help="git ref of the old catalog and code")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--shard", default=None, help="I/N: one shard of each suite")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="xtc-catalog-cost-") as tmp:
        old = Path(tmp) / "old"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old),
                        args.old], check=True, capture_output=True)
        try:
            trees = {"old": old, "new": ROOT, MIXED: _with_catalog(ROOT, old, Path(tmp))}
            for tree in trees.values():  # each tree's bytecode, as an installed package has
                _compiled(tree)
            times: dict[str, list[float]] = {name: [] for name in trees}
            said: dict[str, str] = {}
            for n in range(args.rounds):
                order = list(trees) if n % 2 == 0 else list(reversed(trees))
                for name in order:
                    elapsed, said[name] = timed(trees[name], args.workers, args.shard)
                    times[name].append(elapsed)
                    print(f"round {n + 1} {name}: {elapsed:7.1f} s  ({said[name]})", flush=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)],
                           capture_output=True)
    before, after, mixed = (statistics.median(times[k]) for k in ("old", "new", MIXED))
    sample = f", shard {args.shard}" if args.shard else ""
    print(f"medians of {args.rounds} round(s), -n {args.workers}{sample}: old {before:.1f} s, "
          f"new {after:.1f} s; ratio {after / before:.3f} (goal <= {GOAL})")
    print(f"the catalog alone (this code, the old catalog {mixed:.1f} s): ratio "
          f"{after / mixed:.2f}; the code alone (the old catalog, this code / old): "
          f"{mixed / before:.2f}")
    side_by_side(times, said)


def side_by_side(times: dict[str, list[float]], said: dict[str, str]) -> None:
    """Old and new, one row each: the median, the cases and their verdicts (the last
    round's pytest summary), the time a case."""
    rows = [("suite", "median s", "cases", "s/case", "verdicts (last round)")]
    for name, spent in times.items():
        counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|skipped|xfailed|"
                                                    r"error|errors)", said.get(name, ""))}
        cases = sum(counts.values())
        median = statistics.median(spent)
        verdicts = ", ".join(f"{v} {k}" for k, v in counts.items())
        rows.append((name, f"{median:.1f}", str(cases),
                     f"{median / cases:.3f}" if cases else "-", verdicts))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


MIXED = "old catalog, this code"


def _compiled(tree: Path) -> None:
    """Write ``tree``'s bytecode before it is timed (a new worktree or copy has none, and
    ``PYTHONDONTWRITEBYTECODE`` would have every process compile every module again: a
    cost the checkout, whose bytecode is there, would not pay)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "pytest_xtc")],
                   check=True, capture_output=True, env=env)


def _with_catalog(tree: Path, old: Path, tmp: Path) -> Path:
    """A copy of ``tree``'s package with ``old``'s built-in suite (its catalog and the
    code expanding it: ``pytest_xtc/conformance``)."""
    copy = tmp / "mixed"
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(tree / "pytest_xtc", copy / "pytest_xtc", ignore=skip)
    suite = Path("pytest_xtc", "conformance")
    shutil.rmtree(copy / suite)
    shutil.copytree(old / suite, copy / suite, ignore=skip)
    shutil.copyfile(tree / "pyproject.toml", copy / "pyproject.toml")  # pytest's settings
    return copy


if __name__ == "__main__":
    main()
