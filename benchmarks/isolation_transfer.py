"""Isolation's cost on large operands: one matmul case, isolated (the default) and with
``--xtc-no-isolation``, at weight sizes 4, 64 and 256 MB, at the largest case the default
budget (``--xtc-max-case-bytes``, 1 GiB) admits, and a LLaMA-7B decode layer
(4x4096 x 4096x11008 float32).

M = 4 rows keep the compute small, so the operands' way to the worker and back is what
shows. Each session runs a small warm-up case first (the worker's fork is not the
transfer's), then every size; the two modes alternate, several rounds; each case's time
is its call phase (JUnit, ``junit_duration_report=call``), the median over the rounds.
The isolation's extra time is shown twice: as the difference of the two modes' call times
(the kernel's own run varies by more than the transfer costs at large sizes) and as the
time the isolated case spent moving its operands and results (``transfer_s`` of its
result record: packing, the pipe, mapping, the worker's tidying after the case).
Goals (issue 19): ratio at most 1.10 at every size, the extra time per MB flat within 2x,
the LLaMA layer under 2x.

    .venv/bin/python benchmarks/isolation_transfer.py [--rounds N] [--only b-w4mb ...]
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

M, K = 4, 4096
BUDGET = 1 << 30  # the default --xtc-max-case-bytes
BYTES_PER_ELEMENT = 4 + 16  # float32 operand plus its float64 reference and bound


def largest_admitted_n() -> int:
    """The widest weight (K x N float32) whose case fits the default budget."""
    return (BUDGET // BYTES_PER_ELEMENT - M * K) // (K + M)


SIZES = {  # case name (the session runs them in this order): N (weight K x N float32)
    "a-warmup": 16,
    "a2-small": 16,  # after the warm-up: what moving a case costs whatever its size
    "b-w4mb": 4 * 2**20 // (4 * K),
    "c-w64mb": 64 * 2**20 // (4 * K),
    "d-llama7b-decode": 11008,
    "e-budget-max": largest_admitted_n(),
    "f-w256mb": 256 * 2**20 // (4 * K),
}

CASE = """name: {name}
inputs:
- uid: '%0'
  expr: {{type: {{shape: [{m}, {k}], dtype: float32}}}}
- uid: '%1'
  expr: {{type: {{shape: [{k}, {n}], dtype: float32}}}}
outputs:
- uid: '%2'
nodes:
- uid: '%2'
  expr:
    op: {{name: matmul, attrs: {{}}}}
    args: ['%0', '%1']
schedules:
  none: []
dtypes: [float32]
values: [random]
"""


def write_cases(folder: Path) -> None:
    for name, n in SIZES.items():
        (folder / f"{name}.yaml").write_text(CASE.format(name=name, m=M, k=K, n=n))


@dataclass
class Seen:
    """One case in one session."""

    seconds: float  # its call phase
    status: str
    moved_s: float | None  # the isolation's own time moving it (the result's transfer_s)


def session(cases: Path, isolate: bool, cwd: Path) -> dict[str, Seen]:
    """One pytest session over every case: each case's call time, status and transfer."""
    xml, bundle = cwd / "junit.xml", cwd / "bundle"
    shutil.rmtree(bundle, ignore_errors=True)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               "--xtc-target=host", f"--xtc-cases={cases}", "--xtc-only-cases",
               "--xtc-repeat=0", f"--xtc-max-case-bytes={2 * BUDGET}", f"--xtc-report={bundle}",
               f"--junitxml={xml}", "-o", "junit_duration_report=call", "-p", "no:randomly"]
    if not isolate:
        command.append("--xtc-no-isolation")
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        sys.exit(f"{' '.join(command)} failed:\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
    moved = {}
    for line in (bundle / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        moved[record["case"].split("-float32")[0]] = record.get("transfer_s")
    found: dict[str, Seen] = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        name = str(props.get("xtc_case", "")).split("-float32")[0]
        found[name] = Seen(float(case.get("time", "nan")), str(props.get("xtc_status")),
                           moved.get(name))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="+", choices=[n for n in SIZES if not n.startswith("a")],
                        help="these cases only (after the warm-up)")
    options = parser.parse_args()
    rounds = options.rounds
    if options.only:
        for name in set(SIZES) - {"a-warmup", "a2-small", *options.only}:
            del SIZES[name]
    work = Path(tempfile.mkdtemp(prefix="xtc-transfer-"))
    cases = work / "cases"
    cases.mkdir()
    write_cases(cases)
    seen: dict[tuple[str, bool], list[Seen]] = {}
    for _ in range(rounds):
        for isolate in (True, False):
            for name, one in session(cases, isolate, work).items():
                seen.setdefault((name, isolate), []).append(one)
    print(f"matmul {M}x{K} x {K}xN float32, call phase, median of {rounds} rounds "
          "(machine shared: figures are noisy)")
    print("extra: isolated minus no-isolation call time; moved: the isolated case's own "
          "transfer_s\n(packing, pipe, mapping, the worker's tidying), per MB of weight; "
          "net: moved less a2-small's (a per-case cost)")
    print(f"{'case':<17}{'weight MB':>9}{'isolated s':>11}{'no-isol. s':>11}{'ratio':>7}"
          f"{'extra ms/MB':>12}{'moved ms/MB':>12}{'net ms/MB':>10}  status")
    moved_s = {name: statistics.median(s.moved_s or math.nan for s in seen[(name, True)])
               for name in SIZES}
    fixed = moved_s["a2-small"]
    per_mb: dict[str, list[float]] = {"moved": [], "net": []}
    for name, n in SIZES.items():
        if name == "a-warmup":
            continue
        mb = K * n * 4 / 2**20
        iso = statistics.median(s.seconds for s in seen[(name, True)])
        plain = statistics.median(s.seconds for s in seen[(name, False)])
        moved, net = 1000 * moved_s[name] / mb, 1000 * (moved_s[name] - fixed) / mb
        if name != "a2-small":
            per_mb["moved"].append(moved)
            per_mb["net"].append(net)
        statuses = ",".join(sorted({s.status for s in seen[(name, True)] + seen[(name, False)]}))
        print(f"{name:<17}{mb:>9.2f}{iso:>11.2f}{plain:>11.2f}{iso / plain:>7.2f}"
              f"{1000 * (iso - plain) / mb:>12.2f}{moved:>12.3f}{net:>10.3f}  {statuses}")
    print(f"a2-small moved {1000 * fixed:.1f} ms: the per-case cost (two process hops, each "
          "way, and the worker's tidying)")
    for what, values in per_mb.items():
        if len(values) > 1:
            print(f"{what} ms/MB, largest over smallest across sizes: "
                  f"{max(values) / min(values):.2f} (goal: at most 2)")


if __name__ == "__main__":
    main()
