"""Inputs refused by kind before they are read, and keys given twice refused: a FIFO, a
device or a folder where a case, expectation, waiver, bundle or id-list file is expected is
a one-line error at once (opening a FIFO used to wait forever); a YAML or JSON mapping
naming a key twice is a one-line error naming the file, the key and the line (the last
value used to win silently); YAML or JSON nested deeper than 64 levels is a one-line error
at once (a case file of nested brackets held collection for hours)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from pytest_xtc import cli
from pytest_xtc.core.cases import case as cases
from pytest_xtc.core.cases import expectations
from pytest_xtc.core.cases.case import CaseFileError
from pytest_xtc.core.cases.unique_keys import MAX_DEPTH, TooDeep, load_yaml, loads_json
from pytest_xtc.report import bundle
from pytest_xtc.report.rules.waivers import WaiverFileError, load_waivers
from tests import ROOT
from tests.acceptance.test_report import CASES, make_bundle
from tests.support import bundles
from tests.unit.core.cases.test_casefile import matmul

pytestmark = pytest.mark.timeout(60)  # a reader blocked on a FIFO fails, not hangs


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def fast(call: Callable[[], object], error: type[Exception], *needles: str) -> str:
    """``call()`` raises ``error`` within 2 s, with a one-line message holding ``needles``."""
    start = time.monotonic()
    with pytest.raises(error) as info:
        call()
    assert time.monotonic() - start < 2
    message = str(info.value)
    assert "\n" not in message, message
    for needle in needles:
        assert needle in message, message
    return message


# -- kind ------------------------------------------------------------------------------


def test_a_fifo_in_a_cases_folder_is_refused_at_once(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(matmul()))
    named = fifo(tmp_path / "b.yaml")
    fast(lambda: cases.load_case_paths([tmp_path]), CaseFileError, str(named), "FIFO")


def test_a_fifo_named_as_the_case_file_is_refused(tmp_path: Path) -> None:
    named = fifo(tmp_path / "b.yaml")
    fast(lambda: cases.load_case_paths([named]), CaseFileError, str(named), "FIFO")


def test_a_folder_named_like_a_case_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "d.yaml").mkdir()
    fast(lambda: cases.load_case_file(tmp_path / "d.yaml"), CaseFileError, "a directory")


def test_a_device_as_a_case_file_is_refused() -> None:
    fast(lambda: cases.load_case_file(Path("/dev/zero")), CaseFileError, "character device")


def test_a_fifo_as_an_expectation_file_is_refused(tmp_path: Path) -> None:
    named = fifo(tmp_path / "x.expectations.yaml")
    fast(lambda: expectations.load(named), expectations.ExpectationFileError, str(named), "FIFO")


def test_a_fifo_as_the_waiver_file_is_refused(tmp_path: Path) -> None:
    named = fifo(tmp_path / "waivers.yaml")
    fast(lambda: load_waivers(named), WaiverFileError, str(named), "FIFO")


@pytest.mark.parametrize("name", [bundle.REPORT, bundle.RESULTS, bundle.MANIFEST])
def test_a_fifo_in_a_bundle_is_refused(tmp_path: Path, name: str,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    where = tmp_path / "b"
    make_bundle(where, [(c, "passed") for c in CASES])
    (where / name).unlink()
    fifo(where / name)
    start = time.monotonic()
    assert cli.main(["verify", str(where)]) != 0
    assert time.monotonic() - start < 5
    err = capsys.readouterr().err
    assert "regular file" in err, err


def test_the_xtc_case_id_list_may_not_be_a_fifo(tmp_path: Path) -> None:
    """``--xtc-case=@FIFO``: a usage error at once, one line, exit 4."""
    named = fifo(tmp_path / "ids")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
         f"--xtc-case=@{named}", "--xtc-target=host"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )
    assert done.returncode == 4, done.stdout + done.stderr
    said = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(said) == 1 and "FIFO" in said[0], done.stderr


def usage_line(folder: Path) -> str:
    """The one line a session given ``--xtc-cases=folder`` (alone) says, exit 4 checked."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
         f"--xtc-cases={folder}", "--xtc-only-cases", "--xtc-target=host"],
        capture_output=True, text=True, timeout=60, cwd=folder.parent,
    )
    assert done.returncode == 4, done.stdout + done.stderr
    said = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(said) == 1, done.stderr
    return said[0]


def test_a_session_given_a_fifo_case_ends_at_once_with_a_usage_error(tmp_path: Path) -> None:
    """The hang of the issue: ``--xtc-cases`` on a folder holding a FIFO named b.yaml."""
    folder = tmp_path / "cases"
    folder.mkdir()
    named = fifo(folder / "b.yaml")
    said = usage_line(folder)
    assert str(named) in said and "FIFO" in said, said


def test_a_cases_folder_holding_no_case_file_is_a_usage_error(tmp_path: Path) -> None:
    """The wrong folder, or one the CI did not fill: with ``--xtc-only-cases`` it ran
    nothing and exited 0 ("got empty parameter set"); now a one-line error, exit 4."""
    folder = tmp_path / "cases"
    folder.mkdir()
    (folder / "notes.txt").write_text("not a case file")
    assert f"{folder}: no case file" in usage_line(folder)


# -- duplicate keys ----------------------------------------------------------------------


def test_a_case_file_naming_dtypes_twice_is_refused(tmp_path: Path) -> None:
    text = yaml.safe_dump(matmul()) + "dtypes: [float32]\ndtypes: [float64]\n"
    path = tmp_path / "twice.yaml"
    path.write_text(text)
    line = len(text.splitlines())
    fast(lambda: cases.load_case_paths([path]), CaseFileError,
         f"{path}:{line}:", "'dtypes'", "twice", f"first at line {line - 1}")


def test_a_key_twice_deep_in_a_case_file_is_refused(tmp_path: Path) -> None:
    data = matmul()
    text = yaml.safe_dump(data).replace("  name: ", "  name: x\n  name: ", 1)
    path = tmp_path / "deep.yaml"
    path.write_text(text)
    fast(lambda: cases.load_case_paths([path]), CaseFileError, str(path), "'name'", "twice")


def test_a_flow_mapping_naming_a_key_twice_is_refused(tmp_path: Path) -> None:
    text = yaml.safe_dump(matmul()) + "error_rule: {c: 1, c: 100}\n"
    path = tmp_path / "flow.yaml"
    path.write_text(text)
    fast(lambda: cases.load_case_paths([path]), CaseFileError, "'c'", "twice")


def test_an_expectation_entry_naming_a_key_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.expectations.yaml"
    path.write_text("- pattern: relu-*\n  phase: run\n  reason: r\n  url: u\n"
                    "- pattern: matmul-*\n  phase: run\n  phase: compile\n  reason: r\n  url: u\n")
    fast(lambda: expectations.load(path), expectations.ExpectationFileError,
         f"{path}:7:", "'phase'", "first at line 6")


def test_a_waiver_naming_a_key_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "waivers.yaml"
    path.write_text("- id: w1\n  pattern: relu-*\n  pattern: '*'\n  xtc: '<=0.3.2'\n"
                    "  reason: r\n  url: u\n")
    fast(lambda: load_waivers(path), WaiverFileError, f"{path}:3:", "'pattern'")


def test_distinct_mappings_may_share_keys(tmp_path: Path) -> None:
    """The real host's check: a case file whose nodes repeat keys across mappings loads."""
    path = tmp_path / "ok.yaml"
    path.write_text(yaml.safe_dump(matmul()))
    assert cases.load_case_paths([path])


def test_a_bundle_json_naming_a_key_twice_names_the_line(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    where = tmp_path / "b"
    make_bundle(where, [(c, "passed") for c in CASES])
    lines = (where / bundle.RESULTS).read_text().splitlines()
    lines[2] = lines[2].replace('{"case"', '{"status": "failed", "case"', 1)
    (where / bundle.RESULTS).write_text("\n".join(lines) + "\n")
    with pytest.raises(bundle.BundleError) as info:
        bundles.load(where)
    assert f"{bundle.RESULTS}:3:" in str(info.value) and "'status'" in str(info.value)


# -- nesting -----------------------------------------------------------------------------

DEEP = 100_000  # PyYAML's own parser took hours on this many nested brackets
FLOW = "[" * DEEP + "]" * DEEP


def block(levels: int) -> str:
    """A mapping nested ``levels`` deep in block style (indentation)."""
    return "".join(" " * n + f"k{n}:\n" for n in range(levels)) + " " * levels + "v\n"


def test_a_case_file_nested_deep_in_brackets_is_refused_at_once(tmp_path: Path) -> None:
    """The hang: a 200 kB case file of nested brackets held collection for hours."""
    path = tmp_path / "deep.yaml"
    path.write_text(yaml.safe_dump(matmul()) + "error_rule: " + FLOW + "\n")
    fast(lambda: cases.load_case_paths([path]), CaseFileError, str(path),
         "nested deeper than 64 levels")


def test_a_session_given_a_deeply_nested_case_file_ends_with_a_usage_error(
        tmp_path: Path) -> None:
    folder = tmp_path / "cases"
    folder.mkdir()
    (folder / "deep.yaml").write_text(FLOW + "\n")
    said = usage_line(folder)
    assert "deep.yaml" in said and "nested deeper than 64 levels at line 1" in said, said


def test_a_case_file_nested_deep_in_blocks_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "blocks.yaml"
    path.write_text(yaml.safe_dump(matmul()) + "error_rule:\n" + block(70).replace("\n", "\n "))
    fast(lambda: cases.load_case_paths([path]), CaseFileError, "nested deeper than 64 levels")


def test_brackets_in_strings_and_comments_nest_nothing(tmp_path: Path) -> None:
    """The real host's check: brackets a case file quotes or comments out are no nesting."""
    path = tmp_path / "quoted.yaml"
    path.write_text(f"# {'[' * 100}\n" + yaml.safe_dump(matmul()))
    assert cases.load_case_paths([path])
    assert loads_json('{"a": "' + "[" * 100 + '"}', "x") == {"a": "[" * 100}
    nested = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert load_yaml(nested, "x") is not None and loads_json(nested, "x") is not None


def test_nesting_one_past_the_limit_is_refused_in_yaml_and_json() -> None:
    nested = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)
    for load in (load_yaml, loads_json):
        with pytest.raises(TooDeep, match="nested deeper than 64 levels at line 1"):
            load(nested, "x")
    with pytest.raises(TooDeep, match="at line 65"):
        load_yaml(block(70), "x")


def test_an_expectation_file_nested_deep_is_refused_at_once(tmp_path: Path) -> None:
    path = tmp_path / "t.expectations.yaml"
    path.write_text("- pattern: relu-*\n  reason: " + FLOW + "\n")
    fast(lambda: expectations.load(path), expectations.ExpectationFileError, str(path),
         "nested deeper than 64 levels")


def test_a_waiver_file_nested_deep_is_refused_at_once(tmp_path: Path) -> None:
    path = tmp_path / "waivers.yaml"
    path.write_text("- id: w1\n  reason: " + FLOW + "\n")
    fast(lambda: load_waivers(path), WaiverFileError, str(path), "nested deeper than 64")


def test_json_nested_deep_is_a_value_error_not_a_recursion(tmp_path: Path) -> None:
    """json's parser ended in a RecursionError, which no reader's ``except ValueError``
    caught (pack results, kept plans): now a ValueError naming the line."""
    fast(lambda: loads_json('{"a": 1,\n"b": ' + FLOW + "}", "f.json"), ValueError,
         "nested deeper than 64 levels at line 2")


# -- a target name registered twice ------------------------------------------------------


def one_error_line(result: pytest.RunResult) -> str:
    said = [line for line in result.stderr.lines if line.strip()]
    assert len(said) == 1, result.stdout.str() + result.stderr.str()
    return said[0]


def test_a_second_distribution_registering_host_is_refused(vendor, run) -> None:
    """Even for the same class: which one would win depends on sys.path order."""
    vendor("evil_host", {"host": "pytest_xtc.targets.host:HostTarget"})
    result = run("--xtc-target=host", "--collect-only", "-q")
    assert result.ret == 4
    line = one_error_line(result)
    for needle in ("'host' is registered twice", "pytest-xtc", "evil_host",
                   "pip uninstall evil_host", "pip uninstall pytest-xtc"):
        assert needle in line, line


def test_two_distributions_registering_one_name_for_different_classes(vendor, run) -> None:
    vendor("twin_a", {"twin": "twin_a_mod:A"}, {"twin_a_mod": "class A: pass\n"})
    vendor("twin_b", {"twin": "twin_b_mod:B"}, {"twin_b_mod": "class B: pass\n"})
    result = run("--xtc-target=host", "--collect-only", "-q")
    assert result.ret == 4
    line = one_error_line(result)
    assert "'twin' is registered twice" in line and "twin_a_mod:A" in line, line
    assert "twin_b_mod:B" in line, line
    script = Path(sys.executable).with_name("xtc-conformance")
    done = subprocess.run([str(script), "list"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "'twin' is registered twice" in done.stderr


def test_distinct_names_of_one_class_are_no_duplicate(vendor, run) -> None:
    """The real host's check: one class under two names (as mppa-iss, mppa-hw) loads."""
    vendor("alias", {"host-alias": "pytest_xtc.targets.host:HostTarget"})
    result = run("--xtc-target=host", "--collect-only", "-q", "--xtc-case=relu-float32-5x7-tile")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()


# -- usage errors under pytest: one line, exit 4 ---------------------------------------------


def usage_error(run: Callable[..., pytest.RunResult], *args: str) -> str:
    result = run(*args)
    assert result.ret == 4, result.stdout.str() + result.stderr.str()
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out and "Traceback" not in out, out
    return one_error_line(result)


def test_an_unknown_case_id_is_one_usage_line(run) -> None:
    line = usage_error(run, "--xtc-target=host", "--xtc-case=no-such-case", "-q")
    assert "--xtc-case" in line and "no-such-case" in line, line


def test_a_report_under_a_regular_file_is_one_usage_line(run, pytester) -> None:
    (pytester.path / "plain").write_text("x")
    line = usage_error(run, "--xtc-target=host", "--xtc-report=plain/rep", "--collect-only")
    assert "--xtc-report" in line and "plain" in line and "not a directory" in line, line


def test_an_uncreatable_report_names_the_cause(run) -> None:
    line = usage_error(run, "--xtc-target=host", "--xtc-report=/proc/x", "--collect-only")
    assert "/proc/x" in line and "another run" not in line, line


def test_a_report_on_a_read_only_folder_is_one_usage_line(run, pytester) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes read-only folders; see the /proc test")
    ro = pytester.path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        line = usage_error(run, "--xtc-target=host", "--xtc-report=ro/rep", "--collect-only")
    finally:
        ro.chmod(0o755)
    assert "--xtc-report" in line and "ro" in line, line


# -- the CLI's exit status: one table for every subcommand -----------------------------------


def cli_status(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:  # argparse's own usage errors
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    return code, err


def test_the_exit_table_is_in_the_help_and_the_docs(capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_xtc.exit_status import TABLE, Exit

    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    doc = (ROOT / "docs" / "cli-exit-status.md").read_text()
    for status in Exit:
        assert f"  {status.value}  " in out, out
        assert f"| {status.value} | {status.name.lower().replace('_', ' ')} |" in doc
    assert TABLE.splitlines()[1] in out


def test_usage_errors_exit_2_in_every_subcommand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    def never(argv: list[str]) -> int:
        raise AssertionError("pytest started for a refused command")

    monkeypatch.setattr(pytest, "main", never)
    rep = str(tmp_path / "r")
    for argv in (["frobnicate"], ["verify"], ["run", "--target", "nosuch", "--report", rep],
                 ["run", "--target", "host[x", "--report", rep],
                 ["verify", str(tmp_path), "--rerun", "0"], ["merge", str(tmp_path / "m")],
                 ["list", "--target-option", "nonsense"], ["coverage", "extra"]):
        code, err = cli_status(capsys, *argv)
        assert code == 2, (argv, err)
        assert err.count("\n") == 1, err


def test_bad_input_exits_3_in_every_subcommand(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    where = tmp_path / "b"
    make_bundle(where, [(c, "passed") for c in CASES])
    (where / bundle.SUMMARY).write_text("edited\n")
    plain = tmp_path / "plain"
    plain.mkdir()
    (tmp_path / "m.onnx").write_bytes(b"not onnx at all")
    deep = tmp_path / "deep"  # a bundle whose results nest too deep: shrink said "a bug"
    make_bundle(deep, [(c, "failed") for c in CASES])
    (deep / bundle.RESULTS).write_text("[" * 100 + "]" * 100 + "\n")
    for argv in (["verify", str(where)], ["verify", str(tmp_path / "none")],
                 ["merge", str(tmp_path / "m"), str(where), str(plain)],
                 ["shrink", str(plain)], ["shrink", str(deep)], ["diff", str(deep), str(where)],
                 ["import", str(tmp_path / "m.onnx"), "--out", str(tmp_path / "o")]):
        code, err = cli_status(capsys, *argv)
        assert code == 3, (argv, err)
        assert err.count("\n") >= 1 and err.strip().count("\n") == 0, err


def test_run_statuses_follow_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    base = ["run", "--target", "host", "--report", str(tmp_path / "r")]
    for pytest_status, expected in ((4, 2), (3, 4), (1, 4), (2, 4)):
        monkeypatch.setattr(pytest, "main", lambda argv, s=pytest_status: s)  # no bundle
        assert cli_status(capsys, *base)[0] == expected, pytest_status

    def failing(argv: list[str]) -> int:
        make_bundle(tmp_path / "r", [(next(iter(CASES)), "failed")], fill="passed")
        return 1

    monkeypatch.setattr(pytest, "main", failing)
    code, err = cli_status(capsys, *base)
    assert code == 1, err  # verdict: not conformant


def test_an_unexpected_error_is_one_line_exit_4(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    def broken(args: object) -> int:
        raise KeyError("oops")

    monkeypatch.setattr(cli, "cmd_verify", broken)
    code, err = cli_status(capsys, "verify", str(tmp_path))
    assert code == 4 and err.count("\n") == 1 and "internal error: KeyError" in err, err


@pytest.mark.parametrize("given", ["the model", "its folder"])
def test_a_fifo_named_as_an_onnx_model_is_refused_at_once(
        tmp_path: Path, given: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``xtc-conformance import`` of a FIFO named ``net.onnx`` waited forever (the model was
    opened for reading before its kind was known); in a folder, it was skipped without a
    word. Now one line naming it, exit 3 (bad input), nothing written."""
    pytest.importorskip("onnx")
    folder = tmp_path / "models"
    folder.mkdir()
    named = fifo(folder / "net.onnx")
    out = tmp_path / "out"
    start = time.monotonic()
    status = cli.main(["import", str(named if given == "the model" else folder), "--out", str(out)])
    assert time.monotonic() - start < 5
    said = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert status == 3 and len(said) == 1, said
    assert str(named) in said[0] and "FIFO" in said[0], said
    assert not out.exists()


# -- names -----------------------------------------------------------------------------


@pytest.mark.parametrize(("where", "name", "said"), [
    ("name", "mm\0x", "NUL (U+0000, character 3)"),
    ("name", "mm/../x", "'/' (U+002F, character 3)"),
    ("name", "mm\nx", "'\\n' (U+000A, character 3)"),
    ("schedule", "tiled\x1b[2J", "'\\x1b' (U+001B, character 6)"),
    ("file", "mm\x07.yaml", "'\\x07' (U+0007, character 3)"),
], ids=["nul-in-name", "separator-in-name", "newline-in-name", "escape-in-schedule",
        "bell-in-file-name"])
def test_a_name_holding_a_control_character_or_a_separator_is_refused_at_load(
        tmp_path: Path, where: str, name: str, said: str) -> None:
    """Before, a case named with a NUL loaded and its cases FAILED against the target
    (MLIR: "unknown escape in string literal")."""
    data = matmul()
    if where == "name":
        data["name"] = name
    elif where == "schedule":
        data["schedules"] = {name: []}
    path = tmp_path / (name if where == "file" else "case.yaml")
    path.write_text(yaml.safe_dump(data))
    message = fast(lambda: cases.load_case_paths([path]), CaseFileError, said)
    assert str(path) in message or repr(str(path)) in message, message
    if where != "file":
        assert f": {'schedules' if where == 'schedule' else 'name'}: " in message, message


def test_ordinary_names_still_load(tmp_path: Path) -> None:
    data = matmul()
    data["name"], data["schedules"] = "mm_ok-1.2 é", {"tiled-1": []}
    path = tmp_path / "ok case-1.yaml"
    path.write_text(yaml.safe_dump(data))
    loaded = cases.load_case_paths([path])
    assert loaded and all(c.id.startswith("mm_ok-1.2 é-") for c in loaded), loaded
