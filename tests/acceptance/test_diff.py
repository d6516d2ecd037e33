"""``xtc-conformance diff``: status changes, new and gone cases, kernels slower or faster
beyond the noise of their repeats (Mann-Whitney U), on records made here and on real
bundles of the host target (a bundle against itself, and against a doctored slowdown)."""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_xtc import cli
from pytest_xtc.report import bundle
from pytest_xtc.report.parts.records import CaseRecord, dumps_line, read_record
from pytest_xtc.report.render import diff_lines
from pytest_xtc.report.rules import comparison
from tests.support import bundles


def brute_p(a: list[float], b: list[float]) -> float:
    """The two-sided exact p-value by enumerating every split of the pooled values."""
    pooled, n = a + b, len(a)

    def u(first: tuple[float, ...], second: list[float]) -> float:
        return sum((x > y) + 0.5 * (x == y) for x in first for y in second)

    observed = u(tuple(a), b)
    centre = len(a) * len(b) / 2
    splits = list(itertools.combinations(range(len(pooled)), n))
    extreme = 0
    for chosen in splits:
        first = tuple(pooled[i] for i in chosen)
        second = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        extreme += abs(u(first, second) - centre) >= abs(observed - centre) - 1e-9
    return min(1.0, extreme / len(splits))


def test_mann_whitney_is_the_exact_test() -> None:
    assert comparison.mann_whitney([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(2 / 252)
    assert comparison.mann_whitney([6, 7, 8, 9, 10], [1, 2, 3, 4, 5]) == pytest.approx(2 / 252)
    assert comparison.mann_whitney([1, 3, 5, 7, 9], [2, 4, 6, 8, 10]) > 0.5
    rng = random.Random(7)
    for _ in range(20):
        a = [rng.random() for _ in range(rng.randint(3, 5))]
        b = [rng.random() + rng.choice([0, 0.3]) for _ in range(rng.randint(3, 6))]
        assert comparison.mann_whitney(a, b) == pytest.approx(brute_p(a, b)), (a, b)
    big = [float(i) for i in range(30)]
    assert comparison.mann_whitney(big, [x + 100 for x in big]) < 1e-9  # normal approximation
    assert comparison.mann_whitney(big, big) > 0.9


def record(case: str, status: str = "passed", times: list[float] | None = None) -> CaseRecord:
    return CaseRecord(target="host", case=case, status=status,
                      times=tuple(times) if times is not None else None)


BASE = [1.00, 1.01, 0.99, 1.02, 0.98]


def test_compare_finds_each_kind_of_change() -> None:
    old = [record("a", times=BASE), record("b", times=BASE), record("c", times=BASE),
           record("d", times=BASE), record("e", "failed"), record("f", times=BASE),
           record("gone"), record("g", times=BASE[:3])]
    new = [record("a", times=[t * 1.5 for t in BASE]),  # slower, ranges apart
           record("b", times=[t * 0.6 for t in BASE]),  # faster
           record("c", times=[0.90, 1.20, 1.00, 0.97, 1.05]),  # noise: overlaps
           record("d", times=[t * 1.03 for t in BASE]),  # apart, but within the threshold
           record("e", "passed"), record("f", "failed"), record("new"),
           record("g", times=[t * 2 for t in BASE])]  # 3 repeats before: not tested
    found = comparison.compare(old, new)
    assert [s.case for s in found.slower] == ["host-a"]
    assert [s.case for s in found.faster] == ["host-b"]
    assert found.slower[0].ratio == pytest.approx(1.5)
    assert found.slower[0].p == pytest.approx(2 / 252)
    assert [(c.case, c.old, c.new, c.regression) for c in found.changed] == [
        ("host-e", "failed", "passed", False), ("host-f", "passed", "failed", True)]
    assert found.added == ["host-new"] and found.gone == ["host-gone"]
    assert found.regressions == ["host-f", "host-a"]
    assert (found.timed, found.untimed) == (4, 1)
    text = "\n".join(diff_lines.lines(found))
    assert "host-a" in text and "1.50x" in text and "Mann-Whitney" in text
    assert json.loads(json.dumps(found.to_dict()))["regressions"] == ["host-f", "host-a"]


def test_same_records_compare_empty() -> None:
    records = [record("a", times=BASE), record("b", "failed"), record("c", "skipped")]
    found = comparison.compare(records, records)
    assert found.empty and not found.regressions and found.timed == 1


# -- real bundles -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def host_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bundle of a few host cases (one relu float64 failing: expectations ignored)."""
    work = tmp_path_factory.mktemp("diff-bundle")
    return bundles.host_bundle(work)


def spread(record: CaseRecord) -> float:
    times = [float(t) for t in record.times or ()]
    return max(times) / min(times)


def doctored(source: Path, dest: Path, slower: bool) -> tuple[str, float]:
    """A copy of the bundle with the kernel times of its least noisy passed case scaled
    beyond their spread (3 x max/min: tiny kernels on a loaded machine spread 10x), its
    manifest rewritten to match; the case's key and the factor."""
    shutil.copytree(source, dest)
    lines = (dest / "results.jsonl").read_text().splitlines()
    records = [read_record(json.loads(line), "test") for line in lines]
    timed = [i for i, r in enumerate(records) if r.status == "passed" and r.times]
    index = min(timed, key=lambda i: spread(records[i]))
    chosen = records[index]
    factor = 3 * spread(chosen) if slower else 1 / (3 * spread(chosen))
    records[index] = replace(chosen, times=tuple(float(t) * factor for t in chosen.times or ()))
    (dest / "results.jsonl").write_text("".join(dumps_line(r) for r in records))
    sums = [line.split("  ", 1) for line in (dest / bundle.MANIFEST).read_text().splitlines()]
    (dest / bundle.MANIFEST).write_text("".join(
        f"{hashlib.sha256((dest / name).read_bytes()).hexdigest()}  {name}\n"
        for _, name in sums))
    return chosen.key, factor


def test_a_bundle_against_itself_reports_nothing(host_bundle: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["diff", str(host_bundle), str(host_bundle), "--fail-on", "changes"]) == 0
    out = capsys.readouterr().out
    assert "0 status changes (0 regressions), 0 new, 0 gone, 0 slower, 0 faster" in out
    _, records, _ = bundle.read(host_bundle)
    assert any(r.times and len(r.times) >= comparison.MIN_SAMPLES for r in records), "no repeats"


def test_a_doctored_slowdown_is_found_and_fails_ci(host_bundle: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    slow = tmp_path / "slow"
    key, factor = doctored(host_bundle, slow, slower=True)
    assert cli.main(["diff", str(host_bundle), str(slow)]) == 0  # --fail-on never
    assert cli.main(["diff", str(host_bundle), str(slow), "--fail-on", "regressions"]) == 1
    capsys.readouterr()
    assert cli.main(["diff", str(host_bundle), str(slow), "--json",
                     "--html", str(tmp_path / "page.html")]) == 0
    found = json.loads(capsys.readouterr().out)
    assert [s["case"] for s in found["slower"]] == [key] and found["regressions"] == [key]
    assert found["slower"][0]["ratio"] == pytest.approx(factor)
    page = (tmp_path / "page.html").read_text()
    assert "Changes since the baseline" in page and key in page
    fast = tmp_path / "fast"
    doctored(host_bundle, fast, slower=False)
    assert cli.main(["diff", str(host_bundle), str(fast), "--fail-on", "regressions"]) == 0
    assert "1 faster" in capsys.readouterr().out


def test_diff_refuses_what_is_not_a_bundle(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["diff", str(tmp_path), str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(tmp_path) in err and "bundle" in err
    assert cli.main(["diff", str(tmp_path), str(tmp_path), "--alpha", "2"]) == 2


def test_a_bundle_changed_after_writing_is_compared_with_a_warning(
        host_bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    changed = tmp_path / "changed"
    shutil.copytree(host_bundle, changed)
    with (changed / "results.jsonl").open("a") as results:
        results.write("")  # the same bytes: no warning
    assert cli.main(["diff", str(host_bundle), str(changed)]) == 0
    assert capsys.readouterr().err == ""
    (changed / "summary.md").write_text("forged\n")
    assert cli.main(["diff", str(host_bundle), str(changed)]) == 0
    err = capsys.readouterr().err
    assert f"warning: {changed}: summary.md: checksum mismatch" in err
