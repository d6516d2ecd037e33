"""The model's dimensions (issue 52, point 6): for each class, a faulty host variant
(``selftest/faults_model.py``) is rejected by a catalog case, and the real host passes the
same cases with three seeds; a user's case file says every dimension the model has."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from pytest_xtc.conformance import builtin_cases
from pytest_xtc.core.adapter import TargetSpec
from pytest_xtc.core.cases.case import Case, load_case_paths
from pytest_xtc.core.cases.casefile import CaseFileError
from pytest_xtc.core.execution import guard
from pytest_xtc.core.execution.runner import Settings, run_case
from pytest_xtc.core.outcome import Status
from pytest_xtc.ops.builder import GraphBuilder
from pytest_xtc.selftest import faults, proof
from pytest_xtc.targets.host import HostTarget

SEEDS = (0, 1, 2)
#: fault -> catalog cases that must reject it (the dimension it hides in)
CAUGHT_BY = {
    "pad-constant-class-lost": ["pad-float32-5x7-pad0:1-2_1:0-3-vnan-tile",  # attributes
                                "pad2d-float32-2x8x3x3-pad1-vinf-int-none"],
    "negative-axis-misread": [
        "pad-float32-5x17-pad0:1-2_1:1-0-v-2.5-negative_axes-tile-element-offset"],
    "fan-out-reads-consumed": ["graph-float32-matmul-relu-fan_out-3x3-none"],  # topologies
    "drops-small-terms": ["matmul-float32-16x16x29-descript-wide-odd_then_aligned-offset"],
    "first-call-alignment-kept": [  # call-to-call variation
        "matmul-float32-16x17x13-strip_mine-exact-aligned_then_odd-offset"],
    "pack-first-input-misread": ["matmul-float32-13x11x7-model_pack_at"],  # schedules
    "stride-one-conv-specials": [  # special values under every algorithmic shape
        "conv2d-float32-1x1x8x3-1x5x8-s2x1-p0-0_1-2-descript-special-aligned_then_odd-offset"],
}
#: past 2^24 elements: over the default memory budget, run with it raised (one seed here;
#: the self-test runs three)
HUGE = "relu-float32-8193x4096-none"


def catalog(*ids: str) -> list[Case]:
    found = {c.id: c for c in builtin_cases()}
    return [found[i] for i in ids]


@pytest.mark.parametrize("name", sorted(CAUGHT_BY))
def test_model_fault_rejected_real_host_accepted(name: str, tmp_path: Path) -> None:
    chosen = catalog(*CAUGHT_BY[name])
    bad = faults.make(name)
    verdicts = [run_case(bad, c, tmp_path / f"bad-{n}", Settings(0)) for n, c in enumerate(chosen)]
    assert all(o.status is Status.FAILED for o in verdicts), [o.message for o in verdicts]
    host = HostTarget(TargetSpec("host", "host"))
    for seed in SEEDS:
        for n, case in enumerate(chosen):
            outcome = run_case(host, case, tmp_path / f"host-{seed}-{n}", Settings(seed))
            assert outcome.status is Status.PASSED, (seed, case.id, outcome.message)


def test_a_float32_counter_past_2_24_is_rejected_where_the_budget_allows(
        tmp_path: Path) -> None:
    (case,) = catalog(HUGE)
    assert case.graph["outputs"] and np.prod([8193, 4096]) > 1 << 24
    skipped = run_case(faults.make("index-float32"), case, tmp_path / "default", Settings(0))
    assert skipped.status is Status.SKIPPED and "budget" in skipped.message
    raised = replace(Settings(0), max_case_bytes=proof.BUDGET)
    bad = run_case(faults.make("index-float32"), case, tmp_path / "bad", raised)
    assert bad.status is Status.FAILED and "never written" in bad.message
    host = run_case(HostTarget(TargetSpec("host", "host")), case, tmp_path / "host", raised)
    assert host.status is Status.PASSED, host.message


def test_every_model_fault_is_in_the_selftest() -> None:
    assert set(CAUGHT_BY) | {"index-float32"} <= set(faults.FAULTS)
    ids = {c.id for c in proof.selected_cases()}
    assert {i for chosen in CAUGHT_BY.values() for i in chosen} | {HUGE} <= ids


def test_operands_move_between_calls() -> None:
    assert [guard.offset("aligned_then_odd", 4, 1, call) for call in range(3)] == [0, 3, 3]
    assert [guard.offset("odd_then_aligned", 4, 1, call) for call in range(3)] == [3, 0, 0]
    with pytest.raises(ValueError, match="two joined by '_then_'"):
        guard.offset("aligned_then_sideways", 4, 0, 1)


def _case_file(folder: Path, **extra: object) -> Path:
    g = GraphBuilder("moved")
    y = g.node("relu", "Y", [g.tensor("X", (4, 9), "float32")])
    path = folder / "moved.yaml"
    path.write_text(yaml.safe_dump({**g.output(y), **extra}))
    return path


def test_a_case_file_says_alignment_per_call_and_every_value_kind(tmp_path: Path) -> None:
    path = _case_file(tmp_path, align=["aligned", "aligned_then_odd"], values=["wide", "large"])
    loaded = load_case_paths([path])
    assert {(c.align, c.values) for c in loaded} == {
        (a, v) for a in ("aligned", "aligned_then_odd") for v in ("wide", "large")}
    moved = next(c for c in loaded if c.align == "aligned_then_odd" and c.values == "wide")
    assert moved.id == "moved-float32-4x9-none-wide-aligned_then_odd-offset"
    bad = faults.make("first-call-alignment-kept")
    assert run_case(bad, moved, tmp_path / "bad", Settings(0)).status is Status.FAILED
    host = HostTarget(TargetSpec("host", "host"))
    assert run_case(host, moved, tmp_path / "host", Settings(0)).status is Status.PASSED
    with pytest.raises(CaseFileError, match=r"moved.yaml: align: operand alignment 'sideways'"):
        load_case_paths([_case_file(tmp_path, align=["sideways"])])


def test_value_kinds_wide_and_large() -> None:
    (case,) = catalog("matmul-float32-16x16x29-descript-wide-odd_then_aligned-offset")
    a = np.abs(case.make_inputs(0)[0])
    assert a.min() >= 1e-3 and a.max() <= 1e3 and a.max() / a.min() > 1e4
    (graph,) = [c for c in builtin_cases() if c.op == "graph" and c.values == "large"
                and "two_outputs" in c.id and "matmul" in c.id][:1] or [None]
    if graph is not None:  # V = A B then V V: every result finite in float32
        inputs = graph.make_inputs(0)
        assert np.abs(inputs[0]).max() < 2.0 ** 23
