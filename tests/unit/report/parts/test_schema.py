"""The typed report: bundles of the released format read back byte for byte, the schema
refuses what it does not know, reasons are compared by code."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_xtc import cli
from pytest_xtc.report import bundle, verify
from pytest_xtc.report.parts.model import Report, Scope, read_report
from pytest_xtc.report.parts.reasons import RUN_LEVEL, ReasonCode, ReasonError, parse
from pytest_xtc.report.parts.records import (
    RESULTS,
    CaseRecord,
    clean,
    dumps_line,
    read_record,
    sha256_file,
)
from pytest_xtc.report.parts.schema import SchemaError
from pytest_xtc.report.render import summary
from pytest_xtc.report.rules.verdicts import assemble_report, run_problems
from tests import DATA
from tests.support import bundles

#: A bundle written by the plugin before the report was typed (commit 81b0a03, reports as
#: dicts): ``pytest pytest_xtc/conformance/test_conformance.py --xtc-target=host
#: --xtc-report=DIR -k "relu-float32-5x7 or matmul-float32-13x11x7-tile"``. If the suite's
#: case set changes, write it again with the released version of the plugin.
OLD = DATA / "bundle_before_typed_report"


def report_json(report: Report) -> str:
    return json.dumps(clean(report.to_dict()), indent=1, sort_keys=True) + "\n"


def old_data() -> dict[str, Any]:
    data = json.loads((OLD / bundle.REPORT).read_text())
    assert isinstance(data, dict)
    return data


def beyond_the_case_set(problems: list[str]) -> list[str]:
    """Verify's problems but those of the bundle's case set against today's catalog (the
    catalog moves on; the bundle keeps the case set it was written with)."""
    return [p for p in problems if ": case set " not in p and " case set entries " not in p]


def test_a_bundle_written_before_the_typed_report_verifies_and_reads_back_unchanged(
    tmp_path: Path,
) -> None:
    assert beyond_the_case_set(verify.verify(OLD)) == []
    report, records, problems = bundle.read(OLD)
    assert problems == [] and len(records) == 9 and isinstance(records[0], CaseRecord)
    assert report_json(report) == (OLD / bundle.REPORT).read_text()
    assert "".join(dumps_line(r) for r in records) == (OLD / RESULTS).read_text()
    # the dict reading (replay, shrink) gives the JSON data itself
    data, lines, _ = bundles.load(OLD)
    assert data == old_data() and lines[0] == json.loads((OLD / RESULTS).read_text().split("\n")[0])
    # assembled again and written by this version: the same bytes
    again = assemble_report(report, records)
    assert again == report and report_json(again) == (OLD / bundle.REPORT).read_text()
    (tmp_path / "again").mkdir()
    bundle.finish(tmp_path / "again", again, records)
    # (summary.md is this version's rendering of the same facts: its format may grow)
    for name in (RESULTS, bundle.REPORT):
        assert (tmp_path / "again" / name).read_bytes() == (OLD / name).read_bytes(), name
    assert beyond_the_case_set(verify.verify(tmp_path / "again")) == []


def test_reasons_of_a_real_bundle_are_codes_plus_text() -> None:
    report, _, _ = bundle.read(OLD)
    host = report.targets["host"]
    assert host.scope is Scope.FILTERED
    core = host.verdict("core")
    assert core.codes[0] is ReasonCode.RUN_FILTERED and ReasonCode.MISSING in core.codes
    assert [r.code for r in run_problems(report, "host")] == [ReasonCode.RUN_FILTERED]
    assert all(parse(r.text) == r for v in (host.verdicts or {}).values() for r in v.reasons)
    # summary.md lists a run problem once per target, not once per profile
    text = summary.render(report)
    assert text.count("a filtered run cannot be conformant") == 1
    assert {c for c in ReasonCode if c.run_level} == RUN_LEVEL


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["targets"]["host"].update(colour="red"),
         "report.json: targets.host: unknown key 'colour'"),
        (lambda d: d["targets"]["host"].pop("tier"),
         "report.json: targets.host: missing key 'tier'"),
        (lambda d: d["targets"]["host"]["verdicts"]["core"].pop("required"),
         "report.json: targets.host.verdicts.core: missing key 'required'"),
        (lambda d: d["targets"]["host"]["verdicts"]["core"].update(required="3"),
         "report.json: targets.host.verdicts.core.required: expected int, got str"),
        (lambda d: d["targets"]["host"]["verdicts"]["core"].update(verdict="fine"),
         "report.json: targets.host.verdicts.core.verdict: unknown verdict 'fine'"),
        (lambda d: d["targets"]["host"]["verdicts"]["core"]["reasons"].append("all good"),
         "report.json: targets.host.verdicts.core.reasons[2]: unknown reason 'all good'"),
        (lambda d: d["runs"][0]["settings"].update(trusted=True),
         "report.json: runs[0].settings: unknown key 'trusted'"),
        (lambda d: d["runs"][0]["settings"].update(strict="yes"),
         "report.json: runs[0].settings.strict: expected bool, got str"),
        (lambda d: d.pop("suite"), "report.json: missing key 'suite'"),
        (lambda d: d["targets"]["host"]["results"][0].update(verified=True),
         "report.json: targets.host.results[0]: unknown key 'verified'"),
    ],
    ids=["unknown-target-key", "missing-tier", "missing-required", "string-int",
         "unknown-verdict", "unknown-reason", "unknown-setting", "string-bool",
         "missing-suite", "unknown-result-key"],
)
def test_the_schema_refuses_unknown_missing_and_mistyped_keys(change: Any, message: str) -> None:
    data = old_data()
    read_report(copy.deepcopy(data))  # the real one reads
    change(data)
    with pytest.raises(SchemaError) as caught:
        read_report(data)
    assert str(caught.value) == message and "\n" not in str(caught.value)


def test_a_bundle_breaking_the_schema_is_refused_in_one_line(tmp_path: Path) -> None:
    where = tmp_path / "b"
    shutil.copytree(OLD, where)
    lines = (where / RESULTS).read_text().splitlines()
    record = json.loads(lines[1])
    record["verified"] = True
    lines[1] = json.dumps(record, sort_keys=True)
    (where / RESULTS).write_text("\n".join(lines) + "\n")
    names = [n.partition("  ")[2] for n in (where / bundle.MANIFEST).read_text().splitlines()]
    (where / bundle.MANIFEST).write_text("".join(f"{sha256_file(where / n)}  {n}\n"
                                                 for n in names))  # checksums right
    problems = verify.verify(where)
    assert problems == ["results.jsonl: line 2: unknown key 'verified'"]
    assert cli.main(["verify", str(where)]) == 3
    with pytest.raises(bundle.BundleError, match=r"b: results.jsonl: line 2: unknown key"):
        bundle.read(where)


def test_records_keep_absent_and_null_keys_apart() -> None:
    short = {"target": "t", "case": "c", "status": "failed", "phase": "pytest-setup",
             "message": "boom", "nodeid": "n", "pytest_outcome": "error", "duration": 0.5}
    nulls = {**short, "seed": None, "worst_ratio": "inf", "times": [1.0, "nan"]}
    for data in (short, nulls):
        assert read_record(data, "results.jsonl: line 1:").to_dict() == data
    assert read_record(short, "x").seed is None and read_record(short, "x").has("seed") is False
    with pytest.raises(SchemaError, match="line 1: missing key 'status'"):
        read_record({"target": "t", "case": "c"}, "results.jsonl: line 1:")
    with pytest.raises(SchemaError, match=r"seed: expected int, got bool"):
        read_record({**short, "seed": True}, "results.jsonl: line 1:")


def test_every_reason_code_has_a_text_that_parses_back() -> None:
    texts = {
        ReasonCode.NO_REQUIRED_CASE: "no required case",
        ReasonCode.RUN_FILTERED: "filtered run (-k a): a filtered run cannot be conformant",
        ReasonCode.RUN_INTERRUPTED: "run interrupted (KeyboardInterrupt)",
        ReasonCode.PARTIAL_SHARD: "partial bundle: shard 1 of 2 only; merge every shard "
                                  "(xtc-conformance merge) for a verdict",
        ReasonCode.MISSING: "3 required cases have no result: a, b, c",
        ReasonCode.DUPLICATED: "1 cases have more than one result: a",
        ReasonCode.SKIPPED: "1 required cases skipped (a skip is not a pass), e.g. a: why",
        ReasonCode.FAILED: "1 cases failed, e.g. a [run]: no required case passed (x)",
        ReasonCode.COMPILED: "2 required cases compiled, not run (compiled is not a pass), "
                             "e.g. a: compile-only tier: no GPU",
        ReasonCode.UNKNOWN_STATUS: "1 results have an unknown status: a",
        ReasonCode.NONE_PASSED: "no required case passed (2 of 2 not supported, the rest "
                                "waived): nothing was shown to work",
        ReasonCode.CAPABILITIES_UNKNOWN: "the target's capabilities are unknown (capabilities"
                                         "() failed or not recorded)",
        ReasonCode.CAPABILITIES_SHORT: "declares ops none and dtypes none and placements "
                                       "none; core needs at least ops matmul",
    }
    assert set(texts) == set(ReasonCode)
    for code, text in texts.items():
        assert parse(text).code is code, text
    with pytest.raises(ReasonError, match="unknown reason"):
        parse("looks fine to me")


def test_every_field_of_an_outcome_is_a_key_of_its_record() -> None:
    """A field added to the runner's Outcome reaches results.jsonl: the record's schema
    knows it (an unknown key would refuse every line the plugin writes)."""
    from dataclasses import fields

    from pytest_xtc.core.outcome import Outcome

    assert {f.name for f in fields(Outcome)} <= set(CaseRecord.KEYS)
