"""The report page's parts without a browser: the pictures of the wrong-element maps a
failure's record holds, the case table, "not selected" for a filtered run, the
environment as tables, every timed op in the chart, and ``xtc-conformance history``."""

from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from pytest_xtc import cli
from pytest_xtc.core.judging.wrong_map import wrong_map
from pytest_xtc.report import bundle
from pytest_xtc.report.parts.records import CaseRecord
from pytest_xtc.report.render import chart, page
from pytest_xtc.report.render.page import cases, pictures, sections
from tests.acceptance.test_report import CASES, make_bundle


def record(case: str, status: str = "passed", **extra: object) -> CaseRecord:
    return CaseRecord(target="t", case=case, status=status, **extra)  # type: ignore[arg-type]


def test_a_picture_per_wrong_output_none_for_a_bad_map() -> None:
    crossed = wrong_map("C", np.fliplr(np.eye(4, dtype=bool)) | np.eye(4, dtype=bool))
    failed = record("a", "failed", checks={"results": {"wrong_maps": [crossed]}})
    drawn = "\n".join(pictures.pictures(failed))
    assert drawn.count('<svg class="wrong"') == 1 and "C [4x4]: 8 wrong" in drawn
    # one rect per run of wrong blocks in a row: 1001, 0110, 0110, 1001
    assert len(re.findall(r'<rect x="\d+" y="\d+" width', drawn)) == 6
    for bad in ({"blocks": ["01", "2"]}, {"blocks": ["0x"]}, {"blocks": []}, "no"):
        assert pictures.pictures(record("a", "failed",
                                        checks={"results": {"wrong_maps": [bad]}})) == []
    assert pictures.pictures(record("a", "failed")) == []


def test_csp_allows_the_script_by_its_hash_alone() -> None:
    policy = cases.csp()
    assert "default-src 'none'" in policy and "'unsafe-inline'" not in policy.split("script")[1]
    assert re.fullmatch(r".*script-src 'sha256-[A-Za-z0-9+/]{43}='", policy)


@pytest.fixture
def synthetic(tmp_path: Path) -> Path:
    ids = list(CASES)[:4]
    make_bundle(tmp_path / "b", [(ids[0], "passed"), (ids[1], "failed"), (ids[2], "passed")])
    return tmp_path / "b"


def test_a_row_per_case_and_missing_unless_filtered(synthetic: Path) -> None:
    report, records, _ = bundle.read(synthetic)
    markup = page.render(report, records)
    rows = re.findall(r'<tr data-status="(\w+)" data-key="([^"]*)">', markup)
    assert sorted(s for s, _ in rows) == ["failed", "passed", "passed"]
    head = markup.split('id="verdicts"')[1].split("</thead>")[0]
    assert ">missing<" in head  # an unfiltered run that left cases out: missing, in red
    run = replace(report.runs[0], filters=("-k relu",))
    filtered = page.render(replace(report, runs=(run,)), records)
    head = filtered.split('id="verdicts"')[1].split("</thead>")[0]
    assert ">not selected<" in head and ">missing<" not in head
    missing = sum(1 for c in CASES) - 3
    assert f'<span class="skip">{missing}</span>' in filtered
    assert f'<span class="bad">{missing}</span>' in markup


def test_the_environment_as_tables(synthetic: Path) -> None:
    report, _, _ = bundle.read(synthetic)
    run = replace(report.runs[0], system={"packages": {"numpy": "2.2.6", "xtc-tools": "0.3.2"},
                                          "cpu": "x"})
    text = "\n".join(sections.environment(replace(report, runs=(run,))))
    assert "<td>numpy</td><td><span class=mono>2.2.6</span></td>" in text
    assert "{'" not in text and "{&#x27;" not in text


def test_every_timed_op_in_the_chart() -> None:
    records = [record("matmul-float32-4x4x4-none", perf={"gflops": 1.0, "numpy_gflops": 2.0,
                                                          "flops": 128}),
               record("pad2d-float32-1x8x8x3-pad2-none", perf={"gflops": None,
                                                                "time_vs_numpy": 0.25}),
               record("pad2d-float32-2x8x8x3-pad2-none", perf={"time_vs_numpy": 0.75}),
               record("relu-float32-5x7-none", perf={"time_vs_numpy": 2.0, "invalid": "x"})]
    assert chart.ratio_by_group(records) == {"t pad2d float32": 0.5}  # the invalid left out
    assert set(chart.gflops_by_group(records)) == {"t matmul float32 small"}
    if importlib.util.find_spec("matplotlib") is not None:
        svg = chart.render(records[1:3])  # no FLOP count at all: still a chart
        assert svg is not None and "t pad2d float32" in svg


def test_history_of_bundles(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = list(CASES)[:2]
    make_bundle(tmp_path / "old", [(ids[0], "passed"), (ids[1], "passed")])
    make_bundle(tmp_path / "new", [(ids[0], "passed"), (ids[1], "failed")])
    out = tmp_path / "h.html"
    assert cli.main(["history", str(tmp_path / "old"), str(tmp_path / "new"),
                     "-o", str(out)]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[0].startswith(f"#1 {tmp_path / 'old'} (started ") and "2 results" in said[0]
    assert said[-1] == f"{out}: 2 bundles, 0 kernels timed"
    markup = out.read_text()
    assert markup.count("<script>") == 1 and cases.csp() in markup
    row = re.search(rf'<tr data-status="failed" data-key="[^"]*">.*?{re.escape(ids[1])}.*?</tr>',
                    markup)
    assert row and 'title="#1: passed"' in row[0] and 'title="#2: failed"' in row[0]
    assert cli.main(["history", str(tmp_path / "old"), str(tmp_path / "nowhere"),
                     "-o", str(tmp_path / "x.html")]) == 3
    assert "no such bundle directory" in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()


def test_history_trend_of_medians(tmp_path: Path) -> None:
    from pytest_xtc.report.render.page import history

    assert history.trend_svg([1e-6, None, 2e-6]).count("<polyline") == 1
    assert history.trend_svg([1e-6, None]) == ""
    ids = list(CASES)[:1]
    for i, median in enumerate((1e-6, 3e-6)):
        make_bundle(tmp_path / f"b{i}", [(ids[0], "passed")])
        lines = (tmp_path / f"b{i}" / "results.jsonl").read_text().splitlines()
        data = [json.loads(line) for line in lines]
        data[0]["perf"] = {"median_s": median}
        loaded = history.Loaded(f"b{i}", bundle.read(tmp_path / f"b{i}")[0],
                                [CaseRecord.from_dict(d, "x") for d in data])
        if i == 0:
            first = loaded
    markup = history.render([first, loaded])
    assert "3.00x" in markup and "1 µs" in markup and "3 µs" in markup
