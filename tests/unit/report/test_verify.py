"""Every failure charged to whom it belongs: an error in pytest's own set-up phase (its
temporary folder gone, a full disk, a fixture that raised) is the machinery's, an
infrastructure error, never a verdict on the target; ``verify`` refuses a bundle claiming
``failed`` for a case whose record says the machinery failed. Before, such cases were
recorded FAILED against the target and the bundle verified."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_xtc.report import bundle, verify
from pytest_xtc.report.rules.verdicts import assemble
from tests.acceptance.test_report import CASES, make_report

FIRST = next(iter(CASES))


def write(where: Path, status: str, phase: str) -> None:
    report, records = make_report([(c, "passed") for c in CASES])
    records[0].update(status=status, phase=phase, message="FileNotFoundError: gone")
    bundle.prepare(where)
    bundle.finish(where, assemble(report, records), records)


def test_verify_refuses_failed_where_the_machinery_failed(tmp_path: Path) -> None:
    write(tmp_path / "claimed", "failed", "pytest-setup")  # every figure consistent
    problems = verify.verify(tmp_path / "claimed")
    assert len(problems) == 1 and "machinery failed" in problems[0], problems
    assert FIRST in problems[0] and "\n" not in problems[0]


@pytest.mark.parametrize(("status", "phase"), [("error", "pytest-setup"), ("failed", "run")])
def test_verify_takes_an_infrastructure_error_and_a_targets_failure(
        tmp_path: Path, status: str, phase: str) -> None:
    write(tmp_path / "b", status, phase)
    assert verify.verify(tmp_path / "b") == []


CONFTEST = '''
import pytest


@pytest.fixture(autouse=True)
def machinery_breaks(request):
    if "relu-float32-5x7-none-exact" in request.node.nodeid:
        raise FileNotFoundError(2, "No such file or directory", "/tmp/pytest-of-someone")
'''


def test_an_error_in_pytests_set_up_is_an_infrastructure_error(pytester) -> None:
    pytester.makeconftest(CONFTEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--xtc-target=host",
                                           "--xtc-report=rep", "-k", "relu-float32-5x7-none")
    assert result.ret != 0  # the run says so
    records = [json.loads(line) for line in
               (pytester.path / "rep" / bundle.RESULTS).read_text().splitlines()]
    broken = [r for r in records if r["case"] == "relu-float32-5x7-none-exact"]
    assert len(broken) == 1 and broken[0]["status"] == "error", broken
    assert broken[0]["phase"] == "pytest-setup"
    others = [r["status"] for r in records if r is not broken[0]]
    assert others and set(others) == {"passed"}, records
    done = subprocess.run([sys.executable, "-m", "pytest_xtc.cli", "verify",
                           str(pytester.path / "rep")], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
