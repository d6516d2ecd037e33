"""Where users meet the command line and CI: ``--version``, whole help texts, progress on
a terminal only, one table renderer, and the job summary written to
``$GITHUB_STEP_SUMMARY``."""

from __future__ import annotations

import argparse
import io
import tempfile
from pathlib import Path
from typing import Any

import pytest

from pytest_xtc import SUITE_VERSION, __version__, cli
from pytest_xtc.importer import table as importer_table
from pytest_xtc.report import step_summary
from pytest_xtc.report.render import progress, summary
from pytest_xtc.report.render.text import table


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == (
        f"xtc-conformance (pytest-xtc) {__version__}, conformance suite {SUITE_VERSION}")


def test_help_texts_are_whole() -> None:
    parser = cli.build_parser()
    assert parser.description and "compare bundles, and prove the suite's own power" in (
        parser.description)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, command in sub.choices.items():
        if name == "import":  # importer/command.py: its owner's (issue 37) to describe
            continue
        for action in command._actions:
            if not action.option_strings:  # positional arguments
                assert action.help, f"{name} {action.metavar}: no help"
    assert "diff" in sub.choices


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    assert progress.wanted(Tty()) and not progress.wanted(io.StringIO())
    monkeypatch.setenv("CI", "true")
    assert not progress.wanted(Tty())  # CI logs stay quiet
    now = [0.0]
    out = Tty()
    shown = progress.Progress("cases", 10, out, every=5, clock=lambda: now[0], enabled=True)
    for _ in range(4):
        now[0] += 3
        shown.advance()
    assert out.getvalue().splitlines() == [
        "cases: 2 of 10, 6 s, about 24 s left", "cases: 4 of 10, 12 s, about 18 s left"]
    quiet = io.StringIO()
    muted = progress.Progress("cases", 10, quiet, every=0, clock=lambda: now[0])
    muted.advance()
    assert quiet.getvalue() == ""
    assert progress.duration(3700) == "1 h 1 min" and progress.duration(75) == "1 min 15 s"


def test_one_table_renderer() -> None:
    rows = [("a.yaml", "matmul", "1x2", 3), ("a-much-longer-file-name.yaml", "conv2d", "9", 10)]
    lines = importer_table._rows(("file", "op chain", "shape", "count"), rows)
    assert lines == table(("file", "op chain", "shape", "count"),
                          [list(map(str, r)) for r in rows], width=1000).splitlines()
    assert table(["case", ""], [["x", "regression"]]).splitlines()[0].rstrip() == "case"


def test_step_summary_is_appended_when_set(tmp_path: Path) -> None:
    from pytest_xtc.report.parts.model import read_report
    from pytest_xtc.report.parts.records import read_record
    from pytest_xtc.report.rules.verdicts import assemble_report
    from tests.acceptance.test_report import make_report

    data, records = make_report([("a", "passed")])
    report = assemble_report(read_report(data), [read_record(r, "r") for r in records])
    out = tmp_path / "step.md"
    out.write_text("before\n")
    assert step_summary.append(report, {}) is None
    assert step_summary.append(report, {step_summary.VARIABLE: str(out)}) == out
    assert out.read_text() == "before\n" + step_summary.render(report)
    assert step_summary.render(report).startswith(summary.render(report, unused_waivers=False))


def test_the_plugin_writes_the_job_summary(pytester: pytest.Pytester, run: Any,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """With --xtc-report, and without: the same job summary, no temporary bundle left."""
    out = pytester.path / "step-summary.md"
    monkeypatch.setenv(step_summary.VARIABLE, str(out))
    run("--xtc-target=host", "--xtc-report=rep", "-k", "relu-float32-5x7-none")
    text = out.read_text()
    assert text.startswith("# XTC conformance report") and "Unused waivers" not in text
    out.unlink()
    left = set(Path(tempfile.gettempdir()).glob("xtc-job-summary-*"))
    run("--xtc-target=host", "-k", "relu-float32-5x7-none")
    assert out.read_text().partition("## Performance")[0] == text.partition("## Performance")[0]
    assert set(Path(tempfile.gettempdir()).glob("xtc-job-summary-*")) <= left
    monkeypatch.delenv(step_summary.VARIABLE)
    before = out.read_text()
    run("--xtc-target=host", "--xtc-report=rep2", "-k", "relu-float32-5x7-none")
    assert out.read_text() == before  # unchanged
