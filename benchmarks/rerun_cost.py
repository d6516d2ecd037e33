"""What a rerun costs with the kernel cache (issue 56): the host catalog with ``-n 2``, cold
(an empty kernel cache) and warm (the cache a cold run filled, nothing changed), side by
side in one run, the order alternating round by round (round 1 cold then warm, round 2 warm
then cold, each cold run on a fresh, empty folder). Prints ``warm / cold: R`` (goal
R <= 0.25), how many kernels each run compiled and took from the cache, and whether every
case's verdict (status, phase) is the same cold and warm.

Every run also runs the case files of ``examples/model-cases/ci`` (copied, ``--xtc-cases``).
``--changed``: then one of those files changed (one schedule's tile size) and the warm run
again: it compiles exactly that file's cases of that schedule (printed: ``compiled on the
warm run``; a compile the compiler refused is kept too, any other failing compile is
never kept: it compiles on every run, said apart).
``--concurrent``: then two ``-n 2`` sessions at once on one empty cache, their verdicts
compared with the cold run's. ``--shard I/N`` runs one shard of the catalog (a sample).
``--repeat N`` passes ``--xtc-repeat=N`` (0: no performance recorded, the checked work
alone; the default records it, as a plain ``pytest`` run does).

    .venv/bin/python benchmarks/rerun_cost.py [--rounds N] [--shard 1/4] [--changed]
                                              [--concurrent] [--target host] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL = 0.25


def command(args: argparse.Namespace, report: Path, extra: list[str]) -> list[str]:
    found = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             f"--xtc-target={args.target}", "-n", str(args.workers), f"--xtc-report={report}",
             str(ROOT / "pytest_xtc" / "conformance"), *extra]
    if args.repeat is not None:
        found.append(f"--xtc-repeat={args.repeat}")
    sharded = args.shard and "--xtc-only-cases" not in extra
    return found + ([f"--xtc-shard={args.shard}"] if sharded else [])


def started(args: argparse.Namespace, cache: Path, report: Path,
            extra: list[str]) -> subprocess.Popen[str]:
    env = {**os.environ, "XTC_KERNEL_CACHE": str(cache)}
    return subprocess.Popen(command(args, report, extra), cwd=tempfile.gettempdir(),
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


Verdicts = dict[str, tuple[str, str, "bool | None"]]
CHANGED_FILE, CHANGED_FROM, CHANGED_TO = "gpt2_attn_qkv_s16.yaml", "j1: 16", "j1: 8"


def finished(process: subprocess.Popen[str], report: Path) -> Verdicts:
    out, _ = process.communicate()
    if process.returncode not in (0, 1):
        sys.exit(f"pytest failed ({process.returncode}): {out[-1500:]}")
    return verdicts(report)


def run(args: argparse.Namespace, cache: Path, report: Path,
        extra: list[str]) -> tuple[float, Verdicts]:
    start = time.perf_counter()
    found = finished(started(args, cache, report, extra), report)
    return time.perf_counter() - start, found


def verdicts(report: Path) -> Verdicts:
    """Each case's (status, phase, kernel from the cache: None where no cache was used,
    as for a case not run) from its results.jsonl."""
    found = {}
    for line in (report / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        found[f"{record['target']}-{record['case']}"] = (
            record["status"], record.get("phase") or "", record.get("kernel_cached"))
    return found


def counts(found: Verdicts) -> str:
    kept = sum(v[2] is True for v in found.values())
    fresh = sum(v[2] is False for v in found.values())
    return f"{len(found)} cases, kernels from the cache {kept}, compiled {fresh}"


def compiled(found: Verdicts) -> tuple[list[str], list[str]]:
    """The cases compiled afresh: kept after, and those whose compile failed (not kept:
    a failure other than the compiler's refusal)."""
    fresh = [k for k, v in found.items() if v[2] is False]
    failing = [k for k in fresh if found[k][1] in ("compile", "schedule")]
    return sorted(set(fresh) - set(failing)), sorted(failing)


def differ(first: Verdicts, second: Verdicts) -> list[str]:
    return sorted(k for k in first.keys() | second.keys()
                  if first.get(k, ("",) * 2)[:2] != second.get(k, ("",) * 2)[:2])


def changed(args: argparse.Namespace, tmp: Path, cache: Path, cases: Path, extra: list[str],
            cold: Verdicts) -> None:
    """One case file changed, the warm run again: which cases compile. A sharded run
    runs the case files alone, whole (a shard would leave the changed cases out)."""
    from pytest_xtc.core.cases.case import load_case_paths

    if args.shard:
        extra = [*extra, "--xtc-only-cases"]
        run(args, cache, tmp / "report-files", extra)  # every case file's kernels kept
    path = cases / CHANGED_FILE
    before = {c.id: c for c in load_case_paths([path])}
    path.write_text(path.read_text().replace(CHANGED_FROM, CHANGED_TO))
    after = {c.id: c for c in load_case_paths([path])}
    expected = sorted(f"{args.target}-{i}" for i, c in after.items() if before.get(i) != c)
    elapsed, found = run(args, cache, tmp / "report-changed", extra)
    fresh, failing = compiled(found)
    print(f"{CHANGED_FILE} changed ({CHANGED_FROM} -> {CHANGED_TO}; its cases changed: "
          f"{', '.join(expected)}): {elapsed:.1f} s; compiled on the warm run: {len(fresh)} "
          f"({', '.join(fresh)}); exactly the changed: {fresh == expected}; their compile "
          f"failing (not kept): {len(failing)}; verdicts differing from the cold run's: "
          f"{len([k for k in differ(cold, found) if k in cold and k in found])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--target", default="host")
    parser.add_argument("--shard", default=None, help="I/N: one shard of the catalog")
    parser.add_argument("--changed", action="store_true")
    parser.add_argument("--concurrent", action="store_true")
    parser.add_argument("--repeat", type=int, default=None, help="--xtc-repeat for every run")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="xtc-rerun-cost-"))
    warm_cache, cases = tmp / "warm", tmp / "cases"
    shutil.copytree(ROOT / "examples" / "model-cases" / "ci", cases)
    extra = [f"--xtc-cases={cases}"]
    times: dict[str, list[float]] = {"cold": [], "warm": []}
    seen: dict[str, Verdicts] = {}
    for n in range(args.rounds):
        for kind in ("cold", "warm") if n % 2 == 0 else ("warm", "cold"):
            cache = warm_cache if kind == "warm" or n == 0 else tmp / f"cold-{n}"
            elapsed, found = run(args, cache, tmp / f"report-{kind}-{n}", extra)
            times[kind].append(elapsed)
            seen[kind] = found  # the last of each
            print(f"round {n + 1} {kind}: {elapsed:7.1f} s ({counts(found)}; load "
                  f"{os.getloadavg()[0]:.1f})", flush=True)
            bad = differ(seen["cold"], found) if "cold" in seen else []
            if bad:
                print(f"  verdicts differing from the cold run's: {len(bad)}: {bad[:10]}")
    cold, warm = statistics.median(times["cold"]), statistics.median(times["warm"])
    print(f"medians of {args.rounds} round(s), {args.target}, -n {args.workers}"
          f"{', shard ' + args.shard if args.shard else ''}"
          f"{'' if args.repeat is None else f', --xtc-repeat={args.repeat}'}"
          f": cold {cold:.1f} s, warm {warm:.1f} s")
    print(f"warm / cold: {warm / cold:.2f} (goal <= {GOAL}); verdicts identical cold and warm: "
          f"{not differ(seen['cold'], seen['warm'])}")
    fresh, failing = compiled(seen["warm"])
    print(f"compiled on the warm run, nothing changed: {len(fresh)} {fresh[:10]}; their "
          f"compile failing (not kept): {len(failing)}")
    if args.changed:
        changed(args, tmp, warm_cache, cases, extra, seen["cold"])
    if args.concurrent:
        shared = tmp / "shared"
        pair = [started(args, shared, tmp / f"report-both-{n}", extra) for n in range(2)]
        both = [finished(p, tmp / f"report-both-{n}") for n, p in enumerate(pair)]
        for n, found in enumerate(both):
            bad = differ(seen["cold"], found)
            print(f"concurrent session {n + 1} on one cache: {counts(found)}; verdicts "
                  f"differing from the cold run's: {len(bad)} {bad[:10]}")


if __name__ == "__main__":
    main()
