"""Graphs of several outputs on XTC's host: the kernel's output arguments follow the
graph's declared outputs (xtc_env.build_graph tells XTC's builder), so the buffers the
runner passes in declared order get the right results. Left to XTC, the outputs are the
results no node reads, in production order: two outputs declared the other way round
swapped buffers, and an output that also feeds a relu was no output at all (the relu's
result went into its buffer, the relu's own was never written)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_xtc.core.adapter import TargetSpec
from pytest_xtc.core.cases import case as cases
from pytest_xtc.core.execution.runner import Settings, run_case
from pytest_xtc.core.outcome import Outcome, Status
from pytest_xtc.core.xtc import xtc_env
from pytest_xtc.ops.builder import GraphBuilder, GraphDict
from pytest_xtc.selftest.fuzzing import OutputsInProductionOrder
from pytest_xtc.targets.host import HostTarget


def reversed_outputs() -> GraphDict:
    g = GraphBuilder("reversed_outputs")
    a, b = g.tensor("A", (4, 5), "float32"), g.tensor("B", (5, 3), "float32")
    c = g.node("matmul", "C", [a, b])
    r = g.node("relu", "R", [a])
    return g.output(r, c)  # declared in the reverse order of production


def output_feeds_relu() -> GraphDict:
    g = GraphBuilder("output_feeds_relu")
    a, b = g.tensor("A", (4, 5), "float32"), g.tensor("B", (5, 3), "float32")
    c = g.node("matmul", "C", [a, b])
    return g.output(c, g.node("relu", "R", [c]))


GRAPHS = {"reversed": (reversed_outputs, ["R", "C"]), "feeds": (output_feeds_relu, ["C", "R"])}


def _case(graph: GraphDict) -> cases.Case:
    return cases.Case(graph["name"], "float32", "4x3x5", cases.Schedule(), graph)


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_xtc_outputs_are_the_declared_ones_in_their_order(name: str) -> None:
    make, declared = GRAPHS[name]
    assert [n.name for n in xtc_env.build_graph(_case(make())).outputs_nodes] == declared


def _run(adapter: HostTarget, make: Callable[[], GraphDict], tmp_path: Path) -> Outcome:
    """``make``'s graph run and judged on ``adapter``, the compile in a worker process."""
    case = _case(make())
    return run_case(adapter, case, tmp_path / case.op, Settings(0, perf=False))


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_the_host_writes_each_output_into_its_own_buffer(name: str, tmp_path: Path) -> None:
    outcome = _run(HostTarget(TargetSpec("host", "host")), GRAPHS[name][0], tmp_path)
    assert outcome.status is Status.PASSED, outcome.message


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_left_to_xtc_the_outputs_go_wrong(name: str, tmp_path: Path) -> None:
    """Before: build_graph did not tell XTC the outputs (the selftest's fault)."""
    fault = OutputsInProductionOrder(TargetSpec("outputs-left-to-xtc", "host"))
    outcome = _run(fault, GRAPHS[name][0], tmp_path)
    assert outcome.status is Status.FAILED
    if name == "feeds":  # the relu's buffer never written, C's holds relu(C)
        assert "output R: 12 of 12 elements exceed the bound (12 never written" in (
            outcome.message)
        assert "output C:" in outcome.message


def test_a_result_neither_output_nor_read_is_refused_in_one_line() -> None:
    g = GraphBuilder("dead_end")
    a, b = g.tensor("A", (4, 5), "float32"), g.tensor("B", (5, 3), "float32")
    c = g.node("matmul", "C", [a, b])
    g.node("relu", "T", [a])
    with pytest.raises(ValueError, match=r"^node T is neither an output .* declare it or "
                                         r"remove it$"):
        xtc_env.build_graph(_case(g.output(c)))


def test_xtc_0_3_2_compiles_conv2d_with_fast_math_and_matmul_without() -> None:
    """XTC's bug, not ours (docs/xtc-issues.md): conv2d's multiply-adds carry
    ``fastmath<fast>`` (nnan, ninf), so LLVM may drop a NaN in the relu after it (measured:
    conv2d then relu gives 0.0 for NaN, matmul then relu keeps NaN). Fails once XTC
    compiles conv2d without them: then the note and this test go."""
    found = {}
    for first, shapes in (("conv2d", ((1, 1, 1, 1), (1, 1, 1, 1))), ("matmul", ((1, 1), (1, 1)))):
        g = GraphBuilder(f"{first}_relu")
        x, w = (g.tensor(n, s, "float32") for n, s in zip("XW", shapes, strict=True))
        graph = g.output(g.node("relu", "R", [g.node(first, "C", [x, w])]))
        backend = xtc_env.import_mlir_backend().Backend(xtc_env.build_graph(_case(graph)))
        found[first] = "fastmath<fast>" in str(backend.xdsl_func)
    assert found == {"conv2d": True, "matmul": False}
