"""``xtc-conformance diff``: status changes, new and gone cases, kernels slower or faster
beyond the noise of their repeats (Mann-Whitney U), on records made here and on real
bundles of the host target (a bundle against itself, and against a doctored slowdown)."""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import shutil
import statistics
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


#: Kernels of 10 us or more on any host (64x64x64 float32 matmuls: 0.5 MFLOP each)
LONG = "matmul-float32-64x64x64-tile or matmul-float32-64x64x64-vectorize"


@pytest.fixture(scope="module")
def host_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bundle of a few host cases (one relu float64 failing: expectations ignored)."""
    work = tmp_path_factory.mktemp("diff-bundle")
    return bundles.host_bundle(work, f"{bundles.FEW} or {LONG}")


def spread(record: CaseRecord) -> float:
    times = [float(t) for t in record.times or ()]
    return max(times) / min(times)


def rewrite(dest: Path, records: list[CaseRecord]) -> None:
    """Write ``records`` as the bundle's results, its manifest rewritten to match."""
    (dest / "results.jsonl").write_text("".join(dumps_line(r) for r in records))
    sums = [line.split("  ", 1) for line in (dest / bundle.MANIFEST).read_text().splitlines()]
    (dest / bundle.MANIFEST).write_text("".join(
        f"{hashlib.sha256((dest / name).read_bytes()).hexdigest()}  {name}\n"
        for _, name in sums))


def read_results(path: Path) -> list[CaseRecord]:
    lines = (path / "results.jsonl").read_text().splitlines()
    return [read_record(json.loads(line), "test") for line in lines]


STEADY = (1.0, 1.02, 0.98, 1.01, 0.99)  # a kernel's repeats on a quiet machine


def doctored(source: Path, dest: Path, factor: float) -> str:
    """A copy of the bundle where one passed kernel of 10 us or more (median) has steady
    repeats (:data:`STEADY` times its median: this machine, shared by many, spreads them
    up to 100x) scaled by ``factor``, numpy's times unchanged (the kernel, not the
    machine); the case's key."""
    shutil.copytree(source, dest)
    records = read_results(dest)
    timed = [i for i, r in enumerate(records) if r.status == "passed" and r.times
             and statistics.median(map(float, r.times)) >= 10e-6]
    assert timed, "no kernel of 10 us or more"
    chosen = records[timed[0]]
    median = statistics.median(map(float, chosen.times or ()))
    records[timed[0]] = replace(chosen, times=tuple(median * f * factor for f in STEADY))
    rewrite(dest, records)
    return chosen.key


def steady(records: list[CaseRecord], factor: float, numpy: float) -> list[CaseRecord]:
    """``records`` with steady repeats (:data:`STEADY` times each median) scaled by
    ``factor`` and numpy's median by ``numpy``, as a machine that much slower would."""
    found = []
    for r in records:
        if r.times and r.perf and r.perf.get("numpy_median_s"):
            median = statistics.median(map(float, r.times))
            perf = {**r.perf, "numpy_median_s": r.perf["numpy_median_s"] * numpy}
            r = replace(r, times=tuple(median * f * factor for f in STEADY), perf=perf)
        found.append(r)
    return found


def test_a_bundle_against_itself_reports_nothing(host_bundle: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["diff", str(host_bundle), str(host_bundle), "--fail-on", "changes"]) == 0
    out = capsys.readouterr().out
    assert "0 regressions (0 status changes, 0 kernels slower), 0 faster, 0 new, 0 gone" in out
    _, records, _ = bundle.read(host_bundle)
    assert any(r.times and len(r.times) >= comparison.MIN_SAMPLES for r in records), "no repeats"


def test_a_doctored_slowdown_is_found_and_fails_ci(host_bundle: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A 1.5x slowdown of one kernel of 10 us or more: found; terminal, JSON and page
    give the same numbers."""
    base, slow = tmp_path / "base", tmp_path / "slow"
    doctored(host_bundle, base, 1.0)
    key = doctored(host_bundle, slow, 1.5)
    host_bundle = base
    assert cli.main(["diff", str(host_bundle), str(slow)]) == 0  # --fail-on never
    terminal = capsys.readouterr().out
    assert cli.main(["diff", str(host_bundle), str(slow), "--fail-on", "regressions"]) == 1
    capsys.readouterr()
    assert cli.main(["diff", str(host_bundle), str(slow), "--json",
                     "--html", str(tmp_path / "page.html")]) == 0
    found = json.loads(capsys.readouterr().out)
    assert [s["case"] for s in found["slower"]] == [key] and found["regressions"] == [key]
    assert found["slower"][0]["ratio"] == pytest.approx(1.5)
    page = (tmp_path / "page.html").read_text()
    assert "Changes since the baseline" in page and key in page
    # one set of numbers: the terminal's headline, the JSON's summary, the page's headline
    numbers = found["summary"]
    assert numbers["regressions"] == numbers["slower"] == 1
    said = f"{numbers['regressions']} regressions ({numbers['changed']} status changes, "
    said += f"{numbers['slower']} kernels slower), {numbers['faster']} faster"
    assert said in terminal.splitlines()[0] and said in page
    fast = tmp_path / "fast"
    doctored(host_bundle, fast, 1 / 1.5)
    assert cli.main(["diff", str(host_bundle), str(fast), "--fail-on", "regressions"]) == 0
    assert "0 kernels slower), 1 faster" in capsys.readouterr().out


def test_a_slower_machine_is_no_regression(host_bundle: Path) -> None:
    """Every kernel and numpy 2x slower (a loaded machine): nothing found; the kernels 2x
    slower with numpy unchanged (the build): every kernel compared is found."""
    base = steady(read_results(host_bundle), 1.0, 1.0)
    busy = comparison.compare(base, steady(read_results(host_bundle), 2.0, 2.0))
    assert busy.timed > 0 and not busy.regressions and not busy.faster
    worse = comparison.compare(base, steady(read_results(host_bundle), 2.0, 1.0))
    assert len(worse.slower) == worse.timed == busy.timed


def test_tiny_kernels_are_not_compared() -> None:
    tiny = [1e-8, 1.1e-8, 0.9e-8, 1e-8, 1.2e-8]
    found = comparison.compare([record("a", times=tiny)],
                               [record("a", times=[t * 27 for t in tiny])])
    assert not found.slower and found.short == 1 and found.summary()["too_short"] == 1


def test_the_pair_noise_raises_the_minimum_effect() -> None:
    rng = random.Random(5)
    old = [record(f"k{i}", times=BASE) for i in range(20)]
    moved = [rng.choice([0.7, 1.0, 1.4]) for _ in range(20)]  # kernels moved by load alone
    new = [record(f"k{i}", times=[t * m for t in BASE]) for i, m in enumerate(moved)]
    found = comparison.compare(old, new)
    assert found.effect > 0.4 and not found.slower and not found.faster
    quiet = comparison.compare(old, [record(f"k{i}", times=[t * (1.4 if i == 0 else 1.0)
                                                            for t in BASE]) for i in range(20)])
    assert [s.case for s in quiet.slower] == ["host-k0"] and quiet.effect == 0.1


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


# -- two runs of one build: what moves between runs is not a change ----------------------


def timed(case: str, times: list[float], numpy: float = 1e-3,
          primitives: tuple[str, ...] = ()) -> CaseRecord:
    return CaseRecord(target="host", case=case, status="passed", times=tuple(times),
                      perf={"numpy_median_s": numpy}, traits={"primitives": list(primitives)})


def same_build_pair(seed: int, kernels: int = 170, between: float = 0.15,
                    within: float = 0.01) -> tuple[list[CaseRecord], list[CaseRecord]]:
    """Two runs of one build: each kernel's time moved by a log-normal factor of sigma
    ``between`` per run (its repeats, consecutive calls, share it), ``within`` apart."""
    rng = random.Random(seed)

    def run() -> list[CaseRecord]:
        found = []
        for k in range(kernels):
            level = 1e-4 * (1 + k % 7) * rng.lognormvariate(0, between)
            found.append(timed(f"k{k}", [level * rng.lognormvariate(0, within)
                                         for _ in range(5)],
                               numpy=1e-3 * rng.lognormvariate(0, between)))
        return found

    return run(), run()


def test_runs_of_one_build_moving_together_are_no_change() -> None:
    """Repeats are consecutive calls: they share their run's noise. 170 kernels moving
    between runs (sigma 15%, each kernel's repeats 1% apart): 3 pairs of 60 show a change
    (the pair's noise taken at a family-wise 1%, its estimate from 170 kernels not exact);
    the bound of 3 x MAD showed one in 21 pairs of 60. A steady pair's 1.5x: found."""
    found = [comparison.compare(*same_build_pair(seed)) for seed in range(60)]
    assert sum(not f.empty for f in found) <= 3
    old, new = same_build_pair(3, between=0.02)
    new[0] = replace(new[0], times=tuple(t * 1.5 for t in old[0].times or ()),
                     perf=old[0].perf)
    assert [s.case for s in comparison.compare(old, new).slower] == ["host-k0"]


#: One threaded kernel's repeats in two -n 2 runs of one build on 2 cores (us)
THREADED_RUNS = ([9.3, 3.9, 5.4, 1.4, 33.3], [55.6, 54.9, 56.2, 54.9, 54.0],
                 [1.4, 1.4, 1.4, 1.5, 1.4], [113.3, 110.0, 108.0, 116.8, 112.4],
                 [4.1, 4.0, 3.9, 3.9, 4.2], [52.4, 50.7, 52.0, 53.0, 52.7])


def test_threaded_kernels_are_held_against_the_threaded_noise() -> None:
    """Threaded kernels (``parallelize``) move 10x to 50x between runs with the cores
    taken by other work, which numpy's one thread does not see: held against their own
    group's noise, not the one-thread kernels'; a one-thread kernel 1.5x slower is found."""
    rng = random.Random(11)
    steady = [timed(f"s{k}", [t * 1e-5 * (1 + k) for t in BASE]) for k in range(20)]
    old, new = list(steady), list(steady)
    for k in range(12):
        a, b = rng.sample(THREADED_RUNS, 2)
        old.append(timed(f"t{k}", [t * 1e-6 for t in a], primitives=("parallelize",)))
        new.append(timed(f"t{k}", [t * 1e-6 for t in b], primitives=("parallelize",)))
    new[0] = timed("s0", [t * 1.5e-5 for t in BASE])
    found = comparison.compare(old, new)
    assert [s.case for s in found.slower] == ["host-s0"] and not found.faster
    assert found.threaded_effect > 5 and found.effect == comparison.THRESHOLD
    assert "threaded kernels" in found.headline()


def test_a_kernels_own_spread_and_its_moment_raise_its_effect() -> None:
    """A kernel whose repeats lie 5x apart in one bundle, or whose numpy time moved 3x at
    its moment (the pair's machine unchanged): its 2.5x is within its own noise."""
    steady = [timed(f"s{k}", [t * 1e-4 for t in BASE]) for k in range(20)]
    spread_old = timed("a", [1e-5, 1e-5, 5e-5, 1e-5, 1e-5])
    moved = [timed("b", [t * 1e-4 for t in BASE]), timed("b", [t * 2.5e-4 for t in BASE],
                                                      numpy=3e-3)]
    old = [*steady, spread_old, moved[0]]
    new = [*steady, timed("a", [2.5e-5 * t for t in BASE]), moved[1]]
    assert not comparison.compare(old, new).slower
    new[-1] = replace(moved[1], perf={"numpy_median_s": 1e-3})  # numpy steady: found
    assert [s.case for s in comparison.compare(old, new).slower] == ["host-b"]
