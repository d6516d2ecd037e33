"""The pytest-free core: graphs, reference, error bounds, checking, case files."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from pytest_xtc.conformance import builtin_cases
from pytest_xtc.conformance.families import FAMILIES
from pytest_xtc.core.adapters import registry
from pytest_xtc.core.cases import case as cases
from pytest_xtc.core.cases import graphs, values
from pytest_xtc.core.judging import checking, reference
from pytest_xtc.ops import conv2d


def naive_conv2d(x: np.ndarray, w: np.ndarray, stride: tuple[int, int]) -> np.ndarray:
    n, h, wd, _ = x.shape
    r, s, _, f = w.shape
    oh, ow = (h - r) // stride[0] + 1, (wd - s) // stride[1] + 1
    out = np.zeros((n, oh, ow, f))
    for b, i, j, o in itertools.product(range(n), range(oh), range(ow), range(f)):
        patch = x[b, i * stride[0] : i * stride[0] + r, j * stride[1] : j * stride[1] + s, :]
        out[b, i, j, o] = np.sum(patch * w[..., o])
    return out


@pytest.mark.parametrize("stride", [(1, 1), (2, 2), (3, 1)])
def test_reference_conv2d_matches_loops(stride) -> None:
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 9, 8, 3)), rng.standard_normal((3, 2, 3, 4))
    np.testing.assert_allclose(
        conv2d.OP.forward([x, w], {"stride": stride}), naive_conv2d(x, w, stride), rtol=1e-12
    )


def test_gamma_bound_holds_for_float32_matmul_and_is_tight_enough() -> None:
    graph, _ = FAMILIES["matmul"](64, 64, 512)
    case = cases.Case("matmul", "float32", "64x64x512", cases.Schedule(), graph)
    a, b = case.make_inputs(1)
    ref = reference.evaluate(graph, [a, b])
    got = (a @ b).astype(np.float32)  # numpy's float32 matmul: a legitimate order
    error = np.abs(got - ref.values[0])
    assert np.all(error <= ref.bounds[0])
    half = (a.astype(np.float16) @ b.astype(np.float16)).astype(np.float32)
    assert np.any(np.abs(half - ref.values[0]) > ref.bounds[0])  # float16 is caught


def test_bounds_propagate_through_a_two_layer_graph() -> None:
    graph, _ = FAMILIES["mlp"](8, 64, 128, 10)
    case = cases.Case("mlp", "float32", "x", cases.Schedule(), graph)
    x, w1, w2 = case.make_inputs(3)
    ref = reference.evaluate(graph, [x, w1, w2])
    got = np.maximum(x @ w1, 0).astype(np.float32) @ w2
    assert np.all(np.abs(got - ref.values[0]) <= ref.bounds[0])
    assert ref.reductions == {"L1": 64, "Y": 128}


def test_exact_inputs_demand_bit_exact_results() -> None:
    graph, _ = FAMILIES["matmul"](13, 11, 7)
    ref = reference.evaluate(
        graph, [np.ones((13, 7), np.float32), np.ones((7, 11), np.float32)], exact=True
    )
    assert not ref.bounds[0].any()
    off = ref.values[0].astype(np.float32)
    off[3, 4] = np.nextafter(off[3, 4], np.float32(100))
    mismatch = checking.compare(["C"], [off], ref).mismatches[0]
    assert mismatch.exceeding == 1 and mismatch.where == (3, 4)
    assert "exact rule: must be bit-exact" in mismatch.describe()


def test_sentinel_output_is_reported_as_never_written_and_nan_is_not() -> None:
    graph, _ = FAMILIES["relu"](2, 3)
    ref = reference.evaluate(graph, [np.ones((2, 3), np.float32)])
    out = np.ones((2, 3), np.float32)
    values.fill_unwritten(out[1:, 2:])
    out[0, 0] = np.nan
    (mismatch,) = checking.compare(["Y"], [out], ref).mismatches
    assert mismatch.unwritten == 1 and mismatch.where == (1, 2) and mismatch.exceeding == 2
    assert "0x7fa5a5a5" in mismatch.describe()


def test_changed_inputs_are_named() -> None:
    before = [np.zeros(4, np.float32)]
    after = [np.array([0, 0, 1, 0], np.float32)]
    assert checking.changed_inputs(["A"], before, after) == [
        "input A was modified by the kernel (1 elements changed)"
    ]


def test_seeded_inputs_are_deterministic_and_depend_on_the_seed() -> None:
    case = builtin_cases()[5]
    first, again = case.make_inputs(case.seed(0)), case.make_inputs(case.seed(0))
    other = case.make_inputs(case.seed(1))
    assert all(a.tobytes() == b.tobytes() for a, b in zip(first, again, strict=True))
    assert any(a.tobytes() != b.tobytes() for a, b in zip(first, other, strict=True))


def test_catalog_size_ids_and_coverage() -> None:
    all_cases = builtin_cases()
    ids = [c.id for c in all_cases]
    assert len(ids) == len(set(ids))
    assert {c.op for c in all_cases} >= {
        "matmul",
        "conv2d",
        "relu",
        "pad",
        "pad2d",
        "unpad",
        "transpose",
        "reshape",
        "matmul+relu",
        "conv2d+relu",
        "mlp",
    }
    assert {c.dtype for c in all_cases} == {"float32", "float64"}
    schedules = {c.schedule.name for c in all_cases}
    assert {
        "none",
        "tile",
        "tile+interchange",
        "unroll",
        "vectorize",
        "parallelize",
        "pack_at",
    } <= schedules
    assert all(c.exact for c in all_cases if c.values == "exact")


def test_turned_hand_picked_shapes_still_meet_every_dtype_and_schedule() -> None:
    """``shapes_dtype: turning`` (matmul, conv2d): one dtype per shape and schedule, float32
    for none and tile; every shape meets both dtypes, every other schedule too."""
    from pytest_xtc.conformance import _picked
    from pytest_xtc.core.cases.case import Schedule

    spec = {"shapes": [[1, 1, 1], [13, 11, 7], [31, 37, 29]], "shapes_dtype": "turning"}
    chosen = [Schedule.from_data(n, []) for n in ("none", "tile", "a", "b", "c")]
    turned = _picked("matmul", spec, chosen, ["float32", "float64"])
    assert len(turned) == 3 * 5  # one case a shape and schedule
    assert {c.dtype for c in turned if c.schedule.name in ("none", "tile")} == {"float32"}
    for shape in {c.shape for c in turned}:
        assert {c.dtype for c in turned if c.shape == shape} == {"float32", "float64"}
    for name in ("a", "b", "c"):
        assert {c.dtype for c in turned if c.schedule.name == name} == {"float32", "float64"}
    full = _picked("matmul", {"shapes": spec["shapes"]}, chosen, ["float32", "float64"])
    assert len(full) == 2 * len(turned)
    with pytest.raises(ValueError, match="shapes_dtype 'some' is not 'every' or 'turning'"):
        _picked("matmul", {**spec, "shapes_dtype": "some"}, chosen, ["float32"])


def test_placement_variants_of_an_accelerator() -> None:
    graph, _ = FAMILIES["matmul"](4, 4, 4)
    variants = cases.placements(graph)
    labels = [",".join(f"{k}@{v}" for k, v in p.items()) for p in variants]
    assert labels == [
        "A@host,B@host,C@host",
        "A@device,B@device,C@host",
        "A@host,B@host,C@device",
        "A@device,B@device,C@device",
        "A@host,B@device,C@device",
    ]
    case = cases.Case("matmul", "float32", "4x4x4", cases.Schedule(), graph).place(variants[4])
    assert case.id.endswith("-A@host,B@dev,C@dev")


def test_graph_dicts_match_xtc_serialization() -> None:
    """Our graphs are XTC's own format: XTC builds them and dumps the same dict back."""
    from pytest_xtc.core.xtc import xtc_env

    for family in ("matmul", "mlp", "conv2d", "pad"):
        case = next(c for c in builtin_cases() if c.op == family)
        dumped = xtc_env.build_graph(case).to_dict()
        ours = {k: v for k, v in case.graph.items()}
        ours["inputs"] = [{k: v for k, v in i.items() if k != "name"} for i in ours["inputs"]]
        dumped.pop("ops_version")
        as_lists = graphs_as_lists(dumped)
        assert as_lists == graphs_as_lists(ours), family


def graphs_as_lists(value):  # type: ignore[no-untyped-def]
    if isinstance(value, (list, tuple)):
        return [graphs_as_lists(v) for v in value]
    if isinstance(value, dict):
        return {k: graphs_as_lists(v) for k, v in value.items()}
    return value


def test_user_case_file_from_an_xtc_dump(tmp_path: Path) -> None:
    from pytest_xtc.core.xtc import xtc_env

    case = next(c for c in builtin_cases() if c.op == "matmul+relu")
    path = tmp_path / "mine.yaml"
    xtc_env.build_graph(case).dump(path)
    with path.open("a") as f:
        f.write(
            "schedules:\n  tiled: [{tile: [i, {i1: 2}]}]\nschedule_node: C\n"
            "dtypes: [float32, float64]\nvalues: [random]\nerror_rule: {c: 2}\n"
        )
    loaded = cases.load_case_paths([tmp_path])
    assert [c.id for c in loaded] == [
        "matmul_relu-float32-13x11-tiled",
        "matmul_relu-float64-13x11-tiled",
    ]
    assert loaded[0].schedule.node == "C" and loaded[0].c == 2.0
    assert [o.name for o in graphs.inputs(loaded[0].graph)] == ["in0", "in1"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not: [a graph", "cannot read case file"),
        ("name: x\n", "not an XTC graph YAML"),
        ("inputs: []\nnodes: []\noutputs: [{uid: '%9'}]\n", "malformed graph"),
    ],
)
def test_bad_case_files_name_the_file(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(cases.CaseFileError, match=message) as info:
        cases.load_case_paths([path])
    assert str(path) in str(info.value)


def test_selection_parsing() -> None:
    assert registry.parse("host, nvgpu[1]") == [
        registry.Selected("host", "host", None),
        registry.Selected("nvgpu[1]", "nvgpu", 1),
    ]
    with pytest.raises(registry.SelectionError):
        registry.parse("nvgpu[one]")
    with pytest.raises(registry.SelectionError):
        registry.parse(" , ")
