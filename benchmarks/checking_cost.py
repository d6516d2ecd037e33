"""What checking a result costs beside compiling and running the case, on large cases.

Run: ``python benchmarks/checking_cost.py`` (host target, in process). For each case it
times, side by side in one run: compile, one run (the kernel on guarded buffers), and the
checking (float64 reference with its bound, the comparison, the precision statistic),
then prints checking / (compile + run) for one call, and the share checking takes of a
case as the plugin runs it (the timed call: warm-up + 5 repeats; a second call on fresh
inputs; both checked). Checking is the best of three (the machine may be shared).
Target: at most 10 %.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from pytest_xtc.conformance.families import FAMILIES
from pytest_xtc.core.adapter import ONCE, TargetSpec
from pytest_xtc.core.cases import graphs, values
from pytest_xtc.core.cases.case import Case, Schedule
from pytest_xtc.core.execution.perf import DEFAULT_TIMING
from pytest_xtc.core.execution.work import call_kernel
from pytest_xtc.core.judging import checking, precision, reference
from pytest_xtc.targets.host import HostTarget

PARALLEL = Schedule.from_data("parallelize", [{"parallelize": [["i"]]}])
CASES = [
    # ResNet conv5-like: 7x7x512 input, 3x3x512x512 weights, padding 1 (K = 4608)
    ("conv2d", (1, 7, 7, 512, 3, 3, 512, 1, 1), Schedule.from_data(
        "parallelize", [{"parallelize": [["h"]]}])),
    # BERT-like feed-forward matmul: 128 tokens, 768 -> 3072 (K = 768)
    ("matmul", (128, 3072, 768), PARALLEL),
    # the catalog's long reductions
    ("matmul", (64, 64, 2304), Schedule()),
    ("matmul", (32, 32, 4096), Schedule()),
]


def measure(family: str, params: tuple[int, ...], schedule: Schedule, dtype: str,
            workdir: Path) -> dict[str, Any]:
    graph, shape = FAMILIES[family](*params, dtype=dtype)
    case = Case(family, dtype, shape, schedule, graph)
    host = HostTarget(TargetSpec("host", "host"))
    start = time.perf_counter()
    artifact = host.compile(case, workdir / case.id)
    compile_s = time.perf_counter() - start
    inputs = case.make_inputs(case.seed(0))
    like = [values.unwritten(o.shape, o.dtype) for o in graphs.outputs(graph)]
    start = time.perf_counter()
    call, _ = call_kernel(host, artifact, case, inputs, like, ONCE, True)
    run_s = time.perf_counter() - start
    names = [o.name for o in graphs.outputs(graph)]
    best: dict[str, float] = {}
    for _ in range(3):
        start = time.perf_counter()
        ref = reference.evaluate(graph, inputs)
        reference_s = time.perf_counter() - start
        comparison = checking.compare(names, call.outputs, ref)
        compare_s = time.perf_counter() - start - reference_s
        sample = ref.samples[0]
        assert sample is not None and comparison.ok and not call.guard
        terms = precision.terms(dtype, call.outputs[0], ref.values[0], sample.magnitude,
                                sample.k)
        check_s = time.perf_counter() - start
        if not best or check_s < best["check_s"]:
            best = {"reference_s": reference_s, "compare_s": compare_s,
                    "statistic_s": check_s - reference_s - compare_s, "check_s": check_s}
    case_s = compile_s + (DEFAULT_TIMING.repeat + 2) * run_s + 2 * best["check_s"]
    return {"case": case.id, "compile_s": compile_s, "run_s": run_s, **best,
            "ratio": best["check_s"] / (compile_s + run_s),
            "share": 2 * best["check_s"] / case_s, "bits": terms.bits}


def main() -> int:
    rows = []
    with tempfile.TemporaryDirectory(prefix="checking-cost-") as tmp:
        for family, params, schedule in CASES:
            rows.append(measure(family, params, schedule, "float32", Path(tmp)))
    head = (f"{'case':<48} {'compile':>8} {'run':>8} {'ref+bound':>9} {'compare':>8} "
            f"{'stat':>7} {'check':>8} {'check/(c+r)':>11} {'in a case':>9} {'bits':>5}")
    print(head)
    for r in rows:
        print(f"{r['case']:<48} {r['compile_s']:8.3f} {r['run_s']:8.3f} "
              f"{r['reference_s']:9.4f} {r['compare_s']:8.4f} {r['statistic_s']:7.4f} "
              f"{r['check_s']:8.4f} {r['ratio']:11.1%} {r['share']:9.1%} {r['bits']:5.1f}")
    worst = max(r["share"] for r in rows)
    print(f"largest share of a case's time spent checking: {worst:.1%} (target: at most 10%)")
    return 0 if worst <= 0.10 else 1


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
