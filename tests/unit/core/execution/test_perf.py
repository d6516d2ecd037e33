"""Performance records: FLOP counts, timing, the record itself, and where it goes (the
runner's outcome, --xtc-report's summary, pytest-benchmark's JSON and comparisons)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_xtc.conformance import builtin_cases
from pytest_xtc.conformance.families import FAMILIES
from pytest_xtc.core.adapter import (
    ONCE,
    Artifact,
    Capabilities,
    Probe,
    RunResult,
    TargetAdapter,
    TargetSpec,
    Tier,
    Timing,
)
from pytest_xtc.core.cases import graphs
from pytest_xtc.core.execution import perf
from pytest_xtc.core.execution.runner import Settings, run_case
from pytest_xtc.core.judging import checking, reference
from pytest_xtc.core.outcome import Status

# -- FLOPs, timing, statistics -----------------------------------------------------------


def test_flop_count_of_matmul_conv2d_and_graphs_holding_them() -> None:
    assert perf.flop_count(FAMILIES["matmul"](13, 11, 7)[0]) == 2 * 13 * 11 * 7
    assert perf.flop_count(FAMILIES["matmul+relu"](13, 11, 7)[0]) == 2 * 13 * 11 * 7
    assert (
        perf.flop_count(FAMILIES["mlp"](8, 64, 128, 10)[0]) == 2 * 8 * 128 * 64 + 2 * 8 * 10 * 128
    )
    # 9x9 padded by 1 to 11x11, 3x3 window, stride 2: 5x5 outputs of 8 features over 3*3*3.
    conv = FAMILIES["conv2d"](1, 9, 9, 3, 3, 3, 8, 2, 1)[0]
    assert perf.flop_count(conv) == 2 * 1 * 5 * 5 * 8 * 3 * 3 * 3
    assert (
        perf.flop_count(FAMILIES["conv2d"](2, 11, 13, 5, 5, 5, 7, 2, 2)[0])
        == 2 * 2 * 6 * 7 * 7 * 125
    )
    assert perf.flop_count(FAMILIES["relu"](5, 7)[0]) == 0


def test_numpy_forward_keeps_the_dtype_and_is_itself_within_the_bound() -> None:
    for case in builtin_cases():
        inputs = case.make_inputs(case.seed(0))
        outputs = reference.forward(case.graph, inputs)
        assert all(o.dtype == np.dtype(case.dtype) for o in outputs), case.id
        assert [o.shape for o in outputs] == [o.shape for o in graphs.outputs(case.graph)]
        ref = reference.evaluate(case.graph, inputs, exact=case.exact, c=case.c)
        names = [o.name for o in graphs.outputs(case.graph)]
        assert not checking.compare(names, outputs, ref).mismatches, case.id


def fake_clock(step: float = 0.0):  # type: ignore[no-untyped-def]
    """A clock that advances ``step`` per reading (and by what ``tick`` adds)."""
    now = [0.0]

    def clock() -> float:
        now[0] += step
        return now[0]

    def tick(seconds: float) -> None:
        now[0] += seconds

    return clock, tick


def test_time_calls_measures_like_xtcs_evaluator() -> None:
    clock, tick = fake_clock()
    calls = []

    def kernel() -> None:
        calls.append(1)
        tick(0.3e-3)

    # One warm-up call, timed: each repeat starts from the count it aims at 1.5 ms (6
    # calls), where from 1 call it doubled 1, 2, 4 until 1 ms (7 calls, 3 tries, in each).
    timing = Timing(repeat=3, number=1, min_repeat_ms=1)
    times = perf.time_calls(kernel, timing, clock)
    assert times == pytest.approx([0.3e-3] * 3)
    aimed = perf.aimed(timing, [0.3e-3]).number
    assert aimed * 0.3e-3 >= 1e-3 and len(calls) == 1 + 3 * aimed < 1 + 3 * (1 + 2 + 4)
    calls.clear()

    def slow_first_call() -> None:  # a warm-up 10 times the others: aimed at 1 call
        tick(3e-3 if not calls else 0.3e-3)
        calls.append(1)

    assert perf.time_calls(slow_first_call, timing, clock) == pytest.approx([0.3e-3] * 3)
    assert len(calls) == 1 + 3 * (1 + 2 + 4)  # still doubled until each try lasts 1 ms
    calls.clear()
    assert perf.time_calls(kernel, Timing(2, 5, 0), clock) == pytest.approx([0.3e-3] * 2)
    assert len(calls) == 1 + 2 * 5
    calls.clear()
    perf.time_calls(kernel, Timing(1, 0, 0), clock)  # number 0: no warm-up, one call
    assert len(calls) == 1


def test_aimed_raises_the_count_never_lowers_it() -> None:
    timing = Timing(repeat=5, number=1, min_repeat_ms=1)
    assert perf.aimed(timing, [1e-6]).number == 1500  # a first try of 1.5 ms
    assert perf.aimed(timing, [2e-6, 1e-6]).number == 1500  # by the shortest call
    assert perf.aimed(timing, [1.0]).number == 1  # a call longer than the minimum
    assert perf.aimed(Timing(5, 4000, 1), [1e-6]).number == 4000  # the user's own count
    assert perf.aimed(timing, [1e-15]).number == perf.MAX_NUMBER
    for unknown in ([], [0.0], [-1.0], [float("nan")], [float("inf")]):
        assert perf.aimed(timing, unknown) == timing
    assert perf.aimed(Timing(5, 1, 0), [1e-6]) == Timing(5, 1, 0)  # no minimum: as asked
    assert perf.aimed(Timing(5, 0, 1), [1e-6]) == Timing(5, 0, 1)  # number 0: as asked


def test_spread() -> None:
    stats = perf.spread([4.0, 1.0, 100.0, 3.0, 2.0])
    assert stats["median_s"] == 3.0 and stats["min_s"] == 1.0 and stats["max_s"] == 100.0
    assert stats["iqr_s"] == 2.0 and stats["rounds"] == 5
    assert stats["mean_s"] == 22.0 and stats["rel_std"] == pytest.approx(
        np.std([4, 1, 100, 3, 2], ddof=1) / 22
    )
    assert perf.spread([5.0]) == {
        "median_s": 5.0,
        "min_s": 5.0,
        "max_s": 5.0,
        "mean_s": 5.0,
        "iqr_s": 0.0,
        "rel_std": 0.0,
        "rounds": 1,
    }


def test_record_is_plain_json_with_its_method() -> None:
    graph, _ = FAMILIES["matmul"](8, 8, 8)
    inputs = [np.ones((8, 8), np.float32)] * 2
    clock, _ = fake_clock(step=1e-6)  # every measurement of numpy lasts 1 us
    record = perf.record(graph, inputs, [1e-6, 2e-6, 3e-6], Timing(3, 1, 0), 1e9, clock)
    assert json.loads(json.dumps(record, allow_nan=False)) == record
    assert all(type(v) in (bool, int, float, type(None)) for v in record.values())
    assert (record["repeat"], record["number"], record["min_repeat_ms"]) == (3, 1, 0)
    assert record["flops"] == 1024 and record["rounds"] == 3
    assert record["median_s"] == 2e-6 and record["numpy_median_s"] == pytest.approx(1e-6)
    assert record["gflops"] == pytest.approx(1024 / 2e-6 / 1e9)
    assert record["numpy_gflops"] == pytest.approx(1024 / 1e-6 / 1e9)
    assert record["time_vs_numpy"] == pytest.approx(2.0)
    assert record["peak_gflops"] == 1.0 and record["peak_fraction"] == pytest.approx(0.512)
    assert record["numpy_threads"] in (1, None)

    relu = perf.record(FAMILIES["relu"](5, 7)[0], [np.ones((5, 7))], [1e-6], ONCE)
    assert relu["flops"] is None and relu["gflops"] is None and relu["peak_fraction"] is None
    assert relu["numpy_median_s"] > 0


def test_numpy_is_timed_once_per_graph_and_kind_of_values() -> None:
    """Cases of one graph under other schedules (``same_as`` alike) share numpy's time,
    said by ``numpy_reused``; another key, or none, is timed again."""
    graph, _ = FAMILIES["matmul"](8, 8, 8)
    inputs = [np.ones((8, 8), np.float32)] * 2
    clock, _ = fake_clock(step=1e-6)
    calls = []

    def counted() -> float:
        calls.append(1)
        return clock()

    key = (f"test-{id(calls)}", "random")
    first = perf.record(graph, inputs, [1e-6], ONCE, clock=counted, same_as=key)
    measured = len(calls)
    again = perf.record(graph, inputs, [2e-6], ONCE, clock=counted, same_as=key)
    assert measured > 0 and len(calls) == measured  # not timed again
    assert not first["numpy_reused"] and again["numpy_reused"]
    assert again["numpy_median_s"] == first["numpy_median_s"]
    assert again["median_s"] == 2e-6  # the kernel's own time, as given
    other = perf.record(graph, inputs, [1e-6], ONCE, clock=counted, same_as=(key[0], "special"))
    unkeyed = perf.record(graph, inputs, [1e-6], ONCE, clock=counted)
    assert not other["numpy_reused"] and not unkeyed["numpy_reused"]
    assert len(calls) == 3 * measured


def test_numpy_is_timed_on_one_blas_thread() -> None:
    threadpoolctl = pytest.importorskip("threadpoolctl")
    limit, threads = perf.one_blas_thread()
    with limit:
        info = [i for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
        assert info and all(i["num_threads"] == 1 for i in info)
    assert threads == 1


# -- The runner --------------------------------------------------------------------------

TIMES = [3e-6, 1e-6, 2e-6, 5e-6, 4e-6]


class NumpyTarget(TargetAdapter):
    """Runs cases with numpy itself; its kernel 'times' are fixed."""

    wrong = False
    peak: Any = 1e12

    def probe(self) -> Probe:
        return Probe(Tier.EXECUTE, device="numpy")

    def capabilities(self) -> Capabilities:
        return Capabilities(ops=frozenset({"matmul", "conv2d", "relu", "pad", "pad2d"}))

    def compile(self, case: Any, workdir: Path) -> Artifact:
        return Artifact(workdir, case.graph)

    def run(
        self, artifact: Artifact, inputs: Any, outputs: Any, timing: Timing = ONCE
    ) -> RunResult:
        for out, value in zip(outputs, reference.forward(artifact.handle, inputs), strict=True):
            out[...] = value + (1 if self.wrong else 0)
        return RunResult(times=TIMES[: timing.repeat])

    def peak_flops(self, dtype: str) -> float | None:
        if isinstance(self.peak, Exception):
            raise self.peak
        return self.peak


def case(key: str) -> Any:
    return next(c for c in builtin_cases() if c.key == key)


def test_passed_cases_get_a_record_and_others_none(tmp_path: Path) -> None:
    adapter = NumpyTarget(TargetSpec("numpy-perf", "numpy-perf"))
    timing = Timing(5, 1, 0)
    settings = Settings(isolate=False, timing=timing, peak=True)
    outcome = run_case(adapter, case("matmul-float32-13x11x7-tile"), tmp_path / "a", settings)
    assert outcome.status is Status.PASSED and outcome.times == TIMES
    assert outcome.perf is not None and outcome.perf["median_s"] == 3e-6
    assert outcome.perf["gflops"] == pytest.approx(2 * 13 * 11 * 7 / 3e-6 / 1e9)
    assert outcome.perf["peak_fraction"] == pytest.approx(outcome.perf["gflops"] * 1e9 / 1e12)
    assert json.loads(json.dumps(outcome.to_dict()))["perf"] == outcome.perf

    off = Settings(isolate=False, timing=ONCE, perf=False)
    assert run_case(adapter, case("relu-float32-5x7-none"), tmp_path / "b", off).perf is None
    adapter.wrong = True
    failed = run_case(adapter, case("relu-float32-5x7-none"), tmp_path / "c", settings)
    assert failed.status is Status.FAILED and failed.perf is None


def test_device_peak_is_asked_once_and_failures_count_as_none() -> None:
    adapter = NumpyTarget(TargetSpec("numpy-peak", "numpy-peak"))
    adapter.peak = RuntimeError("no counters")
    assert perf.device_peak(adapter, "float32") is None
    adapter.peak = 5e9
    assert perf.device_peak(adapter, "float32") is None  # cached per target and dtype
    assert perf.device_peak(adapter, "float64") == 5e9
    zero = NumpyTarget(TargetSpec("numpy-zero", "numpy-zero"))
    zero.peak = 0.0
    assert perf.device_peak(zero, "float32") is None


# -- The plugin: options, report, pytest-benchmark ------------------------------------------

VENDOR_HEADER = f"""
from __future__ import annotations
from pathlib import Path
from typing import Any
from pytest_xtc.core.judging import reference
from pytest_xtc.core.adapter import ONCE, Artifact, Capabilities, Probe, RunResult, TargetAdapter
from pytest_xtc.core.adapter import Tier, Timing
TIMES = {TIMES!r}
"""
FEW = "matmul-float32-13x11x7-tile] or conv2d-float32-1x9x9x3-3x3x8-s2-p1-tile]"


@pytest.fixture
def numpy_target(vendor: Any) -> None:
    """``numpy-perf``: this module's NumpyTarget as a vendor's target."""
    source = VENDOR_HEADER + inspect.getsource(NumpyTarget)
    vendor(
        "numpy_perf",
        {"numpy-perf": "numpy_perf_adapter:NumpyTarget"},
        {"numpy_perf_adapter": source},
    )


def benchmarks(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    return {b["param"]: b for b in data["benchmarks"]}


def test_recorded_times_reach_pytest_benchmark_json(
    numpy_target: None, run: Any, pytester: pytest.Pytester
) -> None:
    result = run("--xtc-target=numpy-perf", "-k", FEW, "--benchmark-json=out.json")
    result.assert_outcomes(passed=2)
    found = benchmarks(pytester.path / "out.json")
    assert set(found) == {
        "numpy-perf-matmul-float32-13x11x7-tile",
        "numpy-perf-conv2d-float32-1x9x9x3-3x3x8-s2-p1-tile",
    }
    bench = found["numpy-perf-matmul-float32-13x11x7-tile"]
    assert bench["stats"]["data"] == TIMES and bench["stats"]["median"] == 3e-6
    assert bench["stats"]["rounds"] == 5 and bench["options"]["timer"] == "xtc_evaluator"
    assert bench["group"] == "numpy-perf matmul"
    extra = bench["extra_info"]
    assert extra["gflops"] == pytest.approx(2 * 13 * 11 * 7 / 3e-6 / 1e9)
    assert extra["numpy_median_s"] > 0 and extra["peak_fraction"] > 0
    assert extra["xtc_case"] == "matmul-float32-13x11x7-tile" and extra["repeat"] == 5


def test_benchmark_compare_fail_can_fail_a_run(
    numpy_target: None, run: Any, pytester: pytest.Pytester
) -> None:
    args = ["--xtc-target=numpy-perf", "-k", FEW]
    run(*args, "--benchmark-autosave").assert_outcomes(passed=2)
    (saved,) = pytester.path.glob(".benchmarks/*/0001_*.json")
    same = run(*args, "--benchmark-compare=0001", "--benchmark-compare-fail=median:10%")
    assert same.ret == 0, same.stdout.str()
    data = json.loads(saved.read_text())
    for bench in data["benchmarks"]:  # as if the kernels used to be 10 times faster
        bench["stats"] = {
            k: v / 10 if k in ("min", "max", "mean", "median") else v
            for k, v in bench["stats"].items()
        }
    saved.write_text(json.dumps(data))
    slower = run(*args, "--benchmark-compare=0001", "--benchmark-compare-fail=median:10%")
    assert slower.ret != 0
    assert "Performance has regressed" in slower.stdout.str() + slower.stderr.str()


def test_under_xdist_the_report_still_gets_records(
    numpy_target: None, run: Any, pytester: pytest.Pytester
) -> None:
    result = run(
        "--xtc-target=numpy-perf",
        "-k",
        FEW,
        "-n",
        "2",
        "--xtc-report=rep",
        "--benchmark-json=out.json",
        "--xtc-repeat=3",
        "--xtc-min-repeat-ms=0",
    )
    result.assert_outcomes(passed=2)
    assert not (pytester.path / "out.json").exists()  # pytest-benchmark is off under xdist
    records = [json.loads(line) for line in (pytester.path / "rep/results.jsonl").open()]
    assert len(records) == 2
    for record in records:
        assert record["perf"]["rounds"] == 3 and record["perf"]["repeat"] == 3
        assert record["perf"]["min_repeat_ms"] == 0 and record["perf"]["gflops"] > 0
    off = run("--xtc-target=numpy-perf", "-k", FEW, "--xtc-report=rep", "--xtc-repeat=0")
    off.assert_outcomes(passed=2)
    lines = (pytester.path / "rep/results.jsonl").read_text().splitlines()
    assert [json.loads(line)["perf"] for line in lines] == [None, None]


def test_timing_options_are_checked(run: Any) -> None:
    for bad in ("--xtc-repeat=-1", "--xtc-number=0", "--xtc-min-repeat-ms=x"):
        result = run("--xtc-target=host", "--collect-only", bad)
        assert result.ret == pytest.ExitCode.USAGE_ERROR, bad
        assert "expected an integer >=" in result.stderr.str()


def test_summary_shows_gflops_and_numpy_ratio_on_host(run: Any, pytester: pytest.Pytester) -> None:
    result = run(
        "--xtc-target=host",
        "--xtc-report=rep",
        "-k",
        "matmul-float32-64x64x64-tile] or conv2d-float32-1x9x9x3-3x3x8-s2-p1-tile]",
    )
    result.assert_outcomes(passed=2)
    summary = (pytester.path / "rep/summary.md").read_text()
    assert "## Performance" in summary, summary
    table = summary.split("## Performance", 1)[1].splitlines()
    rows = {line.split("|")[2].strip(): line for line in table if line.startswith("| host |")}
    assert set(rows) == {"matmul", "conv2d"}
    for row in rows.values():
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert float(cells[3]) > 0 and cells[4].endswith("x") and float(cells[4][:-1]) > 0
    assert "repeat 5, number 1, min_repeat_ms 1" in summary
