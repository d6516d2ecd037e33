"""Schedule-space exploration, the extra scheduler primitives and descript schedules, and
failure minimisation (issue 14)."""

from __future__ import annotations

import inspect
import json
import os
import re
import shlex
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_xtc.conformance import builtin_cases
from pytest_xtc.core.adapter import TargetSpec
from pytest_xtc.core.cases.case import PRIMITIVE_PARAMS, REQUIRED, CaseFileError, Schedule
from pytest_xtc.core.execution.runner import run_case
from pytest_xtc.core.execution.settings import Settings
from pytest_xtc.core.outcome import Failure, FailureKind, Outcome, Phase, Status
from pytest_xtc.exploration import explore, shrink, tally
from pytest_xtc.targets.host import HostTarget
from tests import DATA

ODD_TILE = (DATA / "odd_tile_target.py").read_text()
FAST = Settings(isolate=False, perf=False)


def case(case_id: str):  # type: ignore[no-untyped-def]
    return next(c for c in builtin_cases() if c.id == case_id)


# -- schedules as data -----------------------------------------------------------------


def test_primitive_table_matches_xtc_scheduler_interface() -> None:
    from pytest_xtc.core.xtc import xtc_env

    xtc_env.bootstrap()
    from xtc.itf.schd.scheduler import Scheduler

    for name, params in PRIMITIVE_PARAMS.items():
        signature = list(inspect.signature(getattr(Scheduler, name)).parameters.values())[1:]
        expected = [(p.name, REQUIRED if p.default is inspect.Parameter.empty else p.default)
                    for p in signature]
        assert list(params) == expected, name
    assert set(PRIMITIVE_PARAMS) == xtc_env.scheduler_primitives() - {"get_loop_nest", "backend"}


def test_keyword_arguments_bind_to_positions_and_unknown_ones_are_refused() -> None:
    schedule = Schedule.from_data("s", [
        {"node": "C"},
        {"tile": ["j", {"j1": 16}], "root": "./lo"},
        {"pack_at": ["i1", 1], "pad": True},
        {"tile": ["i", {"i1": 4}], "root": "."},
    ])
    assert schedule.steps == (("tile", ("j", {"j1": 16}, "./lo")),
                              ("pack_at", ("i1", 1, None, True)),
                              ("tile", ("i", {"i1": 4})))
    assert schedule.node == "C"
    with pytest.raises(CaseFileError, match="unknown keyword roots"):
        Schedule.from_data("s", [{"tile": ["i", {"i1": 4}], "roots": "."}])
    with pytest.raises(CaseFileError, match="must name one scheduler primitive"):
        Schedule.from_data("s", [{"tiling": ["i", {"i1": 4}]}])


def test_backend_options_and_descript_form() -> None:
    schedule = Schedule.from_data("f", {"backend": {"use_tensor_dialect": True}, "node": "C",
                                        "steps": [{"fuse_consumer_at": ["j"]}]})
    assert schedule.backend_options == {"use_tensor_dialect": True}
    assert Schedule.from_data("f", schedule.to_data()) == schedule
    with pytest.raises(CaseFileError, match="unknown backend option 'tensor'"):
        Schedule.from_data("f", {"backend": {"tensor": True}})
    described = Schedule.from_data("d", {"descript": {"i": {}, "j": {}, "k": {},
                                                      "j#8": {"vectorize": None}}})
    assert {"tile", "vectorize", "interchange"} <= described.primitives
    text = Schedule.from_data("d", {"descript": "i: parallelize\nj:\nk:\ni#4: unroll\n"})
    assert {"parallelize", "unroll", "tile"} <= text.primitives


@pytest.mark.parametrize("case_id", [
    "matmul-float64-13x11x7-split",
    "matmul-float32-13x11x7-strip_mine",
    "matmul-float32-13x11x7-buffer_at",
    "matmul-float64-13x11x7-descript",
    "conv2d-float32-2x11x13x5-5x5x7-s2-p2-fuse_producer_at",
    "matmul+relu-float32-64x64x64-fuse_consumer_at",
])
def test_new_primitives_and_descript_compute_right_on_host(case_id: str, tmp_path: Path) -> None:
    host = HostTarget(TargetSpec("host", "host"))
    outcome = run_case(host, case(case_id), tmp_path, FAST)
    assert outcome.status is Status.PASSED, outcome.message


def test_fusion_really_needs_the_tensor_dialect(tmp_path: Path) -> None:
    """Without the backend option the catalog carries, fuse_consumer_at fails in XTC."""
    from dataclasses import replace

    host = HostTarget(TargetSpec("host", "host"))
    fused = case("matmul+relu-float32-64x64x64-fuse_consumer_at")
    memref = replace(fused, schedule=replace(fused.schedule, backend=()))
    outcome = run_case(host, memref, tmp_path, FAST)
    assert outcome.status is Status.FAILED and "IndexError" in outcome.message


# -- exploration -----------------------------------------------------------------------


def test_draw_names_round_trip_and_seeds_are_stable() -> None:
    draw = explore.Draw("tile_pprprp_vr", 2, 8)
    assert draw.name == "explore-tile_pprprp_vr-2of8"
    assert explore.Draw.parse(draw.name) == draw and explore.Draw.parse("tile") is None
    assert explore.strategy_of("host-matmul-float32-1x1x1-explore-tile_oo-0of3") == "tile_oo"
    # A stable hash (never Python's hash()): the same in every process and run.
    assert explore.strategy_seed(0, "matmul-float32-13x11x7-none", "tile_oo") == 1223191389


def test_plan_is_deterministic_regenerable_and_separates_what_does_not_apply() -> None:
    bases = [case("matmul-float32-13x11x7-none"), case("conv2d-float32-1x8x8x3-3x3x4-s1-p0-none")]
    first = explore.plan(bases, 2, 0, cache=False)
    again = explore.plan(bases, 2, 0, cache=False)
    other = explore.plan(bases, 2, 1, cache=False)
    assert [(c.id, c.schedule) for c in first.cases] == [(c.id, c.schedule) for c in again.cases]
    assert [c.schedule for c in first.cases] != [c.schedule for c in other.cases]
    names = set(explore.strategy_names())
    matmul = {explore.strategy_of(c.id) for c in first.cases if c.op == "matmul"}
    skipped = {n for n, keys in first.not_applicable.items() if bases[0].id in keys}
    assert matmul | skipped == names and len(matmul) >= 14 and not matmul & skipped
    assert "conv2d-float32-1x8x8x3-3x3x4-s1-p0-none" in first.not_applicable["tile_p1"]
    assert not any(c.op == "conv2d" and explore.strategy_of(c.id) == "tile_p1"
                   for c in first.cases)
    explored = first.cases[5]
    assert explored.id.startswith("matmul-float32-13x11x7-explore-")
    assert explore.regenerate(bases[0], explored.schedule.name, 0).schedule == explored.schedule


def test_a_refused_sample_is_not_supported_and_tallied_apart(tmp_path: Path) -> None:
    from dataclasses import replace

    base = case("matmul-float32-13x11x7-none")
    refused = replace(base, schedule=Schedule("explore-tile_oo-0of1",
                                              refused=explore.REFUSED + "AssertionError: x"))
    outcome = run_case(HostTarget(TargetSpec("host", "host")), refused, tmp_path, FAST)
    assert outcome.status is Status.NOT_SUPPORTED
    assert outcome.message.startswith("XTC refused this sample")
    rows = [(refused.id, str(outcome.status), outcome.message),
            ("matmul-float32-1x1x1-explore-tile_oo-1of1", "passed", ""),
            ("matmul-float32-1x1x1-explore-tile_p1-0of1", "failed", "wrong results"),
            ("matmul-float32-1x1x1-tile", "failed", "not explored")]
    table = tally.tally(rows, {"tile_p1": 3})
    assert table == {"tile_oo": Counter({"XTC refused": 1, "passed": 1}),
                     "tile_p1": Counter({"failed": 1, "not applicable": 3})}
    assert tally.format_tally(table)[1] == "tile_p1: 1 failed, 3 not applicable"


# -- shrinking -------------------------------------------------------------------------


def test_failure_kinds_of_records_written_before_kinds_were_recorded() -> None:
    """The legacy reading: an outcome with no recorded kind is read from its text."""

    def kind(phase: Phase, message: str) -> str:
        return str(shrink.failure_kind(Outcome("c", "t", Status.FAILED, phase, message)))

    assert kind(Phase.CHECK, "wrong results (seed 1): output C") == "run: wrong results"
    assert kind(Phase.COMPILE, "compile failed: MLIRError: Unable [x.py:1]") == \
        "compile: MLIRError"
    assert kind(Phase.RUN, "crashed during run: killed by signal SIGSEGV (x)") == \
        "run: signal SIGSEGV"
    assert kind(Phase.RUN, "timed out: run exceeded its 0.5 s limit") == "run: timeout"
    assert shrink.failure_kind(Outcome("c", "t", Status.PASSED, Phase.CHECK)) is None


def test_the_runner_records_the_failure_kind_where_it_classifies_the_failure(
    tmp_path: Path,
) -> None:
    """Wrong results, a crash's signal, a timeout and an exception's type, each recorded
    as data by the runner (isolated, as by default), and kept through a record."""
    from pytest_xtc.selftest import faults

    class RaisesInCompile(HostTarget):
        def compile(self, case, workdir):  # type: ignore[no-untyped-def]
            raise KeyError("no such kernel")

    small = case("matmul-float32-13x11x7-none")
    settings = Settings(perf=False)
    adapters = {"last-row-wrong": faults.make("last-row-wrong"), "crash": faults.make("crash"),
                "hang": faults.make("hang"),
                "raises": RaisesInCompile(TargetSpec("raises", "raises"))}
    got = {name: run_case(a, small, tmp_path / name, settings) for name, a in adapters.items()}
    assert got["last-row-wrong"].kind == FailureKind(Failure.WRONG_RESULTS)
    assert got["crash"].kind == FailureKind(Failure.SIGNAL, "SIGSEGV")
    assert got["hang"].kind == FailureKind(Failure.TIMEOUT)
    assert got["raises"].kind == FailureKind(Failure.EXCEPTION, "KeyError")
    assert run_case(HostTarget(TargetSpec("host", "host")), small, tmp_path / "host",
                    settings).kind is None
    for outcome in got.values():
        again = Outcome.from_dict({**outcome.to_dict(), "nodeid": "x"})
        assert again.kind == outcome.kind and again.to_dict() == outcome.to_dict()
    old = {k: v for k, v in got["crash"].to_dict().items() if k != "kind"}
    assert Outcome.from_dict(old).kind is None  # a record written before kinds
    with pytest.raises(ValueError, match="'bug'"):
        Outcome.from_dict({**old, "kind": {"what": "bug", "detail": ""}})


def test_shrinking_compares_the_recorded_kind_not_the_message_text(tmp_path: Path) -> None:
    """The original's text reads as a crash, its recorded kind is a ValueError: shrinking
    keeps the candidates recorded as ValueError (their text saying "timed out") and never
    one recorded as a timeout (its text saying ValueError). Read from the text, nothing
    would reproduce."""
    base = case("matmul-float32-13x11x7-none")
    raised, timeout = FailureKind(Failure.EXCEPTION, "ValueError"), FailureKind(Failure.TIMEOUT)
    misleading = Outcome(base.id, "host", Status.FAILED, Phase.COMPILE,
                         "crashed during compile: killed by signal SIGSEGV", kind=raised)
    assert str(shrink.failure_kind(misleading)) == "compile: ValueError"
    assert str(shrink.failure_kind(replace(misleading, kind=None))) == "compile: signal SIGSEGV"
    seen: list[FailureKind] = []

    def run(candidate, workdir):  # type: ignore[no-untyped-def]
        from pytest_xtc.core.cases import graphs

        big = graphs.inputs(candidate.graph)[0].shape[0] > 4
        kind, text = (raised, "timed out after 1 s") if big else \
            (timeout, "compile failed: ValueError: x")
        seen.append(kind)
        return Outcome(candidate.id, "host", Status.FAILED, Phase.COMPILE, text, kind=kind)

    result = shrink.shrink(HostTarget(TargetSpec("host", "host")), base, misleading, tmp_path,
                           FAST, shrink.Budget(attempts=60), run=run)
    assert result.reproduced and str(result.kind) == "compile: ValueError"
    assert result.after.startswith("inputs 5x"), result.after  # the smallest still "big"
    assert timeout in seen  # smaller ones were tried, and refused
    legacy = shrink.shrink(HostTarget(TargetSpec("host", "host")), base,
                           replace(misleading, kind=None), tmp_path / "legacy", FAST,
                           shrink.Budget(attempts=5), run=run)
    assert not legacy.reproduced


def test_dropping_a_step_drops_its_loops_and_factors_stay_within_their_dimension() -> None:
    steps = (("tile", ("i", {"i1": 8, "i2": 4})), ("tile", ("j", {"j1": 16})),
             ("interchange", (["i", "j", "k", "i1", "j1", "i2"],)),
             ("vectorize", (["j1"],)), ("unroll", ({"i2": 4, "j1": 16},)))
    assert shrink.drop_step(steps, 1) == (
        steps[0], ("interchange", (["i", "j", "k", "i1", "i2"],)), ("unroll", ({"i2": 4},)))
    clamped = shrink.clamp_factors(steps, {"i": 5, "j": 3, "k": 2})
    assert clamped is not None
    assert clamped[0] == ("tile", ("i", {"i1": 5, "i2": 4}))
    assert clamped[1] == ("tile", ("j", {"j1": 3}))
    assert clamped[4] == ("unroll", ({"i2": 4, "j1": 3},))
    assert shrink.clamp_factors((("split", ("i", {"a": 0, "b": 6})),), {"i": 4}) is None


def test_smaller_shapes_stay_valid_for_the_graph() -> None:
    graph = case("matmul-float32-128x256x192-none").graph
    smaller = list(shrink.shape_candidates(graph))
    assert smaller
    from pytest_xtc.core.cases import graphs

    for candidate in smaller:
        a, b = graphs.inputs(candidate)
        assert a.shape[1] == b.shape[0]  # k tied in both operands
    conv = case("conv2d+relu-float32-1x9x9x3-3x3x8-s2-p1-none")
    fewer = list(shrink.node_candidates(conv.graph, conv.schedule))
    assert {len(g["nodes"]) for g, _ in fewer} == {1, 2}


# -- end to end: a target wrong only for some tilings ----------------------------------


def test_exploration_catches_a_tiling_bug_and_shrinking_reduces_it(
    run, vendor, pytester: pytest.Pytester, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    vendor("xtc-odd-tile", {"odd-tile": "xtc_odd_tile:OddInnerTile"}, {"xtc_odd_tile": ODD_TILE})
    found = run("--xtc-target=odd-tile", "--xtc-explore=1", "--xtc-repeat=0",
                "-k", "matmul-float32-33x65x17 and explore")
    text = found.stdout.str()
    assert "XTC schedule exploration, per strategy" in text
    failed = re.findall(r"FAILED \S+\[(odd-tile-matmul-float32-33x65x17-explore-\S+)\]", text)
    assert failed, text[-3000:]
    assert re.search(r"^tile_\w+: .*\d+ failed", text, re.M)
    assert re.search(r"rerun alone: pytest \S+explore-\S+ --xtc-target=odd-tile --xtc-seed=0 "
                     r".*--xtc-explore=1", text), text[-3000:]

    out = tmp_path / "shrunk"
    shrunk = run("--xtc-target=odd-tile", "--xtc-explore=1", "--xtc-repeat=0", "--xtc-shrink",
                 f"--xtc-shrink-dir={out}", "--xtc-report=bundle", "-k", failed[0])
    text = shrunk.stdout.str()
    shrunk.assert_outcomes(failed=1)
    (file,) = out.glob("*.yaml")
    command = re.search(r"rerun: (pytest .*)", text)
    assert command, text[-3000:]
    summary = re.search(r"to inputs (\S+), (\S+) \(1 node\) with 1 step", text)
    assert summary, text[-3000:]
    elements = sum(eval(s.replace("x", "*")) for s in summary.groups())
    assert elements <= 8, summary.group(0)

    argv = shlex.split(command.group(1))
    assert argv[0] == "pytest" and f"--xtc-cases={file}" in argv
    again = subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True,
                           cwd=tmp_path, timeout=300, check=False)
    assert again.returncode == 1, again.stdout[-3000:]
    assert "1 failed" in again.stdout and "[check] wrong results" in again.stdout

    # The same from the bundle: xtc-conformance shrink BUNDLE.
    bundled = subprocess.run(
        [sys.executable, "-m", "pytest_xtc.cli", "shrink", "bundle", "-o", "from-bundle"],
        capture_output=True, text=True, cwd=pytester.path, timeout=300, check=False)
    assert bundled.returncode == 0, bundled.stderr[-3000:]
    assert re.search(r"shrunk from .* to inputs \S+, \S+ \(1 node\) with 1 step",
                     bundled.stdout), bundled.stdout


def test_strategy_names_are_kept_and_read_back_without_importing_xtc(tmp_path: Path) -> None:
    """The first session asks XTC (importing its MLIR backend) and keeps the names; the
    next reads them back without importing XTC; a damaged cache is asked again."""
    script = ("import sys, json; from pytest_xtc.exploration import explore; "
              "names = explore.strategy_names(); "
              "print(json.dumps([names, 'xtc.backends.mlir' in sys.modules]))")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "PYTEST_XTC_CACHE": "on"}

    def session() -> tuple[list[str], bool]:
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                              text=True, check=True)
        names, imported = json.loads(done.stdout.strip().splitlines()[-1])
        return names, imported

    first, imported_first = session()
    second, imported_second = session()
    assert imported_first and not imported_second and first == second and "tile_oo" in first
    (tmp_path / "pytest-xtc" / explore.STRATEGIES_CACHE).write_text("{not json")
    third, imported_third = session()
    assert third == first and imported_third
