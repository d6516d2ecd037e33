"""Crashes, hangs and bad input never lose a result; the suite proves its own power."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_xtc.selftest import faults

# A vendor adapter whose kernel segfaults on one case and never returns on another.
SABOTEUR = """
import ctypes, time
from pytest_xtc.targets.host import HostTarget

class Saboteur(HostTarget):
    def compile(self, case, workdir):
        artifact = super().compile(case, workdir)
        artifact.notes["case"] = case.id
        return artifact

    def run(self, artifact, inputs, outputs, timing=None):
        if artifact.notes["case"] == "relu-float32-5x7-none":
            ctypes.string_at(0)
        if artifact.notes["case"] == "matmul-float32-13x11x7-none":
            while True:
                time.sleep(60)
        return super().run(artifact, inputs, outputs)
"""

RAISES = """
from pytest_xtc.targets.host import HostTarget

class RaisesIn{phase}(HostTarget):
    def {phase}(self, *args, **kwargs):
        raise RuntimeError("adapter bug in {phase}")
"""

# not the model_* schedules: the catalog generated later added them to these shapes
SELECT = "(relu-float32-5x7 or matmul-float32-13x11x7) and not exact and not model_"
CASES = 4 + 6  # relu 5x7 schedules + matmul 13x11x7's float32 hand-written schedules


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["no-xdist", "xdist-2"])
def test_a_segfault_and_a_hang_cost_one_case_each(vendor, run, pytester, workers) -> None:
    vendor(
        "saboteur_xtc", {"saboteur": "saboteur_adapter:Saboteur"}, {"saboteur_adapter": SABOTEUR}
    )
    result = run(
        "--xtc-target=saboteur",
        "-k",
        SELECT,
        "--xtc-run-timeout=3",
        "--xtc-report=bundle",
        *workers,
    )
    assert result.ret == 1
    result.assert_outcomes(passed=CASES - 2, failed=2)
    out = result.stdout.str()
    assert "crashed during run: killed by signal SIGSEGV (Segmentation fault)" in out
    assert "timed out: run exceeded its 3 s limit" in out
    result.stdout.fnmatch_lines(["saboteur*8*2*0*0*0*0"])
    lines = (pytester.path / "bundle" / "results.jsonl").read_text().splitlines()
    records = {r["case"]: r for r in map(json.loads, lines)}
    assert len(records) == CASES
    assert "SIGSEGV" in records["relu-float32-5x7-none"]["message"]
    assert "timed out" in records["matmul-float32-13x11x7-none"]["message"]
    assert sum(r["status"] == "passed" for r in records.values()) == CASES - 2


SLOW = """
import time
from pytest_xtc.targets.host import HostTarget

class Slow(HostTarget):
    def compile(self, case, workdir):
        artifact = super().compile(case, workdir)
        artifact.notes["case"] = case.id
        return artifact

    def run(self, artifact, inputs, outputs, timing=None):
        result = super().run(artifact, inputs, outputs)
        if artifact.notes["case"] == "matmul-float32-13x11x7-none":
            time.sleep(4)  # past pytest-timeout's limit; its reply comes late
        return result
"""


def test_a_pytest_timeout_leaves_no_stale_reply_to_the_next_case(vendor, run) -> None:
    """pytest-timeout interrupts a case while its worker still computes: the worker is
    ended, so the next case never reads the late reply as its own."""
    vendor("slow_xtc", {"slow": "slow_adapter:Slow"}, {"slow_adapter": SLOW})
    select = "matmul-float32-13x11x7 and not exact and not model_"  # its 6 hand-written schedules
    result = run("--xtc-target=slow", "-k", select, "--timeout=3")
    result.assert_outcomes(passed=5, failed=1)  # the timeout hit the case in its call
    result.stdout.fnmatch_lines(["*Timeout*", "FAILED *slow-matmul-float32-13x11x7-none*"])


@pytest.mark.parametrize("phase", ["probe", "compile", "run"])
def test_an_adapter_that_raises_is_reported_not_fatal(vendor, run, phase) -> None:
    vendor(
        f"raises_{phase}",
        {f"raises-{phase}": f"raises_{phase}:RaisesIn{phase}"},
        {f"raises_{phase}": RAISES.format(phase=phase)},
    )
    result = run(f"--xtc-target=raises-{phase},host", "-k", "matmul-float32-13x11x7-tile]", "-rs")
    host = result.parseoutcomes()
    if phase == "probe":  # probe() must never raise: it is then an error of the run
        assert result.ret == 1 and host["passed"] == 1 and host["failed"] == 1
        result.stdout.fnmatch_lines(["*infrastructure error*probe raised RuntimeError: "
                                     "adapter bug in probe*"])
    else:
        assert result.ret == 1 and host["passed"] == 1 and host["failed"] == 1
        result.stdout.fnmatch_lines([f"*{phase} failed: RuntimeError: adapter bug in {phase}*"])


def test_a_toolchain_missing_a_file_is_an_infrastructure_error(vendor, run) -> None:
    source = (
        "from pytest_xtc.targets.host import HostTarget\n"
        "class NoLinker(HostTarget):\n"
        "    def compile(self, case, workdir):\n"
        "        raise FileNotFoundError(2, 'No such file or directory', '/opt/tc/bin/ld')\n"
    )
    vendor("nolinker_xtc", {"nolinker": "nolinker:NoLinker"}, {"nolinker": source})
    result = run("--xtc-target=nolinker", "-k", "matmul-float32-13x11x7-tile]")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "*[[]infrastructure error, compile[]] compile failed: FileNotFoundError*/opt/tc/bin/*",
            "nolinker*0*0*1*0*0*0",
        ]
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--xtc-target=no-such"], "unknown XTC target 'no-such'; registered targets: "),
        (["--xtc-target=mppa", "--xtc-mppa-platform=pdp11"], "invalid choice: 'pdp11'"),
        (
            ["--xtc-target=nvgpu", "--xtc-nvgpu-arch=ampere"],
            "--xtc-nvgpu-arch=ampere: not a valid value (expected sm_<major><minor>, e.g. sm_90)",
        ),
        (["--xtc-target=host", "--xtc-cases=nowhere.yaml"], "nowhere.yaml: no such case file"),
        (
            ["--xtc-target=host", "--xtc-report=."],
            "is not empty and holds no XTC conformance bundle",
        ),
    ],
)
def test_bad_input_is_a_one_line_usage_error(run, pytester, args, message) -> None:
    pytester.makefile(".txt", unrelated="not a bundle")
    result = run(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert message in err, err
    assert "Traceback" not in err


def test_bad_platform_from_the_environment_is_a_usage_error(run, monkeypatch) -> None:
    monkeypatch.setenv("XTC_MPPA_PLATFORM", "pdp11")
    result = run("--xtc-target=mppa")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--xtc-mppa-platform=pdp11: expected one of iss, qemu, hw" in result.stderr.str()


def test_malformed_expectation_file_names_file_and_line(vendor, run) -> None:
    root = vendor(
        "expect_xtc",
        {"expecting": "expecting:Expecting"},
        {
            "expecting": "from pytest_xtc.targets.host import HostTarget\n"
            "class Expecting(HostTarget):\n    pass\n"
        },
    )
    (root / "expecting.expectations.yaml").write_text(
        "- pattern: relu-*\n  phase: compile\n  reason: r\n  url: u\n"
        "- pattern: mlp-*\n  phase: sometimes\n  reason: r\n  url: u\n"
    )
    result = run("--xtc-target=expecting")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "expecting.expectations.yaml:5: phase must be one of compile, placement, run" in err


def test_same_seed_same_inputs_in_every_worker(vendor, run, pytester) -> None:
    """Two runs (one under xdist) record the same seeds and bitwise the same results."""
    seen = []
    for workers in ([], ["-n", "2"]):
        out = f"b{len(seen)}"
        run("--xtc-target=host", "-k", "matmul-float32-13x11x7 and not model_",
            f"--xtc-report={out}", *workers)
        lines = (pytester.path / out / "results.jsonl").read_text().splitlines()
        seen.append(
            sorted((r["case"], r["seed"], r["worst_ratio"]) for r in map(json.loads, lines))
        )
    assert seen[0] == seen[1] and len(seen[0]) == 8


def test_repeat_check_runs_each_kernel_twice(run) -> None:
    result = run(
        "--xtc-target=host", "-k", "matmul-float32-33x65x17-parallelize]", "--xtc-repeat-check"
    )
    result.assert_outcomes(passed=1)


def test_every_faulty_variant_is_rejected_by_some_case(tmp_path: Path) -> None:
    """The plugin's own version of ``xtc-conformance selftest``, on a smaller slice."""
    from dataclasses import replace

    from pytest_xtc.core.execution.runner import run_case
    from pytest_xtc.core.outcome import Status
    from pytest_xtc.selftest import proof as selftest
    from tests.acceptance.test_power import ORDER_FAULTS

    cases = selftest.selected_cases()
    settings = replace(selftest.settings(0), order=())  # the timed calls checked; in order
    # Every case starts in a worker of its own: a fault of state kept from the case before
    # shows in the order check's pair alone (test_power's ORDER_FAULTS, case by case).
    for name in [n for n in faults.FAULTS if n not in ORDER_FAULTS]:
        adapter = faults.make(name)
        perf = getattr(adapter, "perf_fault", False)  # rejected by invalid perf records
        outcomes = (run_case(adapter, c, tmp_path / f"{name}-{i}", replace(settings, perf=perf))
                    for i, c in enumerate(cases))
        assert any(o.status is Status.FAILED or (o.perf or {}).get("invalid")
                   for o in outcomes), name  # stops at the first case that rejects it


def test_one_device_one_user_across_processes(tmp_path: Path, monkeypatch) -> None:
    """The runner's device lock: another process holding board 0 keeps us out of board 0,
    not out of board 1; host targets (no lock key) take no lock."""
    import subprocess
    import sys

    import filelock

    from pytest_xtc.core.execution.runner import device_lock

    monkeypatch.setenv("XTC_LOCK_DIR", str(tmp_path))
    holder = (
        "import sys, time\nfrom pytest_xtc.core.execution.runner import device_lock\n"
        "with device_lock('mppa-hw:0'):\n    print('held', flush=True)\n    sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        with pytest.raises(filelock.Timeout):
            device_lock("mppa-hw:0").acquire(timeout=0)
        other = device_lock("mppa-hw:1")
        other.acquire(timeout=0)
        other.release()
    finally:
        proc.communicate("")
    lock = device_lock("mppa-hw:0")
    lock.acquire(timeout=5)  # free again once the holder is gone
    lock.release()
    with device_lock(None):
        pass


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1", "abc"])
def test_a_time_limit_that_is_not_finite_and_positive_is_a_usage_error(
    run: Callable[..., pytest.RunResult], value: str
) -> None:
    result = run("--xtc-target=host", f"--xtc-run-timeout={value}", "--co")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "expected a finite number of seconds > 0" in result.stderr.str()
    assert "Traceback" not in result.stderr.str()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--xtc-target="], "--xtc-target: expected a value, got an empty one"),
        (["--xtc-target=host", "--xtc-report="], "--xtc-report: expected a value"),
        (["--xtc-target=host", "--xtc-cases="], "--xtc-cases: expected a value"),
        (["--xtc-target=host[1]"], "target 'host' has no numbered devices"),
        (["--xtc-target=host", "--xtc-update-expectations=/proc/no/such"],
         "--xtc-update-expectations=/proc/no/such: cannot write there"),
        (["--xtc-target=host", "--xtc-max-case-bytes=0"],
         "--xtc-max-case-bytes: expected an integer >= 1, got '0'"),
        (["--xtc-target=host", "--xtc-repeat=abc"], "--xtc-repeat: expected an integer >= 0"),
        (["--xtc-target=host", "--xtc-seed=1.5"], "--xtc-seed: expected an integer, got '1.5'"),
        (["--xtc-target=host", "--xtc-compile-timeout=-3"],
         "--xtc-compile-timeout: expected a finite number of seconds > 0"),
    ],
)
def test_bad_command_line_values_are_refused_up_front(
    run: Callable[..., pytest.RunResult], args: list[str], message: str
) -> None:
    result = run(*args, "--co")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    said = [line for line in result.stderr.lines if line.strip()]
    assert len(said) == 1 and message in said[0], said  # one line, not argparse's usage block
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
