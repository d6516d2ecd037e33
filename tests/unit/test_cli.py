"""``xtc-conformance``: list, run (its pytest command line), verify and merge."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_xtc import cli
from pytest_xtc.report import bundle, verify
from pytest_xtc.report.rules import caseset
from pytest_xtc.report.rules.verdicts import CONFORMANT, NOT_CONFORMANT
from tests.acceptance.test_report import CAPABILITIES, CASES, A, make_bundle, verdicts


def shards(root: Path, **kwargs: Any) -> tuple[Path, Path]:
    """The synthetic cases split in two shard bundles, every case passed."""
    paths = []
    for index in (1, 2):
        mine = [(c, "passed") for c in CASES if caseset.shard_of(f"t-{c}", 2) == index]
        path = root / f"s{index}"
        make_bundle(path, mine, shards={"count": 2, "indices": [index]}, **kwargs)
        paths.append(path)
    return paths[0], paths[1]


def test_list_shows_the_targets(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("target") and "\nhost " in out


def test_verify_says_ok_or_one_line_per_problem(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    make_bundle(tmp_path / "b", [(c, "passed") for c in CASES])
    assert cli.main(["verify", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert f"{tmp_path / 'b'}: OK ({len(CASES)} results, 1 targets" in out
    assert "certifies: yes" in out
    (tmp_path / "b" / bundle.SUMMARY).write_text("edited\n")
    assert cli.main(["verify", str(tmp_path / "b")]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [f"{tmp_path / 'b'}: summary.md: checksum mismatch (changed after the run "
                   "was written)"]


def test_the_console_script_verifies(tmp_path: Path) -> None:
    make_bundle(tmp_path / "b", [(c, "passed") for c in CASES])
    script = Path(sys.executable).with_name("xtc-conformance")
    done = subprocess.run([str(script), "verify", str(tmp_path / "b")], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([str(script), "verify", str(tmp_path / "nothing")],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert done.stderr.strip() == f"{tmp_path / 'nothing'}: no such bundle directory"


def test_shards_alone_are_partial_and_merged_are_conformant(tmp_path: Path) -> None:
    s1, s2 = shards(tmp_path)
    partial = json.loads((s1 / bundle.REPORT).read_text())
    assert verdicts(partial)["core"] == NOT_CONFORMANT
    assert partial["targets"]["t"]["verdicts"]["core"]["reasons"] == [
        "partial bundle: shard 1 of 2 only; merge every shard (xtc-conformance merge) "
        "for a verdict"
    ]
    assert cli.main(["merge", str(tmp_path / "m"), str(s1), str(s2)]) == 0
    assert verify.verify(tmp_path / "m") == []
    merged = json.loads((tmp_path / "m" / bundle.REPORT).read_text())
    assert verdicts(merged)["core"] == CONFORMANT and verdicts(merged)["extended"] == CONFORMANT
    assert merged["targets"]["t"]["shards"] is None and len(merged["runs"]) == 2
    single = make_bundle(tmp_path / "one", [(c, "passed") for c in CASES])
    assert merged["case_set"] == single["case_set"]
    assert merged["targets"]["t"]["counts"] == single["targets"]["t"]["counts"]


def test_one_shard_merged_alone_stays_partial(tmp_path: Path) -> None:
    s1, _ = shards(tmp_path)
    make_bundle(tmp_path / "u", [(c, "passed") for c in CASES], target="u")
    assert cli.main(["merge", str(tmp_path / "m"), str(s1), str(tmp_path / "u")]) == 0
    merged = json.loads((tmp_path / "m" / bundle.REPORT).read_text())
    assert merged["targets"]["t"]["shards"] == {"count": 2, "indices": [1]}
    assert verdicts(merged, "t")["core"] == NOT_CONFORMANT
    assert verdicts(merged, "u")["core"] == CONFORMANT  # another machine's target


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("version", "bundle written by suite 9.9; this is pytest-xtc"),
        ("cases", "case sets of t differ between"),
        ("settings", "run settings differ: strict is True in"),
        ("duplicate", "is in both"),
        ("same-shard", "shard [1] of t is given twice"),
        ("full-and-shard", "but they are not shards of one run"),
    ],
)
def test_merge_refuses_mismatches(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  change: str, message: str) -> None:
    # development shards (filtered) merge only with development runs: give both a filter
    dev = change in ("cases", "duplicate", "same-shard", "full-and-shard")
    s1, _ = shards(tmp_path, filters=["-k x"] if dev else [])
    other = tmp_path / "other"
    if change == "version":
        make_bundle(other, [(A, "passed")], shards={"count": 2, "indices": [2]}, version="9.9")
    elif change == "cases":
        make_bundle(other, [], shards={"count": 2, "indices": [2]}, filters=["-k c"],
                    capabilities={**CAPABILITIES, "placements": ["device", "host"]})
    elif change == "settings":
        mine = [(c, "passed") for c in CASES if caseset.shard_of(f"t-{c}", 2) == 2]
        make_bundle(other, mine, shards={"count": 2, "indices": [2]},
                    settings={"strict": False})
    elif change == "duplicate":
        first = next(c for c in CASES if caseset.shard_of(f"t-{c}", 2) == 1)
        make_bundle(other, [(first, "passed")], filters=["-k a"])
    elif change == "same-shard":
        make_bundle(other, [], shards={"count": 2, "indices": [1]}, filters=["-k none"])
    else:
        make_bundle(other, [(A, "passed")], filters=["-k c"])
    assert cli.main(["merge", str(tmp_path / "m"), str(s1), str(other)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("xtc-conformance: merge: ") and message in err, err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "m").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".m.")]  # no staging left


def test_merge_refuses_bad_inputs_and_outputs(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    s1, s2 = shards(tmp_path)
    (s2 / bundle.MANIFEST).unlink()
    assert cli.main(["merge", str(tmp_path / "m"), str(s1), str(s2)]) == 1
    assert "incomplete bundle, MANIFEST.sha256 missing" in capsys.readouterr().err
    s1, s2 = shards(tmp_path / "whole")  # s2 without its manifest is no bundle to replace
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    assert cli.main(["merge", str(foreign), str(s1), str(s2)]) == 1
    assert "holds no XTC conformance bundle" in capsys.readouterr().err
    assert [p.name for p in foreign.iterdir()] == ["keep.txt"]
    make_bundle(tmp_path / "old", [(A, "failed")])
    assert cli.main(["merge", str(tmp_path / "old"), str(s1), str(s2)]) == 0  # replaced
    assert verdicts(json.loads((tmp_path / "old" / bundle.REPORT).read_text()))["core"] == \
        CONFORMANT


def test_run_refuses_filters_and_builds_a_certification_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = ["run", "--target", "host", "--report", str(tmp_path / "r")]
    assert cli.main([*base, "-k", "relu"]) == 2
    assert "refusing -k relu: a certification runs the full case set" in capsys.readouterr().err
    assert cli.main([*base, "--target-option", "nonsense"]) == 2
    assert "expected KEY=VALUE" in capsys.readouterr().err
    monkeypatch.setenv("PYTEST_ADDOPTS", "-k relu")
    assert cli.main(base) == 2
    assert "PYTEST_ADDOPTS is set" in capsys.readouterr().err
    monkeypatch.delenv("PYTEST_ADDOPTS")

    seen: list[list[str]] = []

    def fake_pytest(argv: list[str]) -> int:  # writes what a run of a conformant target would
        seen.append(argv)
        make_bundle(tmp_path / "r", [(c, "passed") for c in CASES])
        return 0

    monkeypatch.setattr(pytest, "main", fake_pytest)
    assert cli.main([*base, "-n", "4", "--shard", "1/2"]) == 0
    argv = seen[0]
    for expected in ("--xtc-target=host", "--xtc-strict", "--xtc-ignore-expectations",
                     f"--xtc-report={tmp_path / 'r'}", "--xtc-shard=1/2"):
        assert expected in argv
    assert argv[argv.index("-n") + 1] == "4" and argv[0].endswith("test_conformance.py")
    assert "t core: conformant" in capsys.readouterr().out

    def fake_failing(argv: list[str]) -> int:
        make_bundle(tmp_path / "r", [(A, "failed")], fill="passed")
        return 1

    monkeypatch.setattr(pytest, "main", fake_failing)
    assert cli.main(base) == 1
    assert "t core: not conformant" in capsys.readouterr().out

    def fake_shard(argv: list[str]) -> int:  # one shard, all passed: partial, yet fine
        mine = [(c, "passed") for c in CASES if caseset.shard_of(f"t-{c}", 2) == 1]
        make_bundle(tmp_path / "r", mine, shards={"count": 2, "indices": [1]})
        return 0

    monkeypatch.setattr(pytest, "main", fake_shard)
    assert cli.main([*base, "--shard", "1/2"]) == 0
    assert cli.main([*base, "--shard", "1/2", "--profile", "device-memory"]) == 1
