"""A run killed while its bundle is finalised (SIGKILL, or a cancelled CI job) leaves only
files the next run recognises as its own and replaces; ``verify`` refuses the half bundle
in one line. Before, a kill while the ``.xtc-unfinished`` mark was written left
``..xtc-unfinished.<random>.tmp``, and the same command run again refused the folder
("not written by pytest-xtc"); a kill after the manifest, before the mark was removed,
left a bundle that verified."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_xtc.report import bundle, verify
from pytest_xtc.report.rules.verdicts import assemble
from tests.acceptance.test_report import CASES, make_bundle, make_report

#: A process that writes a bundle and is killed (SIGKILL, by itself) as the rename of the
#: file named on its command line is about to happen: that file's temporary is left.
KILLED = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from pytest_xtc.report import bundle
    from pytest_xtc.report.rules.verdicts import assemble
    from tests.acceptance.test_report import CASES, make_report

    where, victim, stage = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    replace, unlink = os.replace, Path.unlink

    def killed_at_replace(source, target):
        if Path(target).name == victim:
            os.kill(os.getpid(), signal.SIGKILL)
        replace(source, target)

    def killed_at_unlink(self, *args, **kwargs):
        if self.name == victim:
            os.kill(os.getpid(), signal.SIGKILL)
        unlink(self, *args, **kwargs)

    if stage == "mark removed":
        Path.unlink = killed_at_unlink
    else:
        os.replace = killed_at_replace
    report, records = make_report([(c, "passed") for c in CASES])
    bundle.prepare(where)
    bundle.finish(where, assemble(report, records), records)
""")

STAGES = {  # where the kill comes: (the file, what the run was doing)
    "marking": (bundle.UNFINISHED, "mark written"),
    "manifest": (bundle.MANIFEST, "mark written"),
    "unmarking": (bundle.UNFINISHED, "mark removed"),
}


def killed_while_finalising(where: Path, stage: str) -> None:
    victim, when = STAGES[stage]
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, "-c", KILLED, str(where), victim, when],
                          capture_output=True, text=True, timeout=120, check=False, cwd=root)
    assert done.returncode == -9, done.stderr[-800:]


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_a_bundle_killed_while_finalised_is_recognised_and_replaced(tmp_path: Path,
                                                                     stage: str) -> None:
    where = tmp_path / "bundle"
    if stage == "marking":  # a finished bundle there before, replaced by the killed run
        make_bundle(where, [(c, "failed") for c in CASES])
    killed_while_finalising(where, stage)
    left = sorted(p.name for p in where.iterdir())
    if stage != "unmarking":
        assert any(n.endswith(".tmp") for n in left), left  # the kill left a temporary
    bundle.check_destination(where)  # the next run takes it as its own
    report, records = make_report([(c, "passed") for c in CASES])
    bundle.prepare(where)
    bundle.finish(where, assemble(report, records), records)
    assert verify.verify(where) == []
    assert not any(n.endswith(".tmp") or n == bundle.UNFINISHED for n in
                   (p.name for p in where.iterdir()))


@pytest.mark.parametrize("stage", ["manifest", "unmarking"])
def test_verify_refuses_a_half_finalised_bundle_in_one_line(tmp_path: Path,
                                                            stage: str) -> None:
    where = tmp_path / "bundle"
    killed_while_finalising(where, stage)
    problems = verify.verify(where)
    assert len(problems) == 1 and "\n" not in problems[0], problems
    expected = "unfinished bundle" if stage == "unmarking" else "incomplete bundle"
    assert expected in problems[0] and "rerun" in problems[0], problems


def test_a_finished_bundle_verifies_and_holds_no_mark(tmp_path: Path) -> None:
    where = tmp_path / "bundle"
    make_bundle(where, [(c, "passed") for c in CASES])
    assert verify.verify(where) == []
    assert json.loads((where / bundle.REPORT).read_text())["kind"] == bundle.KIND
    assert not (where / bundle.UNFINISHED).exists()
