"""Certification that cannot be gamed (issue 11): forged bundles, path breaches, targets
that declare nothing, development runs, waivers by properties, and the rerun audit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_xtc import SUITE_VERSION, __version__, cli
from pytest_xtc.report import bundle, verify
from pytest_xtc.report.files.untrusted import MAX_FILE_BYTES
from pytest_xtc.report.parts.records import sha256_file
from pytest_xtc.report.rules import caseset
from pytest_xtc.report.rules.verdicts import assemble
from pytest_xtc.report.rules.waivers import load_waivers
from tests import ROOT
from tests.acceptance.test_report import CASES, X, make_bundle, make_report, verdicts
from tests.support import bundles

SCRIPT = Path(sys.executable).with_name("xtc-conformance")
#: A few host cases of both dtypes: float64 relu fails to compile on XTC 0.3.2.
HOST_FEW = "relu-float32-5x7 or relu-float64-5x7 or matmul-float32-13x11x7 or " \
    "matmul-float64-13x11x7"


def rebuild(path: Path, report: dict[str, Any], records: list[dict[str, Any]]) -> None:
    """Rewrite a bundle consistently, as a forger with this very tool would."""
    path.mkdir(parents=True, exist_ok=True)
    bundle.finish(path, assemble(report, records), records)


def rewrite_manifest(path: Path, extra: dict[str, str] | None = None) -> None:
    """Checksums made right again for every file listed (and ``extra`` lines)."""
    lines = []
    for line in (path / bundle.MANIFEST).read_text().splitlines():
        _, _, name = line.partition("  ")
        lines.append(f"{sha256_file(path / name)}  {name}")
    lines += [f"{digest}  {name}" for name, digest in (extra or {}).items()]
    (path / bundle.MANIFEST).write_text("\n".join(lines) + "\n")


def xtc_conformance(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, check=False,
                          timeout=600)


# -- Case-set forgeries, caught statically ---------------------------------------------------


@pytest.mark.parametrize("forgery", ["dropped", "one-case", "unknown-case"])
def test_case_set_forgeries_are_refused(tmp_path: Path, forgery: str) -> None:
    report, records = make_report([], fill="passed")
    entry = report["targets"]["t"]
    cases = entry["case_set"]["cases"]
    if forgery == "dropped":
        kept = [c for c in cases if c["id"] != X]
        records = [r for r in records if r["case"] != X]
        message = f"t: case set lacks 1 of the {len(CASES)} cases this suite has for it: {X}"
    elif forgery == "one-case":
        kept = cases[:1]
        records = records[:1]
        message = f"t: case set lacks {len(CASES) - 1} of the {len(CASES)} cases"
    else:
        kept = [*cases, {**cases[0], "id": "matmul-float32-2x2x2-mine"}]
        records.append({**records[0], "case": "matmul-float32-2x2x2-mine"})
        message = "t: case set has 1 cases this suite does not have: matmul-float32-2x2x2-mine"
    entry["case_set"] = caseset.target_case_set(kept)
    rebuild(tmp_path / "b", report, records)
    assert verdicts(json.loads((tmp_path / "b" / bundle.REPORT).read_text()))["core"] in (
        "conformant", "not applicable", "not conformant")
    problems = verify.verify(tmp_path / "b")
    assert any(p.startswith(message) for p in problems), problems
    assert cli.main(["verify", str(tmp_path / "b")]) == 3


def test_a_bundle_of_another_suite_version_is_refused(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    make_bundle(tmp_path / "b", [], fill="passed", version="9.9.9")
    assert cli.main(["verify", str(tmp_path / "b")]) == 3
    assert capsys.readouterr().err.strip() == (
        f"{tmp_path / 'b'}: bundle written by suite 9.9.9; this is pytest-xtc {__version__} "
        f"(suite {SUITE_VERSION}): install pytest-xtc==9.9.9 to verify it")


def test_results_must_agree_with_the_declared_capabilities(tmp_path: Path) -> None:
    """A not-supported case turned into a pass by a target declaring the op absent."""
    caps = {"ops": ["conv2d", "matmul", "pad", "pad2d", "relu", "unpad"],
            "dtypes": ["float32", "float64"], "placements": ["host"], "schedules": None}
    report, records = make_report([], fill="passed", capabilities=caps)
    for record in records:
        if record["case"].startswith(("transpose", "reshape")):
            record["status"] = "not-supported"
    rebuild(tmp_path / "ok", report, records)
    assert verify.verify(tmp_path / "ok") == []
    forged = [{**r, "status": "passed"} if r["case"].startswith("transpose") else r
              for r in records]
    rebuild(tmp_path / "f", report, forged)
    problems = verify.verify(tmp_path / "f")
    assert any("results contradict the declared capabilities" in p and
               "but the declared capabilities exclude it (op transpose not supported)" in p
               for p in problems), problems


def test_a_forged_certification_flag_is_caught(tmp_path: Path) -> None:
    make_bundle(tmp_path / "b", [], fill="passed", settings={"strict": False})
    report = json.loads((tmp_path / "b" / bundle.REPORT).read_text())
    assert report["certifies"] is False
    assert report["not_certifying"][0].startswith("run 1: not strict")
    report["certifies"], report["not_certifying"] = True, []
    bundle.finish(tmp_path / "b", report)
    assert f"{bundle.REPORT}: certifies differs from what its runs and results give" in \
        verify.verify(tmp_path / "b")


# -- Path and size breaches --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("breach", "message"),
    [
        ("absolute", "refused: '/etc/passwd': absolute path"),
        ("dotdot", "refused: '../../../../etc/passwd': '..' leaves the bundle"),
        ("symlink", "refused: results.jsonl: a symbolic link"),
        ("oversized", f"refused: big.bin: {MAX_FILE_BYTES + 1} bytes, over the 256 MiB limit"),
        ("deep-report", "refused: report.json: JSON nested deeper than 64 levels"),
        ("deep-line", "refused: results.jsonl: line 1: JSON nested deeper than 64 levels"),
        ("long-line", "refused: results.jsonl: line 1 is longer than 1024 KiB"),
    ],
)
def test_path_and_size_breaches_are_refused(tmp_path: Path, breach: str, message: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    where = tmp_path / "b"
    make_bundle(where, [], fill="passed")
    results = where / bundle.RESULTS
    extra: dict[str, str] = {}
    if breach == "absolute":
        extra["/etc/passwd"] = "0" * 64
    elif breach == "dotdot":
        extra["../../../../etc/passwd"] = "0" * 64
    elif breach == "symlink":
        outside = tmp_path / "outside.jsonl"
        results.rename(outside)
        results.symlink_to(outside)
    elif breach == "oversized":
        with (where / "big.bin").open("wb") as file:
            file.truncate(MAX_FILE_BYTES + 1)  # sparse: no disk used
        extra["big.bin"] = "0" * 64
    elif breach == "deep-report":
        deep = 200_000
        (where / bundle.REPORT).write_text('{"a": ' + "[" * deep + "]" * deep + "}")
    elif breach == "deep-line":
        results.write_text("[" * 200_000 + "]" * 200_000 + "\n" + results.read_text())
    else:
        results.write_text(json.dumps({"pad": "x" * (2 << 20)}) + "\n" + results.read_text())
    rewrite_manifest(where, extra)
    problems = verify.verify(where)
    assert len(problems) == 1 and problems[0].startswith(message), problems
    assert cli.main(["verify", str(where)]) == 3
    assert capsys.readouterr().err.count("\n") == 1


# -- Genuine bundles, waivers, profiles --------------------------------------------------------


def test_genuine_full_and_merged_bundles_are_accepted(tmp_path: Path) -> None:
    make_bundle(tmp_path / "full", [], fill="passed")
    assert verify.verify(tmp_path / "full") == []
    for index in (1, 2):
        mine = [(c, "passed") for c in CASES if caseset.shard_of(f"t-{c}", 2) == index]
        make_bundle(tmp_path / f"s{index}", mine, shards={"count": 2, "indices": [index]})
    assert cli.main(["merge", str(tmp_path / "m"), str(tmp_path / "s1"),
                     str(tmp_path / "s2")]) == 0
    assert verify.verify(tmp_path / "m") == []
    merged = json.loads((tmp_path / "m" / bundle.REPORT).read_text())
    assert merged["certifies"] is True
    assert verdicts(merged) == {"core": "conformant", "device-memory": "not applicable",
                                "extended": "conformant"}


def test_a_certification_shard_never_merges_with_a_development_shard(tmp_path: Path) -> None:
    for index, strict in ((1, True), (2, False)):
        mine = [(c, "passed") for c in CASES if caseset.shard_of(f"t-{c}", 2) == index]
        make_bundle(tmp_path / f"s{index}", mine, shards={"count": 2, "indices": [index]},
                    settings={"strict": strict})
    assert "**Does not certify** (development run)" in \
        (tmp_path / "s2" / bundle.SUMMARY).read_text()
    with pytest.raises(bundle.BundleError, match="run settings differ: strict is True in"):
        from pytest_xtc.report import merge

        merge.merge(tmp_path / "m", [tmp_path / "s1", tmp_path / "s2"])


def test_suite_waivers_make_xtc_0_3_2_float64_bugs_conformant_with_waivers(
    tmp_path: Path,
) -> None:
    waivers = [w.to_dict() for w in load_waivers()]
    failing = [(c, "failed") for c in CASES
               if "float64" in c and c.split("-")[0] in ("relu", "conv2d", "conv2d+relu",
                                                         "matmul+relu", "mlp")]
    report = make_bundle(tmp_path / "b", failing, fill="passed", waivers=waivers)
    # the phase is "check" in make_report: a wrong result is never waived by a compile waiver
    assert verdicts(report)["extended"] == "not conformant"
    report, records = make_report(failing, fill="passed", waivers=waivers)
    for record in records:
        if record["status"] == "failed":
            record["phase"] = "compile"
    rebuild(tmp_path / "c", report, records)
    assert verify.verify(tmp_path / "c") == []
    assert verdicts(report) == {"core": "conformant", "device-memory": "not applicable",
                                "extended": "conformant with waivers"}
    used = report["waivers_used"]
    assert used["f64-relu-f32-zero"] and used["f64-conv2d-f32-zero"]
    summary = (tmp_path / "c" / bundle.SUMMARY).read_text()
    assert "## Unused waivers" in summary and "`nvgpu-vectorize-in-kernel`" in summary
    assert f"t-{failing[0][0]} (waiver `f64-" in summary
    # on a later XTC the same failures are not waived
    report, records = make_report(failing, fill="passed", waivers=waivers)
    report["targets"]["t"]["versions"]["xtc-tools"] = "0.3.3"
    for record in records:
        record["phase"] = "compile" if record["status"] == "failed" else record["phase"]
    assert verdicts(assemble(report, records))["extended"] == "not conformant"


@pytest.mark.parametrize("declared", ["nothing", "matmul only"])
def test_a_target_below_a_profile_minimum_is_not_applicable(tmp_path: Path,
                                                            declared: str) -> None:
    ops = [] if declared == "nothing" else ["matmul"]
    caps = {"ops": ops, "dtypes": ["float32"], "placements": ["host"], "schedules": None}
    report = make_bundle(tmp_path / "b", [], fill="not-supported", capabilities=caps)
    if declared == "matmul only":  # its matmul float32 cases pass
        report, records = make_report([], fill="not-supported", capabilities=caps)
        for record in records:
            if record["case"].startswith("matmul-float32-"):
                record["status"] = "passed"
        rebuild(tmp_path / "b", report, records)
    assert verify.verify(tmp_path / "b") == []
    found = verdicts(report)
    assert set(found.values()) == {"not applicable"}, found
    reason = report["targets"]["t"]["verdicts"]["core"]["reasons"][0]
    assert "core needs at least ops matmul, conv2d and dtypes float32" in reason


def test_zero_passes_are_never_conformant(tmp_path: Path) -> None:
    """Everything declared, nothing passed: the waivers cannot carry a profile alone."""
    report, records = make_report([], fill="failed", waivers=[
        {"id": "all-f32", "dtypes": ["float32"], "xtc": "<=0.3.2", "reason": "r",
         "url": "https://github.com/xtc-tools/xtc/issues"}])
    core = assemble(report, records)["targets"]["t"]["verdicts"]["core"]
    assert core["verdict"] == "not conformant"
    assert core["reasons"][0].startswith("no required case passed")


def test_run_of_a_target_declaring_no_op_exits_non_zero(
    vendor: Callable[..., Path], tmp_path: Path
) -> None:
    source = (
        "from pytest_xtc import Capabilities\n"
        "from pytest_xtc.targets.host import HostTarget\n"
        "class NoOp(HostTarget):\n"
        "    def capabilities(self):\n"
        "        return Capabilities(ops=frozenset())\n"
    )
    vendor("noop_xtc", {"noop": "noop_adapter:NoOp"}, {"noop_adapter": source})
    done = xtc_conformance("run", "--target", "noop", "--report", str(tmp_path / "r"),
                           "--profile", "core", "--profile", "extended")
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "noop core: not applicable (declares ops none" in done.stdout
    assert "noop extended: not applicable" in done.stdout
    report = json.loads((tmp_path / "r" / bundle.REPORT).read_text())
    assert report["certifies"] is True and report["totals"]["not-supported"] == len(CASES)
    assert report["targets"]["noop"]["adapter"]["distribution"] == "noop_xtc"
    assert report["runs"][0]["system"]["packages"]["noop_xtc"] == "1.0"
    assert "pytest-xtc" in report["runs"][0]["system"]["packages"]


# -- The rerun audit -------------------------------------------------------------------------


def test_rerun_of_a_genuine_host_bundle_finds_no_mismatch(run: Any,
                                                          pytester: pytest.Pytester) -> None:
    run("--xtc-target=host", "--xtc-report=rep", "--xtc-repeat=0", "-k", HOST_FEW)
    where = pytester.path / "rep"
    report = json.loads((where / bundle.REPORT).read_text())
    host = report["targets"]["host"]
    assert host["waived"] and host["adapter"]["distribution"] == "pytest-xtc"
    assert host["case_set"]["cases"][0]["dtype"] == "float32"  # traits recorded
    assert len(host["results"]) >= 20
    done = xtc_conformance("verify", str(where), "--rerun", "20", "--seed", "7")
    assert done.returncode == 0, done.stderr
    assert "rerun: 20 of" in done.stdout and "drawn with --seed 7" in done.stdout
    assert "rerun: 20 cases, 0 mismatches" in done.stdout


def test_rerun_catches_passes_forged_for_a_faulty_target(
    vendor: Callable[..., Path], run: Any, pytester: pytest.Pytester
) -> None:
    vendor("f16_xtc", {"f16": "pytest_xtc.selftest.faults:Float16Arithmetic"})
    run("--xtc-target=f16", "--xtc-report=rep", "--xtc-repeat=0", "-k",
        "matmul-float32-13x11x7")
    where = pytester.path / "rep"
    report, records, _ = bundles.load(where)
    failed = [r["case"] for r in records if r["status"] == "failed"]
    assert failed, "the faulty target should fail these cases"
    for record in records:  # the forgery: failures become passes, all rebuilt consistently
        if record["status"] == "failed":
            record.update(status="passed", phase="check", message="", worst_ratio=0.5)
    rebuild(where, report, records)
    assert verify.verify(where) == []  # statically sound...
    done = xtc_conformance("verify", str(where), "--rerun", str(len(records)), "--seed", "1")
    assert done.returncode == 1  # ...but the rerun sees through it
    mismatches = [line for line in done.stderr.splitlines() if ": rerun: " in line]
    assert len(mismatches) == len(failed), done.stderr
    assert "the bundle says passed, the rerun gives failed [check]: wrong results" in \
        mismatches[0]
    assert f"{len(records)} cases, {len(failed)} mismatches" in done.stdout


def test_rerun_needs_a_positive_count(tmp_path: Path) -> None:
    make_bundle(tmp_path / "b", [], fill="passed")
    assert cli.main(["verify", str(tmp_path / "b"), "--rerun", "0"]) == 2


def test_provenance_of_the_suite_source() -> None:
    from pytest_xtc.report.parts.environment import suite_source

    source = suite_source()
    if (ROOT / ".git").exists():
        assert source["commit"] and len(source["commit"]) == 40
        assert isinstance(source["dirty"], bool)
    assert os.path.isdir(ROOT / "pytest_xtc" / "report")
