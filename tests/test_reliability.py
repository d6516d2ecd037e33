"""One session holding every kind of trouble an adapter or a kernel can make ends by itself,
with every other result kept, each cause named, a bundle that verifies and no process left
behind; a real Ctrl-C stops it with pytest's status 2 and an "interrupted" bundle."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

CHAOS = """
import subprocess, sys, time
from pytest_xtc.targets.host import HostTarget

MARK = {mark!r}

class Chaos(HostTarget):
    def compile(self, case, workdir):
        artifact = super().compile(case, workdir)
        artifact.notes["case"] = case.id
        return artifact

    def run(self, artifact, inputs, outputs, timing=None):
        case = artifact.notes["case"]
        if case == "relu-float32-5x7-none":
            import ctypes
            ctypes.string_at(0)
        if case == "matmul-float32-13x11x7-none":
            while True:
                time.sleep(60)
        if case == "relu-float32-5x7-tile":
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", MARK])
            while True:
                time.sleep(60)
        if case == "relu-float32-5x7-vectorize":
            raise SystemExit(3)
        return super().run(artifact, inputs, outputs)


class HangsAfterFirst(HostTarget):
    def compile(self, case, workdir):
        artifact = super().compile(case, workdir)
        artifact.notes["case"] = case.id
        return artifact

    def run(self, artifact, inputs, outputs, timing=None):
        if artifact.notes["case"] != "matmul-float32-13x11x7-none":
            while True:
                time.sleep(60)
        return super().run(artifact, inputs, outputs)


class StuckProbe(HostTarget):
    def probe(self):
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", MARK])
        while True:
            time.sleep(60)
"""

SELECT = "(relu-float32-5x7 or matmul-float32-13x11x7) and not exact"


def selected_count() -> int:
    """How many built-in cases SELECT picks (the catalog's schedules may grow)."""
    from pytest_xtc.conformance import builtin_cases

    return sum(c.values == "random" and c.key.startswith(("relu-float32-5x7-",
                                                          "matmul-float32-13x11x7-"))
               for c in builtin_cases())


CASES = selected_count()


def leftovers(*marks: str) -> list[str]:
    """Processes whose command line holds one of ``marks``, this test's own excepted."""
    found = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    me = {str(os.getpid())}
    return [line for line in found if any(m in line for m in marks)
            and line.split()[0] not in me and "ps -eo" not in line]


def gone(*marks: str, within: float = 10.0) -> list[str]:
    deadline = time.monotonic() + within
    while (left := leftovers(*marks)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["no-xdist", "xdist-2"])
def test_every_kind_of_trouble_in_one_session(vendor, run, pytester, workers) -> None:
    mark = f"xtc-chaos-{os.getpid()}-{len(workers)}"
    vendor("chaos_xtc", {"chaos": "chaos_adapter:Chaos", "stuck": "chaos_adapter:StuckProbe"},
           {"chaos_adapter": CHAOS.format(mark=mark)})
    start = time.monotonic()
    result = run("--xtc-target=chaos,stuck", "-k", SELECT, "--xtc-run-timeout=3",
                 "--xtc-probe-timeout=3", "--xtc-report=bundle", *workers)
    elapsed = time.monotonic() - start
    out = result.stdout.str()
    assert result.ret == 1, out
    result.assert_outcomes(passed=CASES - 4, failed=4, skipped=CASES)
    assert "killed by signal SIGSEGV" in out
    assert out.count("timed out: run exceeded its 3 s limit") >= 2
    assert "run raised SystemExit: 3" in out
    assert "probe timed out after 3 s" in out
    assert elapsed < 120
    records = [json.loads(line)
               for line in (pytester.path / "bundle" / "results.jsonl").read_text().splitlines()]
    assert len(records) == 2 * CASES
    assert {r["status"] for r in records if r["target"] == "stuck"} == {"skipped"}
    verify = subprocess.run([sys.executable, "-m", "pytest_xtc.cli", "verify",
                             str(pytester.path / "bundle")], capture_output=True, text=True,
                            timeout=120, check=False)
    assert verify.returncode == 0, verify.stderr
    assert not gone(mark, str(pytester.path)), "processes left behind"


def test_ctrl_c_stops_the_session_with_status_2_and_an_interrupted_bundle(
    vendor, pytester
) -> None:
    mark = f"xtc-chaos-int-{os.getpid()}"
    vendor("chaos_xtc", {"slow": "chaos_adapter:HangsAfterFirst"},
           {"chaos_adapter": CHAOS.format(mark=mark)})
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--xtc-target=slow",
         "-k", "matmul-float32-13x11x7 and not exact", "--xtc-run-timeout=60",
         "--xtc-report=bundle"],
        cwd=pytester.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, text=True,
    )
    results = pytester.path / "bundle" / "results.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait until a case has finished before the hang
        if results.is_file() and results.read_text().count("\n") >= 1:
            break
        time.sleep(0.2)
    time.sleep(2)  # the hanging case is now in its run
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2, out
    assert "KeyError" not in out and "INTERNALERROR" not in out, out
    verify = subprocess.run([sys.executable, "-m", "pytest_xtc.cli", "verify",
                             str(pytester.path / "bundle")], capture_output=True, text=True,
                            timeout=120, check=False)
    said = verify.stdout + verify.stderr
    assert "interrupted" in said, said
    assert "run interrupted (KeyboardInterrupt)" in said, said
    assert not re.search(r": conformant", said), said
    assert not gone(mark, str(pytester.path)), "processes left behind"


def test_a_second_writer_of_one_report_directory_is_refused(pytester) -> None:
    from pytest_xtc.plugin.bundle_guard import writer_lock

    lock = writer_lock(pytester.path / "bundle")
    try:
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--xtc-target=host",
                                               "--xtc-report=bundle", "--co")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        assert "another run is writing this bundle now" in result.stderr.str()
    finally:
        lock.release()
