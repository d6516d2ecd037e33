"""Graphs of several outputs on XTC's host: the kernel's output arguments follow the
graph's declared outputs (xtc_env.build_graph tells XTC's builder), so the buffers the
runner passes in declared order get the right results. Left to XTC, the outputs are the
results no node reads, in production order: two outputs declared the other way round
swapped buffers, and an output that also feeds a relu was no output at all (the relu's
result went into its buffer, the relu's own was never written)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from pytest_xtc.core.adapter import TargetSpec
from pytest_xtc.core.cases import case as cases
from pytest_xtc.core.cases import graphs, values
from pytest_xtc.core.judging import checking, reference
from pytest_xtc.core.xtc import xtc_env
from pytest_xtc.ops.builder import GraphBuilder, GraphDict
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


def _run(make: Callable[[], GraphDict], tmp_path: Path) -> checking.Comparison:
    graph = make()
    host = HostTarget(TargetSpec("host", "host"))
    artifact = host.compile(_case(graph), tmp_path / graph["name"])
    rng = np.random.default_rng(0)
    given = [rng.uniform(-1, 1, o.shape).astype(np.float32) for o in graphs.inputs(graph)]
    outs = [np.empty(o.shape, np.float32) for o in graphs.outputs(graph)]
    for out in outs:
        values.fill_unwritten(out)
    host.run(artifact, given, outs)
    names = [o.name for o in graphs.outputs(graph)]
    return checking.compare(names, outs, reference.evaluate(graph, given))


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_the_host_writes_each_output_into_its_own_buffer(name: str, tmp_path: Path) -> None:
    assert _run(GRAPHS[name][0], tmp_path).ok


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_left_to_xtc_the_outputs_go_wrong(name: str, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: build_graph did not tell XTC the outputs (its builder's set_outputs)."""
    import xtc.graphs.xtc.builder as xtc_builder

    monkeypatch.setattr(xtc_builder.graph_builder, "set_outputs", lambda self, *outs: None)
    found = _run(GRAPHS[name][0], tmp_path)
    assert not found.ok
    if name == "feeds":  # the relu's buffer never written, C's holds relu(C)
        wrong = {m.output: m for m in found.mismatches}
        assert wrong["R"].unwritten == wrong["R"].size and not wrong["C"].unwritten


def test_a_result_neither_output_nor_read_is_refused_in_one_line() -> None:
    g = GraphBuilder("dead_end")
    a, b = g.tensor("A", (4, 5), "float32"), g.tensor("B", (5, 3), "float32")
    c = g.node("matmul", "C", [a, b])
    g.node("relu", "T", [a])
    with pytest.raises(ValueError, match=r"^node T is neither an output .* declare it or "
                                         r"remove it$"):
        xtc_env.build_graph(_case(g.output(c)))
