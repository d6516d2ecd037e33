"""The per-case check seam (core/judging/checks), the order check's choice of neighbours
(core/execution/order.py) and the all-pairs coverage of the catalog
(conformance/coverage.py)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_xtc import ops
from pytest_xtc.cli import main
from pytest_xtc.conformance import builtin_cases, coverage, coverage_table
from pytest_xtc.conformance.coverage import Rule, all_pairs, feasible_pairs, measure
from pytest_xtc.core.adapter import TargetSpec
from pytest_xtc.core.adapters import declcache
from pytest_xtc.core.execution import order
from pytest_xtc.core.execution.runner import Settings, run_case
from pytest_xtc.core.judging import checks
from pytest_xtc.core.judging.checks import Finding, Seen
from pytest_xtc.core.outcome import Status
from pytest_xtc.report.parts.records import CaseRecord
from pytest_xtc.report.render.check_lines import by_target
from pytest_xtc.targets.host import HostTarget

HOST = HostTarget(TargetSpec("host", "host"))


class LargestMagnitude:
    """An example check, as a vendor or a maintainer would add one: outputs of random
    cases stay under a magnitude limit."""

    name = "magnitude"
    limit = 1e6

    def run(self, seen: Seen) -> Finding | None:
        if seen.case.values != "random":
            return None
        top = max(float(np.abs(o).max()) for call in seen.calls for o in call.outputs)
        problems = [f"an output reaches {top:.3g}, over {self.limit:g}"] if top > self.limit else []
        return Finding(problems, {"top": top})

    def lines(self, target: str, facts: Sequence[Mapping[str, Any]]) -> list[str]:
        return [f"{target}: largest output {max(f['top'] for f in facts):.3g}"] if facts else []


def test_adding_a_check_is_one_object_in_the_list(tmp_path: Path, monkeypatch) -> None:
    case = next(c for c in builtin_cases() if c.id == "matmul-float32-13x11x7-tile")
    monkeypatch.setattr(checks, "CHECKS", [*checks.CHECKS, LargestMagnitude()])
    passed = run_case(HOST, case, tmp_path / "a", Settings())
    assert passed.status is Status.PASSED and passed.checks
    assert set(passed.checks) >= {"results", "guard", "magnitude"}
    found = by_target([passed])["host"].lines("host")
    assert any(line.startswith("host: largest output") for line in found), found
    assert any("guard bands checked on 1 of 1 runs" in line for line in found), found
    monkeypatch.setattr(LargestMagnitude, "limit", 1e-3)
    failed = run_case(HOST, case, tmp_path / "b", Settings())
    assert failed.status is Status.FAILED and "over 0.001" in failed.message


def test_reports_read_records_written_before_the_check_list() -> None:
    old = CaseRecord(target="t", case="c", status="passed", guarded=True, precision=None)
    assert by_target([old])["t"].lines("t") == ["t: guard bands checked on 1 of 1 runs"]


def test_the_neighbour_is_unlike_the_case_and_seeded() -> None:
    every = builtin_cases()
    pool = order.pool(every)
    assert len({(c.op, c.dtype) for c in pool}) == len(pool)
    case = next(c for c in every if c.id == "matmul-float64-13x11x7-tile+interchange")
    picks = {order.neighbour(case, pool, seed).id for seed in range(20)}  # type: ignore[union-attr]
    chosen = [c for c in pool if c.id in picks]
    assert len(picks) > 1 and all(c.dtype != case.dtype and c.op != case.op for c in chosen)
    assert order.neighbour(case, pool, 3) == order.neighbour(case, pool, 3)
    previous = order.neighbour(case, pool, 3).id  # type: ignore[union-attr]
    assert order.neighbour(case, pool, 3, previous).id != previous  # type: ignore[union-attr]


def test_all_pairs_covers_every_allowed_pair_and_keeps_the_rules() -> None:
    values: dict[str, list[Any]] = {"a": [1, 2, 3, 5], "b": [1, 3, 7], "c": ["x", "y", "z"],
                                    "d": [0, 1, 2]}
    rules = [Rule.parse("b >= a", list(values)), Rule.parse("d <= b // 2", list(values))]
    rows = all_pairs(values, rules, seed=4)
    assert all(r.allows(row) for row in rows for r in rules)
    full = [dict(zip(values, v, strict=True)) for v in itertools.product(*values.values())]
    allowed = [row for row in full if all(r.allows(row) for r in rules)]
    reachable = {
        ((a, row[a]), (b, row[b])) for row in allowed for a, b in itertools.combinations(values, 2)
    }
    assert feasible_pairs(values, rules) == reachable
    assert measure("t", rows, values, rules).complete
    assert len(rows) < len(allowed) / 2
    # the pair of the only two parameters a rule names: held to it, none left to extend
    two = {"a": [1, 2], "b": [1, 2]}
    assert feasible_pairs(two, [Rule.parse("b >= a", list(two))]) == {
        (("a", 1), ("b", 1)), (("a", 1), ("b", 2)), (("a", 2), ("b", 2))}


def test_all_pairs_rows_are_kept_across_sessions_and_a_damaged_entry_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    values: dict[str, list[Any]] = {"a": [1, 2, 3], "b": [1, 3, 7], "c": ["x", "y"]}
    rules = [Rule.parse("b >= a", list(values))]
    fresh = all_pairs(values, rules, seed=1)
    assert coverage.remembered_rows(values, rules, 1, []) == fresh
    kept_file = declcache.cache_file(coverage.CACHE_NAME)
    assert kept_file is not None and kept_file.is_file()
    calls: list[int] = []

    def search(*args: Any) -> list[dict[str, Any]]:
        calls.append(1)
        return fresh

    monkeypatch.setattr(coverage, "all_pairs", search)
    assert coverage.remembered_rows(values, rules, 1, []) == fresh
    assert calls == []  # read back, not searched again
    kept = declcache.load(coverage.CACHE_NAME)
    key = next(iter(kept))
    # the last row kept covers a pair no earlier row does; a value not given; not rows
    for damaged in (kept[key][:-1], [{**kept[key][0], "a": 7}], "rows"):
        declcache.store({key: damaged}, coverage.CACHE_NAME)  # sealed: only checked
        assert coverage.remembered_rows(values, rules, 1, []) == fresh
    assert len(calls) == 3


def test_a_rule_it_does_not_understand_is_refused() -> None:
    with pytest.raises(ValueError, match="write NAME OP NAME"):
        Rule.parse("h + 1 >= r", ["h", "r"])


def test_catalog_covers_every_pair_with_a_resnet_projection(capsys) -> None:
    table = coverage_table()
    assert set(table) == {*ops.modules(), "graph"}  # every op, each pair of its values
    assert all(c.complete for c in table.values())
    assert set(table["transpose"].values["axes"]) == set(itertools.permutations(range(3)))
    conv = table["conv2d"].values
    assert set(conv["r"]) == set(conv["s"]) == {1, 3, 5, 7}
    assert set(conv["stride_h"]) == set(conv["stride_w"]) == {1, 2, 3}
    assert table["matmul"].values["k"][4099] > 0
    ids = {c.id for c in builtin_cases()}
    assert len(ids) == len(builtin_cases())  # a pair a hand-picked case holds is not repeated
    assert "conv2d-float32-2x10x11x16-1x1x8-s2-p0-tile" in ids  # 1x1 stride 2, batch 2
    assert main(["coverage"]) == 0
    out = capsys.readouterr().out
    assert "conv2d: 89 cases; pairs covered 2760 of 2760" in out and "stride_h  1:" in out


def test_a_cover_build_template_naming_no_parameter_is_refused() -> None:
    spec = {"values": {"i": [1, 2], "j": [3]}, "build": {"shape": [i := "i", "jj"]}}
    with pytest.raises(ValueError, match="build names 'jj', not a parameter"):
        coverage.build_arguments(spec, {"i": 1, "j": 3})
    assert coverage.build_arguments({**spec, "build": {"shape": [i, "j"], "n": 0}},
                                    {"i": 1, "j": 3}) == {"shape": [1, 3], "n": 0}
