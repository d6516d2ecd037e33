"""Bundles that cannot lie or get lost: whole-file writes, destinations positively
identified, a failing disk reported in one line, duplicate JSON keys refused, and text for
people that cannot forge lines, cells or escape sequences."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_xtc import cli
from pytest_xtc.report import bundle, verify
from pytest_xtc.report.files import atomic
from pytest_xtc.report.parts.records import CaseRecord, ResultsWriter, sha256_file
from pytest_xtc.report.render import summary
from pytest_xtc.report.render.text import markdown, visible
from pytest_xtc.report.rules.verdicts import assemble
from tests.acceptance.test_report import CASES, make_bundle, make_report
from tests.support import bundles

FULL = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
ONE = "matmul-float32-13x11x7-tile]"  # one case of the suite


def full_disk_for(monkeypatch: pytest.MonkeyPatch, part: str, after: int = 0) -> None:
    """os.write fails with ENOSPC on files whose path holds ``part`` (after ``after``
    bytes, the first of them written)."""
    real = os.write
    budget = {"left": after}

    def write(fd: int, data: Any) -> int:
        name = os.readlink(f"/proc/self/fd/{fd}") if os.path.exists(f"/proc/self/fd/{fd}") else ""
        if part not in name:
            return real(fd, data)
        if budget["left"] <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = real(fd, bytes(data)[: budget["left"]])
        budget["left"] -= n
        return n

    monkeypatch.setattr(os, "write", write)


# -- Whole files ---------------------------------------------------------------------------


def test_a_failed_write_leaves_the_old_file_whole_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "report.json"
    atomic.write_text(target, "old\n")
    full_disk_for(monkeypatch, "/.report.json.", after=3)
    with pytest.raises(OSError, match="No space left on device"):
        atomic.write_text(target, "new and longer\n")
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]
    monkeypatch.undo()
    atomic.write_text(target, "new\n")
    assert target.read_text() == "new\n" and oct(target.stat().st_mode & 0o777) == "0o644"


def test_results_keep_whole_lines_when_the_disk_fills(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = ResultsWriter(tmp_path)
    writer.write(CaseRecord(target="t", case="a", status="passed"))
    full_disk_for(monkeypatch, "results.jsonl", after=10)  # half of the next line
    with pytest.raises(OSError, match="No space left on device"):
        writer.write(CaseRecord(target="t", case="b", status="passed"))
    monkeypatch.undo()
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert [json.loads(x)["case"] for x in lines] == ["a"] and writer.written == 1


def test_a_bundle_write_failure_names_the_file_and_what_was_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    where = tmp_path / "b"
    report, records = make_report([(c, "passed") for c in CASES])
    bundle.prepare(where)
    full_disk_for(monkeypatch, f"/.{bundle.SUMMARY}.")
    with pytest.raises(bundle.WriteError) as caught:
        bundle.finish(where, assemble(report, records), records)
    monkeypatch.undo()
    line = bundle.failure_text(caught.value, len(records), len(records), "--xtc-report=b")
    assert line == (
        f"writing {where}/summary.md failed: No space left on device; kept: results.jsonl "
        f"({len(records)} results), report.json; not written: summary.md, MANIFEST.sha256 "
        "(the bundle is incomplete); rerun with --xtc-report=b once the cause is fixed "
        "(the unfinished bundle is replaced)"
    )
    assert "incomplete bundle" in verify.verify(where)[0]
    make_bundle(where, [(c, "passed") for c in CASES])  # the unfinished bundle is replaced
    assert verify.verify(where) == [] and not (where / bundle.UNFINISHED).exists()


# -- Destinations ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("files", "problem"),
    [
        ({"results.jsonl": "{}\n"}, "results.jsonl without the report.json and MANIFEST.sha256"),
        ({"report.json": "{}", "MANIFEST.sha256": ""}, "MANIFEST.sha256, report.json without"),
        ({"notes.txt": "mine"}, "'notes.txt' not written by pytest-xtc"),
    ],
    ids=["lone-results", "foreign-report", "foreign-file"],
)
def test_a_directory_with_files_not_written_here_is_refused(
    tmp_path: Path, files: dict[str, str], problem: str
) -> None:
    where = tmp_path / "mine"
    where.mkdir()
    for name, text in files.items():
        (where / name).write_text(text)
    with pytest.raises(bundle.BundleError) as caught:
        bundle.prepare(where)
    message = str(caught.value)
    assert message.startswith(f"{where} is not empty and holds no XTC conformance bundle (")
    assert problem in message and "\n" not in message
    assert {p.name: p.read_text() for p in where.iterdir()} == files  # untouched


def test_a_bundle_with_a_file_added_or_unlisted_is_not_replaced(tmp_path: Path) -> None:
    where = tmp_path / "b"
    make_bundle(where, [(c, "passed") for c in CASES])
    (where / "thesis.tex").write_text("...")
    with pytest.raises(bundle.BundleError, match=r"'thesis\.tex' not written by pytest-xtc"):
        bundle.check_destination(where)
    (where / "thesis.tex").unlink()
    lines = (where / bundle.MANIFEST).read_text().splitlines()
    (where / bundle.MANIFEST).write_text("".join(f"{x}\n" for x in lines if "summary" not in x))
    with pytest.raises(bundle.BundleError, match=r"without the report\.json and MANIFEST"):
        bundle.check_destination(where)
    (where / "link").symlink_to(tmp_path)
    with pytest.raises(bundle.BundleError, match="'link' not written by pytest-xtc"):
        bundle.check_destination(where)


def test_own_bundles_finished_or_not_are_replaced(tmp_path: Path) -> None:
    where = tmp_path / "b"
    make_bundle(where, [(c, "failed") for c in CASES])
    (where / "shrunk").mkdir()  # xtc-conformance shrink writes its case files there
    bundle.check_destination(where)
    bundle.prepare(where)  # an unfinished bundle: the mark and no file yet
    assert sorted(p.name for p in where.iterdir()) == [bundle.UNFINISHED, "shrunk"]
    (where / bundle.RESULTS).write_text("{}\n")  # a run that stopped after one result
    bundle.check_destination(where)


# -- Duplicate keys -------------------------------------------------------------------------


def _resum(where: Path) -> None:
    names = [line.split("  ")[1] for line in (where / bundle.MANIFEST).read_text().splitlines()]
    (where / bundle.MANIFEST).write_text("".join(f"{sha256_file(where / n)}  {n}\n" for n in names))


@pytest.mark.parametrize("name", [bundle.REPORT, bundle.RESULTS])
def test_json_with_a_duplicate_key_is_refused(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    where = tmp_path / "b"
    make_bundle(where, [(c, "passed") for c in CASES])
    assert cli.main(["verify", str(where)]) == 0
    path = where / name
    text = path.read_text()
    if name == bundle.REPORT:  # a reader taking the first "certifies" sees another claim
        path.write_text(text.replace("{", '{\n "certifies": true,', 1))
        where_said, first = "report.json:7", 2  # the key inserted on line 2, then its own
        key = "certifies"
    else:
        lines = text.splitlines()
        lines[1] = lines[1].replace('{"case"', '{"status": "failed", "case"', 1)
        path.write_text("\n".join(lines) + "\n")
        where_said, first, key = "results.jsonl:2", 2, "status"
    _resum(where)
    capsys.readouterr()
    assert cli.main(["verify", str(where)]) == 3
    err = capsys.readouterr().err
    assert err == (
        f"{where}: refused: {where_said}: duplicate JSON key {key!r} (first at line {first}; "
        "readers disagree on which value counts); the file was altered, rewrite it\n"
    )
    with pytest.raises(bundle.BundleError, match="duplicate JSON key"):
        bundles.load(where)


def test_a_manifest_naming_a_file_twice_is_refused(tmp_path: Path) -> None:
    where = tmp_path / "b"
    make_bundle(where, [(c, "passed") for c in CASES])
    text = (where / bundle.MANIFEST).read_text()
    (where / bundle.MANIFEST).write_text(text + text.splitlines()[0] + "\n")
    line = len(text.splitlines()) + 1
    assert verify.verify(where) == [f"MANIFEST.sha256: line {line} lists results.jsonl twice"]


# -- Text for people ------------------------------------------------------------------------

HOSTILE = "evil\n| x | y |\r\x1b[2J`code` *b* [l](http://x) <b>&#x202E; \u202eabc \u2028z"


def test_visible_and_markdown_keep_hostile_text_on_one_harmless_line() -> None:
    shown = visible(HOSTILE)
    assert shown == ("evil⏎| x | y |\\r\\x1b[2J`code` *b* [l](http://x) <b>&#x202E; "
                     "\\u202eabc \\u2028z")
    assert shown.isprintable()
    assert markdown(HOSTILE) == (
        "evil⏎\\| x \\| y \\|\\\\r\\\\x1b\\[2J\\`code\\` \\*b\\* \\[l\\](http://x) "
        "\\<b\\>\\&#x202E; \\\\u202eabc \\\\u2028z"
    )
    assert visible("plain text: 1.5x, a-b_c") == "plain text: 1.5x, a-b_c"


def test_summary_md_gives_hostile_names_no_line_cell_or_markup(tmp_path: Path) -> None:
    def render(name: str) -> str:
        report, records = make_report([(c, "passed") for c in CASES], target=name)
        report["waivers"] = [{"id": name, "reason": name, "url": f"https://x/{name}",
                              "pattern": "no-such-case", "xtc": "<=0.3.2"}]
        return summary.render(assemble(report, records))

    plain, text = render("t"), render(HOSTILE)
    assert len(text.splitlines()) == len(plain.splitlines())  # no line of its own
    assert all(line.isprintable() for line in text.split("\n"))  # no control, no bidi
    header = next(x for x in text.splitlines() if x.startswith("| target |"))
    row = next(x for x in text.splitlines() if x.startswith("| evil"))
    cells = row.replace("\\|", "").count("|")
    assert cells == header.count("|")  # no cell of its own
    assert "- evil⏎\\| x" in text  # the unused waiver, escaped (no code span to break)


BABBLER = '''
from pytest_xtc.targets.host import HostTarget

class Babbler(HostTarget):
    def compile(self, *args, **kwargs):
        raise RuntimeError("\\x1b[2J\\x1b[32mboom\\n===== 552 passed in 1.00s =====\\r\\u202e")
'''


def test_a_hostile_failure_message_reaches_the_terminal_escaped(
    vendor: Any, run: Any, pytester: pytest.Pytester
) -> None:
    vendor("babbler_xtc", {"babbler": "babbler:Babbler"}, {"babbler": BABBLER})
    result = run("--xtc-target=babbler", "-k", ONE, "--junitxml=j.xml", "--xtc-report=rep")
    assert result.ret == 1
    out = result.stdout.str()
    assert "\x1b" not in out and "\u202e" not in out and "\r" not in out
    assert not [line for line in out.splitlines() if line.startswith("===== 552 passed")]
    assert "\\x1b[2J\\x1b[32mboom⏎===== 552 passed in 1.00s =====\\r\\u202e" in out
    assert "\x1b" not in (pytester.path / "j.xml").read_text()
    assert cli.main(["verify", str(pytester.path / "rep")]) == 0


# -- A disk that fills during a real run -----------------------------------------------------

INJECT = '''
import errno, os

_real = os.write

def _write(fd, data):
    link = f"/proc/self/fd/{fd}"
    name = os.readlink(link) if os.path.exists(link) else ""
    if "/rep/" in name and "{part}" in name:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return _real(fd, data)

os.write = _write
'''


@pytest.mark.parametrize(
    ("part", "kept"),
    [
        (".report.json.", "kept: results.jsonl (1 result); not written: report.json, "
         "summary.md, MANIFEST.sha256"),
        ("results.jsonl", "kept: nothing; not written: results.jsonl, report.json, "
         "summary.md, MANIFEST.sha256"),
    ],
    ids=["report-json", "results-jsonl"],
)
def test_a_full_disk_stops_the_bundle_with_one_line(
    pytester: pytest.Pytester, run: Any, part: str, kept: str
) -> None:
    pytester.makeconftest(INJECT.replace("{part}", part))
    result = run("--xtc-target=host", "--xtc-report=rep", "-k", ONE)
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    assert "INTERNALERROR" not in out + result.stderr.str() and "Traceback" not in out
    result.assert_outcomes(passed=1)  # the case's own result stands
    result.stdout.fnmatch_lines(["host*1*0*0*0*0*0"])  # and the summary table printed
    failed = "rep/report.json" if part.startswith(".") else "rep/results.jsonl"
    line = next(x for x in out.splitlines() if x.startswith("xtc report: "))
    assert line == (
        f"xtc report: writing {pytester.path}/{failed} failed: No space left on device; "
        f"{kept} (the bundle is incomplete); rerun with --xtc-report=rep once the cause is "
        "fixed (the unfinished bundle is replaced)"
    )
    assert (pytester.path / "rep" / bundle.UNFINISHED).is_file()
    (pytester.path / "conftest.py").unlink()
    again = run("--xtc-target=host", "--xtc-report=rep", "-k", ONE)
    assert again.ret == 0 and cli.main(["verify", str(pytester.path / "rep")]) == 0


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs (root only): room for a few results, not for report.json."""
    where = tmp_path / "small"
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)],
                          capture_output=True, text=True, check=False)
    if done.returncode:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


def test_a_really_full_tmpfs_stops_the_bundle_with_one_line(
    run: Any, small_disk: Path
) -> None:
    result = run("--xtc-target=host", f"--xtc-report={small_disk}/rep", "-k", ONE)
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    result.assert_outcomes(passed=1)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines([
        f"xtc report: writing {small_disk}/rep/report.json failed: No space left on device; "
        "kept: results.jsonl (1 result); not written: report.json, summary.md, "
        "MANIFEST.sha256 (the bundle is incomplete); rerun with *"
    ])
    assert sorted(p.name for p in (small_disk / "rep").iterdir()) == [
        bundle.UNFINISHED, bundle.RESULTS]
    assert "incomplete bundle" in verify.verify(small_disk / "rep")[0]
