"""Result bundles and verdicts: synthetic outcomes for the rules, a few real runs for the
plugin side (``--xtc-report``, ``--xtc-shard``, pytest-xdist)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from packaging.specifiers import SpecifierSet

from pytest_xtc import SUITE_VERSION, cli
from pytest_xtc.conformance import builtin_cases
from pytest_xtc.core.cases.case import DEVICE, HOST
from pytest_xtc.core.cases.selectors import Selector, Traits
from pytest_xtc.report import bundle, suitecheck, verify
from pytest_xtc.report.parts.reasons import ReasonCode, parse
from pytest_xtc.report.parts.records import CaseRecord, clean
from pytest_xtc.report.render import chart as plot
from pytest_xtc.report.render import page
from pytest_xtc.report.rules import caseset
from pytest_xtc.report.rules.profiles import profile_of
from pytest_xtc.report.rules.verdicts import (
    CONFORMANT,
    NOT_APPLICABLE,
    NOT_CONFORMANT,
    assemble,
    judge,
    run_not_certifying,
)
from pytest_xtc.report.rules.waivers import Waiver, WaiverFileError, load_waivers, waivers_from

FEW = "relu-float32-5x7 or matmul-float32-13x11x7-tile"
#: The suite's case set for a host-only target: case id -> profile, in suite order.
CASES = {c.id: profile_of(c) for c in builtin_cases()}
A, B, C = [i for i, p in CASES.items() if p == "core"][:3]
X = next(i for i, p in CASES.items() if p == "extended")
#: What a synthetic target declares: every op of the suite, both dtypes, host operands.
CAPABILITIES = {"ops": sorted({op for c in builtin_cases() for op in c.ops}),
                "dtypes": ["float32", "float64"], "placements": [HOST], "schedules": None}
SMALL = {"a": "core", "b": "core", "c": "core", "x": "extended"}


def make_report(
    results: Iterable[tuple[str, str]],
    *,
    target: str = "t",
    shards: dict[str, Any] | None = None,
    filters: Iterable[str] = (),
    version: str = SUITE_VERSION,
    waivers: Iterable[Mapping[str, Any]] = (),
    capabilities: Mapping[str, Any] | None = None,
    settings: Mapping[str, Any] | None = None,
    fill: str | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A report (not yet assembled) and the records of synthetic results (case id, status)
    for one target of the real suite, as the plugin writes them; ``fill`` gives every
    case without a result that status."""
    declared = dict(capabilities or CAPABILITIES)
    cases = {c.id: c for c in suitecheck.suite_cases(declared["placements"])}
    entry = {
        "tier": "available", "reason": "", "versions": {"xtc-tools": "0.3.2"}, "device": "",
        "placements": sorted(declared["placements"]), "capabilities": declared,
        "runs": [0], "shards": shards,
        "case_set": caseset.target_case_set([caseset.case_entry(c) for c in cases.values()]),
    }
    run = {"settings": {"seed": 0, "strict": True, "ignore_expectations": True, "cases": [],
                        "suite_version": version, **(settings or {})},
           "filters": list(filters), "interrupted": "", "system": {}}
    run["settings"]["certifying"] = not run_not_certifying(run, version)
    report = {
        "schema": bundle.SCHEMA, "kind": bundle.KIND,
        "suite": {"name": "pytest-xtc", "version": version}, "waivers": list(waivers),
        "runs": [run], "targets": {target: entry},
    }
    results = list(results)
    if fill is not None:
        have = {c for c, _ in results}
        results += [(c, fill) for c in cases if c not in have]
    records = [{"target": target, "case": c, "status": s, "phase": "check", "message": s}
               for c, s in results]
    return report, records


def make_bundle(path: Path, results: Iterable[tuple[str, str]], **kwargs: Any) -> dict[str, Any]:
    """A bundle of synthetic results (make_report), as bundle.py writes it; its report."""
    report, records = make_report(results, **kwargs)
    bundle.prepare(path)
    bundle.finish(path, assemble(report, records), records)
    return report


def verdicts(report: Mapping[str, Any], target: str = "t") -> dict[str, str]:
    return {p: v["verdict"] for p, v in report["targets"][target]["verdicts"].items()}


def result(case: str, status: str, **extra: Any) -> dict[str, Any]:
    return {"target": "t", "case": case, "status": status, "message": status, **extra}


# -- Profiles, waivers, verdicts ---------------------------------------------------------


def test_profiles_of_builtin_cases() -> None:
    by_id = {c.id: c for c in builtin_cases()}
    assert profile_of(by_id["matmul-float32-64x64x64-tile"]) == "core"
    assert profile_of(by_id["conv2d-float32-1x9x9x3-3x3x8-s2-p1-none"]) == "core"  # pad2d+conv2d
    assert profile_of(by_id["relu-float32-5x7-none-exact"]) == "core"
    assert profile_of(by_id["matmul-float64-64x64x64-unroll"]) == "extended"
    assert profile_of(by_id["matmul+relu-float32-13x11x7-none"]) == "extended"
    assert profile_of(by_id["mlp-float32-1x16x32x10-none"]) == "extended"
    assert profile_of(by_id["matmul-float32-128x256x192-none"]) == "extended"  # large
    placed = by_id["matmul-float32-13x11x7-none"].place({"A": DEVICE, "B": HOST, "C": HOST})
    assert profile_of(placed) == "device-memory"
    all_host = by_id["matmul-float32-13x11x7-none"].place({"A": HOST, "B": HOST, "C": HOST})
    assert profile_of(all_host) == "core"
    core_ops = {c.op for c in builtin_cases() if profile_of(c) == "core"}
    assert core_ops >= {"matmul", "conv2d", "relu", "pad", "pad2d", "unpad", "transpose", "reshape"}


def test_suite_waiver_file_loads_and_bad_waivers_are_refused(tmp_path: Path) -> None:
    assert {w.id for w in load_waivers()} >= {"f64-relu-f32-zero", "f64-conv2d-f32-zero"}
    good = {"id": "w", "pattern": "x", "xtc": "<=0.3.2", "reason": "r", "url": "https://x"}
    with pytest.raises(WaiverFileError, match="url must be an issue URL"):
        waivers_from([{**good, "url": "see mail"}], "w.yaml")
    with pytest.raises(WaiverFileError, match="needs id, reason and url"):
        waivers_from([{"pattern": "x"}], "w.yaml")
    with pytest.raises(WaiverFileError, match="name the XTC versions"):
        waivers_from([{k: v for k, v in good.items() if k != "xtc"}], "w.yaml")
    with pytest.raises(WaiverFileError, match="names no case"):
        waivers_from([{k: v for k, v in good.items() if k != "pattern"} | {"xtc": "<1"}], "w")
    with pytest.raises(WaiverFileError, match="used twice"):
        waivers_from([good, good], "w.yaml")
    bad = tmp_path / "w.yaml"
    bad.write_text("pattern: x\n")
    with pytest.raises(WaiverFileError, match="expected a list"):
        load_waivers(bad)


def test_a_waiver_by_attribute_covers_a_set_threshold_not_one_equal_to_the_default() -> None:
    """``attributes: [relu.threshold]`` covers a relu whose threshold is not relu's default
    (0), and not one given as 0 or -0 (XTC computes those right: a failure there is real)."""
    from pytest_xtc.conformance import builtin_cases

    [waiver] = waivers_from([{"id": "w", "ops": ["relu"], "attributes": ["relu.threshold"],
                              "xtc": "<=0.3.2", "reason": "r", "url": "https://x"}], "w.yaml")
    covered = {c.id: waiver.matches("host", Traits.of(c), "0.3.2", "run")
               for c in builtin_cases() if "relu" in c.ops and "-thr" in c.id}
    zero = {c for c in covered if "-thrzero-" in c or "-thrnegative_zero-" in c}
    assert zero and len(zero) < len(covered)
    assert not any(covered[c] for c in zero)
    assert all(covered[c] for c in set(covered) - zero), covered


def test_conformant_with_passed_not_supported_and_waived() -> None:
    waiver = Waiver("bug", Selector(dtypes=frozenset({"float64"}), xtc=SpecifierSet("<=0.3.2")),
                    "known bug", "https://github.com/xtc-tools/xtc/issues")
    traits = {c: Traits(c, frozenset({"matmul"}), "float64" if c == "c" else "float32", HOST,
                        frozenset()) for c in SMALL}
    results = [result("a", "passed"), result("b", "not-supported"), result("c", "failed"),
               result("x", "passed")]
    judgement = judge("t", SMALL, results, [waiver], traits=traits, xtc_version="0.3.2")
    assert judgement.verdicts["core"].verdict == "conformant with waivers"
    assert judgement.verdicts["extended"].verdict == CONFORMANT
    assert judgement.verdicts["device-memory"].verdict == NOT_APPLICABLE
    assert judgement.waived == {"c": "bug"}
    assert judgement.counts["waived"] == 1 and judgement.counts["failed"] == 0
    # not on a later XTC, and not without the case's traits
    later = judge("t", SMALL, results, [waiver], traits=traits, xtc_version="0.4.0")
    assert later.verdicts["core"].verdict == NOT_CONFORMANT and not later.waived
    assert not judge("t", SMALL, results, [waiver], xtc_version="0.3.2").waived


@pytest.mark.parametrize(
    ("results", "code", "reason"),
    [
        ([result("a", "passed"), result("b", "skipped"), result("c", "passed")],
         ReasonCode.SKIPPED, "1 required cases skipped (a skip is not a pass), e.g. b: skipped"),
        ([result("a", "passed"), result("b", "failed"), result("c", "passed")],
         ReasonCode.FAILED, "1 cases failed, e.g. b [None]: failed"),
        ([result("a", "passed"), result("b", "failed", pytest_outcome="xfailed"),
          result("c", "passed")], ReasonCode.FAILED,
         "1 cases failed (1 listed as expected failures, which do not count)"),
        ([result("a", "passed"), result("b", "passed")], ReasonCode.MISSING,
         "1 required cases have no result: c"),
        ([result("a", "passed"), result("b", "passed"), result("c", "passed"),
          result("c", "passed")], ReasonCode.DUPLICATED, "1 cases have more than one result: c"),
        ([result("a", "passed"), result("b", "passed"), result("c", "odd")],
         ReasonCode.UNKNOWN_STATUS, "1 results have an unknown status: c"),
    ],
    ids=["skip", "fail", "xfail", "missing", "duplicate", "unknown"],
)
def test_not_conformant(results: list[dict[str, Any]], code: ReasonCode, reason: str) -> None:
    judgement = judge("t", SMALL, [*results, result("x", "passed")], [])
    core = judgement.verdicts["core"]
    assert core.verdict == NOT_CONFORMANT
    assert core.codes == [code]
    assert core.reasons[0].text.startswith(reason), core.texts
    assert parse(core.reasons[0].text) == core.reasons[0]  # the stored text gives its code
    assert judgement.verdicts["extended"].verdict == CONFORMANT


def test_a_waiver_does_not_cover_a_skip() -> None:
    waiver = Waiver("all", Selector(pattern="*"), "everything", "https://x")
    traits = {c: Traits(c, frozenset(), "float32", HOST, frozenset()) for c in SMALL}
    results = [result("a", "skipped"), result("b", "passed"), result("c", "passed")]
    judgement = judge("t", SMALL, results, [waiver], traits=traits)
    assert judgement.verdicts["core"].verdict == NOT_CONFORMANT


def test_filtered_run_is_never_conformant() -> None:
    results = [result(c, "passed") for c in SMALL]
    filtered = parse("filtered run (-k a): a filtered run cannot be conformant")
    judgement = judge("t", SMALL, results, [], [filtered])
    assert filtered.code is ReasonCode.RUN_FILTERED and filtered.code.run_level
    assert judgement.verdicts["core"].reasons == (filtered,)
    assert judgement.verdicts["core"].verdict == NOT_CONFORMANT


# -- Bundles -------------------------------------------------------------------------------


def test_synthetic_bundle_verifies_and_any_changed_byte_is_caught(tmp_path: Path) -> None:
    report = make_bundle(tmp_path / "b", [(c, "passed") for c in CASES])
    assert verdicts(report) == {"core": CONFORMANT, "device-memory": NOT_APPLICABLE,
                                "extended": CONFORMANT}
    assert verify.verify(tmp_path / "b") == []
    path = tmp_path / "b" / bundle.RESULTS
    data = bytearray(path.read_bytes())
    data[10] ^= 0x01
    path.write_bytes(bytes(data))
    problems = verify.verify(tmp_path / "b")
    assert problems[0] == "results.jsonl: checksum mismatch (changed after the run was written)"


def test_a_report_that_disagrees_with_its_results_is_caught(tmp_path: Path) -> None:
    where = tmp_path / "b"
    make_bundle(where, [(B, "failed")], fill="passed")
    report = json.loads((where / bundle.REPORT).read_text())
    report["targets"]["t"]["verdicts"]["core"] = {"verdict": CONFORMANT, "reasons": [],
                                                  "required": 1}
    bundle.finish(where, report)  # consistent checksums, inconsistent content
    problems = verify.verify(where)
    assert "t: verdicts in report.json differ from those recomputed from results.jsonl" in problems


def test_a_complete_run_missing_results_does_not_verify(tmp_path: Path) -> None:
    make_bundle(tmp_path / "b", [(A, "passed")])
    assert f"t: {len(CASES) - 1} required cases have no result although the run was neither "\
        "filtered nor interrupted" in verify.verify(tmp_path / "b")
    make_bundle(tmp_path / "f", [(A, "passed")], filters=["-k a"])
    assert verify.verify(tmp_path / "f") == []


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("manifest", "incomplete bundle, MANIFEST.sha256 missing"),
        ("truncate", "line 2 is not JSON (truncated or damaged)"),
        ("foreign", "not an XTC conformance bundle"),
        ("nothing", "no such bundle directory"),
        ("a file", "not a directory: a bundle is the folder"),
    ],
)
def test_missing_truncated_or_foreign_bundles(tmp_path: Path, damage: str, message: str) -> None:
    where = tmp_path / "b"
    make_bundle(where, [(c, "passed") for c in CASES])
    if damage == "manifest":
        (where / bundle.MANIFEST).unlink()
    elif damage == "truncate":
        text = (where / bundle.RESULTS).read_text()
        (where / bundle.RESULTS).write_text(text[: text.index("\n") + 20])
    elif damage == "foreign":
        for name in (*bundle.CONTENT, bundle.MANIFEST):
            (where / name).unlink()
        (where / "notes.txt").write_text("hello")
    elif damage == "a file":
        where = tmp_path / "results.jsonl"
        where.write_text("{}\n")
    else:
        where = tmp_path / "absent"
    problems = verify.verify(where)
    assert len(problems) == 1 and message in problems[0], problems


def test_destination_must_be_empty_new_or_a_bundle(tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "data.csv").write_text("1,2\n")
    with pytest.raises(bundle.BundleError, match="holds no XTC conformance bundle"):
        bundle.check_destination(tmp_path / "other")
    make_bundle(tmp_path / "b", [(A, "failed")])
    make_bundle(tmp_path / "b", [(c, "passed") for c in CASES])  # replaced
    assert verify.verify(tmp_path / "b") == []


def test_non_finite_figures_stay_json(tmp_path: Path) -> None:
    record = clean({"worst_ratio": float("inf"), "times": (1.0, float("nan"))})
    assert record == {"worst_ratio": "inf", "times": [1.0, "nan"]}


def test_performance_table_appears_only_with_perf_records(tmp_path: Path) -> None:
    from pytest_xtc.report.render import summary

    report = make_bundle(tmp_path / "b", [(c, "passed") for c in CASES])
    assert "## Performance" not in summary.render(report)
    entry = report["targets"]["t"]
    entry["results"][0]["perf"] = {"gflops": 2.5, "median_s": 2e-6, "numpy_median_s": 4e-6}
    text = summary.render(report)
    assert f"| t | {builtin_cases()[0].op} | 1 | 2.50 | 0.50x |" in text


# -- The plugin ----------------------------------------------------------------------------


def test_report_of_a_filtered_run(pytester: pytest.Pytester, run: Any) -> None:
    result = run("--xtc-target=host", "--xtc-report=rep", "--junitxml=junit.xml", "-k", FEW)
    result.assert_outcomes(passed=8)
    where = pytester.path / "rep"
    expected = [*bundle.CONTENT, bundle.MANIFEST, plot.PLOT, page.NAME]  # perf.svg: the chart
    assert sorted(p.name for p in where.iterdir()) == sorted(expected)
    assert (pytester.path / "junit.xml").is_file()
    lines = (where / bundle.RESULTS).read_text().splitlines()
    assert len(lines) == 8
    record = json.loads(lines[0])
    assert {"case", "target", "status", "phase", "seed", "worst_ratio", "compile_s", "run_s",
            "nodeid", "pytest_outcome", "duration"} <= set(record)
    report = json.loads((where / bundle.REPORT).read_text())
    assert report["schema"] == bundle.SCHEMA and report["suite"]["version"] == SUITE_VERSION
    run_info = report["runs"][0]
    total = len(builtin_cases())
    assert run_info["filters"] == ["-k '" + FEW + "'", f"collected 8 of {total} required cases"]
    assert "--xtc-report=rep" in run_info["command"]["args"]
    host = report["targets"]["host"]
    assert host["tier"] == "available" and host["case_set"]["count"] == total
    assert host["versions"]["xtc-tools"] == "0.3.2"
    assert host["verdicts"]["core"]["verdict"] == NOT_CONFORMANT
    assert "a filtered run cannot be conformant" in host["verdicts"]["core"]["reasons"][0]
    assert host["counts"]["passed"] == 8 and host["counts"]["missing"] == total - 8
    assert "| host | available | host CPU | 8 | 0 |" in (where / bundle.SUMMARY).read_text()
    assert cli.main(["verify", str(where)]) == 0

    data = bytearray((where / bundle.RESULTS).read_bytes())
    data[len(data) // 2] ^= 0x20
    (where / bundle.RESULTS).write_bytes(bytes(data))
    assert cli.main(["verify", str(where)]) == 3


def test_report_into_a_foreign_directory_is_a_usage_error(pytester: pytest.Pytester,
                                                          run: Any) -> None:
    (pytester.path / "mine").mkdir()
    (pytester.path / "mine" / "thesis.tex").write_text("...")
    result = run("--xtc-target=host", "--xtc-report=mine", "-k", FEW)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "mine is not empty and holds no XTC conformance bundle" in result.stderr.str()
    assert [p.name for p in (pytester.path / "mine").iterdir()] == ["thesis.tex"]


def test_unavailable_target_is_not_conformant_and_says_why(vendor: Any, run: Any,
                                                           pytester: pytest.Pytester) -> None:
    vendor("gone_xtc", {"gone": "gone_adapter:Gone"},
           {"gone_adapter": "raise ImportError('libgone.so not found')\n"})
    run("--xtc-target=host,gone", "--xtc-report=rep", "-k", "relu-float32-5x7")
    report = json.loads((pytester.path / "rep" / bundle.REPORT).read_text())
    gone = report["targets"]["gone"]
    assert gone["tier"] == "unavailable" and "libgone.so not found" in gone["reason"]
    reasons = " ".join(gone["verdicts"]["core"]["reasons"])
    assert "required cases skipped (a skip is not a pass)" in reasons
    assert "libgone.so not found" in reasons


def test_two_shards_merge_like_one_run(pytester: pytest.Pytester, run: Any) -> None:
    few = FEW
    one = run("--xtc-target=host", "--xtc-report=one", "-k", few)
    first = run("--xtc-target=host", "--xtc-report=s1", "--xtc-shard=1/2", "-k", few, "-n", "2")
    second = run("--xtc-target=host", "--xtc-report=s2", "--xtc-shard=2/2", "-k", few)
    total = one.parseoutcomes()["passed"]
    shard_counts = [r.parseoutcomes().get("passed", 0) for r in (first, second)]
    assert sum(shard_counts) == total and all(shard_counts)
    root = pytester.path
    for shard in ("s1", "s2"):
        assert verify.verify(root / shard) == []
        report = json.loads((root / shard / bundle.REPORT).read_text())
        assert any("partial bundle: shard" in r
                   for r in report["targets"]["host"]["verdicts"]["core"]["reasons"])
    assert cli.main(["merge", str(root / "merged"), str(root / "s1"), str(root / "s2")]) == 0
    assert verify.verify(root / "merged") == []
    merged = json.loads((root / "merged" / bundle.REPORT).read_text())
    single = json.loads((root / "one" / bundle.REPORT).read_text())
    assert merged["case_set"] == single["case_set"]
    assert merged["targets"]["host"]["shards"] is None
    assert merged["targets"]["host"]["counts"] == single["targets"]["host"]["counts"]
    assert verdicts(merged, "host") == verdicts(single, "host")  # filtered: not conformant
    status = {(r["case"], r["status"], r["seed"]) for r in merged["targets"]["host"]["results"]}
    assert status == {(r["case"], r["status"], r["seed"])
                      for r in single["targets"]["host"]["results"]}


def test_the_performance_chart_is_in_the_manifest_and_checked(tmp_path: Path) -> None:
    records = [
        CaseRecord(target="host", case=f"matmul-float32-{n}x4x4-none", status="passed",
                   perf={"gflops": 2.0 * n, "numpy_gflops": 1.0})
        for n in (1, 2, 3)
    ]
    assert plot.gflops_by_op(records) == {"host matmul": (4.0, 1.0)}
    svg = plot.render(records)
    assert svg is not None and svg.startswith("<?xml") and "host matmul" in svg
    assert plot.render(records) == svg  # the same figures give the same bytes
    assert plot.render([replace(records[0], perf=None)]) is None
