"""Isolation's cost on large operands: one matmul case, isolated (the default) and with
``--xtc-no-isolation``, at weight sizes 4, 64 and 256 MB, at the largest case the default
budget (``--xtc-max-case-bytes``, 1 GiB) admits, and a LLaMA-7B decode layer
(4x4096 x 4096x11008 float32).

M = 4 rows keep the compute small, so the operands' way to the worker and back is what
shows. Each session runs a small warm-up case first (the worker's fork is not the
transfer's), then every size; the two modes alternate, several rounds; each case's time
is its call phase (JUnit, ``junit_duration_report=call``), the median over the rounds.
Goals (issue 19): ratio at most 1.10 at every size, the extra time per MB flat within 2x,
the LLaMA layer under 2x.

    .venv/bin/python benchmarks/isolation_transfer.py [--rounds N] [--only b-w4mb ...]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

M, K = 4, 4096
BUDGET = 1 << 30  # the default --xtc-max-case-bytes
BYTES_PER_ELEMENT = 4 + 16  # float32 operand plus its float64 reference and bound


def largest_admitted_n() -> int:
    """The widest weight (K x N float32) whose case fits the default budget."""
    return (BUDGET // BYTES_PER_ELEMENT - M * K) // (K + M)


SIZES = {  # case name (the session runs them in this order): N (weight K x N float32)
    "a-warmup": 16,
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


def session(cases: Path, isolate: bool, cwd: Path) -> dict[str, tuple[float, str]]:
    """One pytest session over every case: each case's call time and status."""
    xml = cwd / "junit.xml"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               "--xtc-target=host", f"--xtc-cases={cases}", "--xtc-only-cases",
               "--xtc-repeat=0", f"--xtc-max-case-bytes={2 * BUDGET}",
               f"--junitxml={xml}", "-o", "junit_duration_report=call", "-p", "no:randomly"]
    if not isolate:
        command.append("--xtc-no-isolation")
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        sys.exit(f"{' '.join(command)} failed:\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
    found: dict[str, tuple[float, str]] = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        name = str(props.get("xtc_case", "")).split("-float32")[0]
        found[name] = (float(case.get("time", "nan")), str(props.get("xtc_status")))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="+", choices=[n for n in SIZES if n != "a-warmup"],
                        help="these cases only (after the warm-up)")
    options = parser.parse_args()
    rounds = options.rounds
    if options.only:
        for name in set(SIZES) - {"a-warmup", *options.only}:
            del SIZES[name]
    work = Path(tempfile.mkdtemp(prefix="xtc-transfer-"))
    cases = work / "cases"
    cases.mkdir()
    write_cases(cases)
    times: dict[tuple[str, bool], list[float]] = {}
    statuses: dict[tuple[str, bool], set[str]] = {}
    for _ in range(rounds):
        for isolate in (True, False):
            for name, (seconds, status) in session(cases, isolate, work).items():
                times.setdefault((name, isolate), []).append(seconds)
                statuses.setdefault((name, isolate), set()).add(status)
    print(f"matmul {M}x{K} x {K}xN float32, call phase, median of {rounds} rounds "
          "(machine shared: figures are noisy)")
    print(f"{'case':<16}{'weight MB':>10}{'isolated s':>12}{'no-isol. s':>12}{'ratio':>8}"
          f"{'extra ms/MB':>13}  status")
    for name, n in SIZES.items():
        if name == "a-warmup":
            continue
        mb = K * n * 4 / 2**20
        iso = statistics.median(times[(name, True)])
        plain = statistics.median(times[(name, False)])
        seen = statuses[(name, True)] | statuses[(name, False)]
        print(f"{name:<16}{mb:>10.0f}{iso:>12.2f}{plain:>12.2f}{iso / plain:>8.2f}"
              f"{1000 * (iso - plain) / mb:>13.2f}  {','.join(sorted(seen))}")


if __name__ == "__main__":
    main()
