"""Schedules as XTC takes them: each ``{node: X}`` segment schedules node X, unnamed nodes
have names that do not depend on the process's history, and a schedule that breaks a
precondition of XTC's scheduler is the case's error (refused at load, or an ``invalid``
outcome), never a target failure nor a verdict that changes with the seed."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_xtc.core.adapter import TargetSpec
from pytest_xtc.core.cases import schedule_rules
from pytest_xtc.core.cases.case import Case, Schedule, load_case_file
from pytest_xtc.core.cases.casefile import CaseFileError
from pytest_xtc.core.execution.runner import Settings, run_case
from pytest_xtc.core.outcome import Phase, Status
from pytest_xtc.core.xtc import xtc_env
from pytest_xtc.selftest import faults
from pytest_xtc.targets.host import HostTarget

IN_PROCESS = Settings(isolate=False)


def tensor(uid: str, shape: list[int], name: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"uid": uid, "expr": {"type": {"shape": shape, "dtype": "float32"}}}
    if name:
        entry["name"] = name
    return entry


def node(uid: str, op: str, args: list[str], name: str | None = None, **attrs: Any) -> dict:
    entry: dict[str, Any] = {"uid": uid, "expr": {"op": {"name": op}, "args": args}}
    if attrs:
        entry["expr"]["op"]["attrs"] = attrs
    if name:
        entry["name"] = name
    return entry


def case_file(tmp_path: Path, name: str, inputs: list, nodes: list, **extra: Any) -> Path:
    data = {"name": name, "inputs": inputs, "nodes": nodes, "outputs": [{"uid": nodes[-1]["uid"]}]}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({**data, **extra}, sort_keys=False))
    return path


def two_matmuls(tmp_path: Path, schedule: list) -> Path:
    return case_file(
        tmp_path, "two_mm",
        [tensor("%0", [4, 8]), tensor("%1", [8, 16]), tensor("%2", [16, 4])],
        [node("%3", "matmul", ["%0", "%1"], "C"), node("%4", "matmul", ["%3", "%2"], "E")],
        schedules={"both": schedule}, values=["random"],
    )


def node_schedules(case: Case) -> dict[str, Any]:
    """XTC's recorded schedule of every node (what its compiler lowers) after the case's
    schedule is applied."""
    backend = xtc_env.import_mlir_backend().Backend(xtc_env.build_graph(case))
    return {s.node_name: s for s in xtc_env.schedule(backend, case).schedule_impl}


def tiles(state: Any) -> dict[str, Any]:
    return {k: v for k, v in state.tiles.items() if v}


# -- 1. multi-node schedules -----------------------------------------------------------


BOTH = [{"node": "C"}, {"tile": ["i", {"i1": 2}]}, {"node": "E"}, {"tile": ["j", {"j1": 2}]}]


def test_each_node_segment_schedules_its_own_node(tmp_path: Path) -> None:
    (case,) = load_case_file(two_matmuls(tmp_path, BOTH))
    assert case.schedule.node == "C"
    assert case.schedule.others == (("E", (("tile", ("j", {"j1": 2})),)),)
    found = node_schedules(case)
    assert tiles(found["C"]) == {"./i": {"./i1": 2}}
    assert tiles(found["E"]) == {"./j": {"./j1": 2}}
    # What the suite did before: every step on the last node named, the first one bare.
    merged = replace(case, schedule=Schedule("merged", case.schedule.steps
                                             + case.schedule.others[0][1], node="E"))
    assert tiles(node_schedules(merged)["C"]) != tiles(found["C"])


def test_conv_then_fc_gives_each_node_its_loops(tmp_path: Path) -> None:
    path = case_file(
        tmp_path, "conv_fc",
        [tensor("%0", [1, 6, 6, 3]), tensor("%1", [3, 3, 3, 8]), tensor("%2", [128, 10])],
        [node("%3", "conv2d", ["%0", "%1"], "conv", stride=[1, 1]),
         node("%4", "matmul", ["%3", "%2"], "fc")],
        schedules={"s": [{"node": "conv"}, {"tile": ["f", {"f1": 4}]},
                         {"node": "fc"}, {"tile": ["j", {"j1": 2}]}]},
    )
    case = load_case_file(path)[0]  # was: "names unknown loop f (loops: i, j, k)"
    found = node_schedules(case)
    assert tiles(found["conv"]) == {"./f": {"./f1": 4}}
    assert tiles(found["fc"]) == {"./j": {"./j1": 2}}


def test_two_scheduled_matmuls_pass_on_host_and_a_faulty_target_fails(tmp_path: Path) -> None:
    (case,) = load_case_file(two_matmuls(tmp_path, BOTH))
    host = HostTarget(TargetSpec("host", "host"))
    assert run_case(host, case, tmp_path / "host", IN_PROCESS).status is Status.PASSED
    faulty = run_case(faults.make("float16"), case, tmp_path / "faulty", IN_PROCESS)
    assert faulty.status is Status.FAILED and faulty.phase == Phase.CHECK


def test_segments_survive_a_round_trip_through_case_data() -> None:
    schedule = Schedule.from_data("s", BOTH)
    assert Schedule.from_data("s", schedule.to_data()) == schedule
    assert schedule.primitives == frozenset({"tile"})
    with pytest.raises(CaseFileError, match=r"\{node: E\} ends the steps"):
        Schedule.from_data("s", [{"tile": ["i", {"i1": 2}]}, {"node": "E"}])


def test_a_segment_naming_no_node_of_the_graph_is_refused_at_load(tmp_path: Path) -> None:
    path = two_matmuls(tmp_path, [{"node": "C"}, {"tile": ["i", {"i1": 2}]}, {"node": "X"},
                                  {"tile": ["j", {"j1": 2}]}])
    with pytest.raises(CaseFileError, match=r"two_mm.yaml: schedules: schedule 'both': node "
                                            r"'X' is not a node of the graph \(nodes: C \(%3\)"):
        load_case_file(path)


# -- 2. unnamed nodes ------------------------------------------------------------------


def unnamed(tmp_path: Path) -> Path:
    return case_file(
        tmp_path, "unnamed",
        [tensor("%0", [8, 16]), tensor("%1", [16, 8])],
        [node("%2", "matmul", ["%0", "%1"]), node("%3", "relu", ["%2"])],
        schedule_node="%2", schedules={"tiled": [{"tile": ["k", {"k1": 4}]}]}, values=["random"],
    )


def test_an_unnamed_node_named_by_its_uid_is_the_same_node_whatever_ran_before(
    tmp_path: Path,
) -> None:
    path = unnamed(tmp_path)
    (case,) = load_case_file(path)
    assert case.schedule.node == "matmul0"
    for _ in range(3):  # other graphs move XTC's process-wide uid counter
        xtc_env.build_graph(load_case_file(two_matmuls(tmp_path, BOTH))[0])
    (again,) = load_case_file(path)
    assert tiles(node_schedules(again)["matmul0"]) == {"./k": {"./k1": 4}}
    outcome = run_case(HostTarget(TargetSpec("host", "host")), again, tmp_path / "w", IN_PROCESS)
    assert outcome.status is Status.PASSED, outcome.message


def test_a_file_with_an_unnamed_node_gives_one_verdict_alone_and_after_others(
    tmp_path: Path,
) -> None:
    path = unnamed(tmp_path)
    other = two_matmuls(tmp_path, BOTH)

    def run(*files: Path) -> str:
        args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA",
                "--xtc-target=host", "--xtc-only-cases", "--xtc-no-isolation",
                *(f"--xtc-cases={f}" for f in files)]
        done = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        return done.stdout

    together, alone = run(other, path), run(path)
    passed = re.compile(r"PASSED \S*test_conformance\[host-unnamed-float32-8x8-tiled\]")
    assert "2 passed" in together and passed.search(together), together
    assert "1 passed" in alone and passed.search(alone), alone


# -- 3. preconditions ------------------------------------------------------------------


def race_file(tmp_path: Path, steps: list) -> Path:
    return case_file(
        tmp_path, "race", [tensor("%0", [4, 4096], "A"), tensor("%1", [4096, 8], "B")],
        [node("%2", "matmul", ["%0", "%1"], "C")], schedules={"race": steps},
    )


def test_a_parallelized_reduction_is_refused_at_load_naming_file_schedule_and_step(
    tmp_path: Path,
) -> None:
    path = race_file(tmp_path, [{"interchange": [["k", "i", "j"]]}, {"parallelize": [["k"]]}])
    with pytest.raises(CaseFileError, match=r"race.yaml: schedules: schedule 'race': node C: "
                                            r"step parallelize\(\['k'\],\) names reduction loop k"):
        load_case_file(path)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--xtc-target=host",
         "--xtc-only-cases", f"--xtc-cases={path}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 4, done.stdout + done.stderr
    assert "names reduction loop k" in done.stdout + done.stderr


@pytest.mark.parametrize("steps, says", [
    ([{"tile": ["k", {"k1": 4}]}, {"vectorize": [["k1"]]}], "names reduction loop k1 (of k)"),
    ([{"tile": ["i", {"i1": 0}]}], "i1 is 0"),
    ([{"unroll": [{"j": -2}]}], "j is -2"),
    ([{"interchange": [["i", "i", "k"]]}], "names loop i twice"),
    ([{"tile": ["x", {"x1": 2}]}], "names unknown loop x (loops: i, j, k)"),
    # a root no split made: XTC's scheduler raised KeyError './lo' at compile, a FAILED
    # case against the target
    ([{"tile": ["j", {"j1": 4}], "root": "./lo"}], "names root './lo', which no split made"),
    ([{"split": ["i", {"a": 0, "b": 1}]}, {"interchange": [["a", "b"]]},
      {"tile": ["j", {"j1": 4}], "root": "./lo"}], "(roots: ., ./a, ./b)"),
])
def test_a_schedule_breaking_a_precondition_is_refused_at_load(
    tmp_path: Path, steps: list, says: str
) -> None:
    with pytest.raises(CaseFileError, match=re.escape(says)):
        load_case_file(race_file(tmp_path, steps))


def test_an_unknown_loop_on_an_op_without_declared_loops_is_an_invalid_case(
    tmp_path: Path,
) -> None:
    path = case_file(
        tmp_path, "unknown", [tensor("%0", [8, 16]), tensor("%1", [16, 8])],
        [node("%2", "matmul", ["%0", "%1"], "C"), node("%3", "relu", ["%2"], "R")],
        schedules={"bad": [{"node": "R"}, {"tile": ["q", {"q1": 4}]}]}, values=["random"],
    )
    (case,) = load_case_file(path)  # relu declares no loop names: XTC's decide
    outcome = run_case(HostTarget(TargetSpec("host", "host")), case, tmp_path / "w", IN_PROCESS)
    assert outcome.status is Status.INVALID and outcome.phase == Phase.SCHEDULE
    assert outcome.message.startswith(schedule_rules.INVALID_CASE)
    assert "node R: step tile('q', {'q1': 4}) names unknown loop q" in outcome.message


def test_a_root_no_split_made_on_an_op_without_declared_loops_is_an_invalid_case(
    tmp_path: Path,
) -> None:
    """Checked at compile, against XTC's loop nest (relu declares no loops): an invalid
    case, never a failure of the target (before: KeyError './lo' in XTC's scheduler,
    FAILED)."""
    path = case_file(
        tmp_path, "rooted", [tensor("%0", [8, 16]), tensor("%1", [16, 8])],
        [node("%2", "matmul", ["%0", "%1"], "C"), node("%3", "relu", ["%2"], "R")],
        schedules={"bad": [{"node": "R"}, {"tile": ["i", {"i1": 4}], "root": "./lo"}]},
        values=["random"],
    )
    (case,) = load_case_file(path)
    outcome = run_case(HostTarget(TargetSpec("host", "host")), case, tmp_path / "w", IN_PROCESS)
    assert outcome.status is Status.INVALID and outcome.phase == Phase.SCHEDULE, outcome.message
    assert "names root './lo', which no split made" in outcome.message


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_parallelized_reduction_made_in_code_is_invalid_at_compile_for_any_seed(
    tmp_path: Path, seed: int
) -> None:
    path = race_file(tmp_path, [])
    (case,) = [c for c in load_case_file(path) if c.values == "random"]
    racing = replace(case, schedule=Schedule.from_data(
        "race", [{"interchange": [["k", "i", "j"]]}, {"parallelize": [["k"]]}]))
    outcome = run_case(HostTarget(TargetSpec("host", "host")), racing, tmp_path / "w",
                       Settings(isolate=False, base_seed=seed))
    assert outcome.status is Status.INVALID, outcome.message
    assert "names reduction loop k (of k)" in outcome.message


def test_the_ops_loop_declarations_match_xtcs_loop_nest_and_kinds(tmp_path: Path) -> None:
    from pytest_xtc.core.xtc.scheduling import main_loops
    from pytest_xtc.ops import conv2d, matmul

    conv = case_file(tmp_path, "conv", [tensor("%0", [1, 6, 6, 3]), tensor("%1", [3, 3, 3, 8])],
                     [node("%2", "conv2d", ["%0", "%1"], "O")])
    for path, op in ((race_file(tmp_path, []), matmul.OP), (conv, conv2d.OP)):
        case = load_case_file(path)[0]
        backend = xtc_env.import_mlir_backend().Backend(xtc_env.build_graph(case))
        loops = main_loops(xtc_env.new_scheduler(backend, case))
        assert loops.dims == op.loops
        assert loops.reductions == frozenset(op.reductions)


def test_an_explored_sample_parallelizing_a_reduction_is_not_supported(tmp_path: Path) -> None:
    from pytest_xtc.exploration import explore

    class Racing:
        def generate(self, scheduler: Any, sample: list[int]) -> None:
            scheduler.interchange(["k", "i", "j"])
            scheduler.parallelize(["k"])

    (case,) = [c for c in load_case_file(race_file(tmp_path, [])) if c.values == "random"]
    steps, refused = explore._record(Racing(), xtc_env.build_graph(case), [0])
    assert steps == [] and refused.startswith(explore.BREAKS) and "reduction loop k" in refused
    sampled = replace(case, schedule=Schedule("explore-x-0of1", refused=refused))
    outcome = run_case(HostTarget(TargetSpec("host", "host")), sampled, tmp_path / "w", IN_PROCESS)
    assert outcome.status is Status.NOT_SUPPORTED

