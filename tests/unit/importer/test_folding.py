"""``xtc-conformance import``: what ONNX writes as constants is folded (initializers,
``Constant`` nodes in every numeric form, shape computations ONNX's shape inference fixes);
what is not constant is said truly (a graph input, computed from one); a refused node
lists every reason; MatMul's batch-1 right operand is squeezed; opset 6's Gemm
``broadcast`` is understood. Every imported layer is cross-checked against onnx.reference."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402

from pytest_xtc import cli  # noqa: E402
from pytest_xtc.importer import chains, folding  # noqa: E402
from pytest_xtc.importer.model import load  # noqa: E402
from tests.support import onnx_models  # noqa: E402
from tests.support.importer_check import mismatches  # noqa: E402


def const(net: onnx_models.Net, name: str, **attrs: Any) -> str:
    net.nodes.append(helper.make_node("Constant", [], [name], name=name, **attrs))
    return name


def imported(tmp_path: Path, model: Any, capsys: Any, *flags: str) -> tuple[Path, Path, str]:
    path = onnx_models.save(model, tmp_path, "m")
    out = tmp_path / "cases"
    code = cli.main(["import", str(path), "--out", str(out), *flags])
    captured = capsys.readouterr()
    text = captured.out
    assert code == 0, captured.err
    problems = [p for f in sorted(out.glob("*.yaml")) for p in mismatches(path, load(path, {}), f)]
    assert problems == []
    return path, out, text


def pads_of(case: Path) -> Any:
    return yaml.safe_load(case.read_text())["nodes"][0]["expr"]["op"]["attrs"]


@pytest.mark.parametrize("form", ["value_ints", "value", "initializer"])
def test_constant_pads_in_every_form_are_folded(tmp_path: Path, capsys: Any,
                                                form: str) -> None:
    net = onnx_models.Net(1)
    widths = [0, 1, 2, 0, 3, 0]
    if form == "value_ints":
        pads = const(net, "pads", value_ints=widths)
    elif form == "value":
        pads = const(net, "pads", value=onnx.numpy_helper.from_array(np.array(widths), "p"))
    else:
        pads = net.const("pads", widths)
    value = const(net, "fill", value_float=0.5)
    y = net.op("Pad", ["x", pads, value], "pad")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
    _, out, text = imported(tmp_path, net.model("m", [x], y, [2, 7, 6]), capsys)
    attrs = pads_of(out / "01_pad.yaml")
    assert attrs == {"padding": {1: [1, 3], 2: [2, 0]}, "constant_value": 0.5}
    if form != "initializer":
        assert "Constant  " in text and "a constant, no computation" in text


def test_pads_computed_from_shapes_are_folded(tmp_path: Path, capsys: Any) -> None:
    """Shape -> Gather -> Div -> Concat, as PyTorch exports it for a pad of a quarter of
    H and W before a conv: folded, the Pad chained into the conv."""
    net = onnx_models.Net(2)
    shape = net.op("Shape", ["x"], "shape")
    hw = net.op("Gather", [shape, const(net, "idx", value_ints=[2, 3])], "gather")
    quarter = net.op("Div", [hw, const(net, "four", value_int=4)], "div")
    zeros = const(net, "zeros", value_ints=[0, 0])
    pads = net.op("Concat", [zeros, quarter, zeros, quarter], "concat", axis=0)
    y = net.op("Pad", ["x", pads], "pad")
    y = net.op("Conv", [y, net.weight("w", (4, 3, 3, 3))], "conv")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 12])
    _, out, text = imported(tmp_path, net.model("m", [x], y, [1, 4, 10, 16]), capsys)
    (case,) = out.iterdir()
    assert case.name == "01_pad2d_conv2d.yaml"
    assert pads_of(case)["padding"] == {1: [2, 2], 2: [3, 3]}
    for op in ("Shape", "Gather", "Div", "Concat"):
        assert re.search(rf"^{op} +1 +{re.escape(chains.FOLDED)}$", text, re.M), text


def model_with_pads(pads_source: str) -> Any:
    net = onnx_models.Net(3)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])]
    pads = "p"
    inputs.append(helper.make_tensor_value_info("p", TensorProto.INT64, [4]))
    if pads_source == "computed":
        pads = net.op("Add", ["p", net.const("one", [1, 1, 1, 1])], "plus")
    y = net.op("Pad", ["x", pads], "pad")
    net.op("Relu", ["x"], "relu")  # something to import
    return net, inputs, y


@pytest.mark.parametrize(("source", "reason"), [
    ("input", "pads given at run time as graph input 'p'"),
    ("computed", "pads computed at run time from graph input 'p'"),
])
def test_pads_not_constant_are_refused_with_a_true_reason(
        tmp_path: Path, capsys: Any, source: str, reason: str) -> None:
    net, inputs, _ = model_with_pads(source)
    model = net.model("m", inputs, "relu_out", [2, 3])
    _, _, text = imported(tmp_path, model, capsys)
    assert re.search(rf"^Pad +1 +{reason}$", text, re.M), text
    assert "computed in the model" not in text


def test_folding_evaluates_no_random_node_and_no_large_value(tmp_path: Path) -> None:
    net = onnx_models.Net(4)
    noise = net.op("RandomUniform", [], "noise", shape=[4], dtype=TensorProto.FLOAT)
    big = net.op("ConstantOfShape", [net.const("size", [1 << 20])], "big")
    y = net.op("Add", ["x", noise], "add")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    model = net.model("m", [x], y, [4])
    model.graph.output.append(helper.make_tensor_value_info(big, TensorProto.FLOAT, [1 << 20]))
    path = onnx_models.save(model, tmp_path, "m")
    loaded = load(path, {})
    assert loaded.constant(noise) is None and loaded.constant(big) is None
    assert folding.origin(noise, loaded) == \
        "computed by a RandomUniform node the importer does not evaluate"


def test_a_refused_conv_lists_every_reason(tmp_path: Path, capsys: Any) -> None:
    """Dilated, grouped, depthwise, with a bias: all reasons, not the first; the bias is a
    reason only under --strict (otherwise it would be left out)."""
    net = onnx_models.Net(5)
    bias = net.weight("b", (8,))
    net.op("Conv", ["x", net.weight("wd", (8, 1, 3, 3)), bias], "depthwise", group=8,
           dilations=[2, 2])
    net.op("Conv", ["x", net.weight("wg", (8, 4, 3, 3)), bias], "grouped", group=2,
           dilations=[1, 2])
    y = net.op("Relu", ["x"], "relu")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 9, 9])
    model = net.model("m", [x], y, [1, 8, 9, 9])
    _, _, text = imported(tmp_path, model, capsys)
    depthwise = ("depthwise conv (group 8): XTC's conv2d has no groups; dilated conv "
                 "(dilations [2, 2]): XTC's conv2d has no dilation")
    grouped = ("grouped conv (group 2): XTC's conv2d has no groups; dilated conv "
               "(dilations [1, 2]): XTC's conv2d has no dilation")
    assert f"Conv  1      {depthwise}\n" in text and f"Conv  1      {grouped}\n" in text
    for path in tmp_path.iterdir():
        if path.is_dir():
            for f in path.iterdir():
                f.unlink()
            path.rmdir()
    _, _, text = imported(tmp_path, model, capsys, "--strict")
    assert f"{depthwise}; Conv bias: XTC has no add to express it" in text


def test_matmul_with_a_batch_1_right_operand_is_squeezed(tmp_path: Path, capsys: Any) -> None:
    net = onnx_models.Net(6)
    y = net.op("MatMul", ["x", net.weight("w", (1, 6, 5))], "mm")
    z = net.op("MatMul", [y, net.weight("w2", (2, 5, 3))], "batched")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 6])
    _, out, text = imported(tmp_path, net.model("m", [x], z, [2, 4, 3]), capsys)
    data = yaml.safe_load((out / "01_matmul.yaml").read_text())
    assert [e["expr"]["type"]["shape"] for e in data["inputs"]] == [[8, 6], [6, 5]]
    assert "batched matmul (right operand [2, 5, 3])" in text


@pytest.mark.parametrize(("broadcast", "c_shape", "imported_as"), [
    (1, [5], "01_matmul_without_bias.yaml"),
    (0, [4, 5], "01_matmul_without_bias.yaml"),
    (1, None, "01_matmul.yaml"),  # beta 0: C plays no part
])
def test_opset_6_gemm_broadcast_is_understood(tmp_path: Path, capsys: Any, broadcast: int,
                                              c_shape: list[int] | None,
                                              imported_as: str) -> None:
    net = onnx_models.Net(7)
    c = net.weight("c", tuple(c_shape or [5]))
    attrs = {"broadcast": broadcast} if c_shape else {"broadcast": broadcast, "beta": 0.0}
    y = net.op("Gemm", ["a", net.weight("b", (6, 5)), c], "gemm", **attrs)
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [4, 6])
    _, out, _ = imported(tmp_path, net.model("m", [a], y, [4, 5], opset=6), capsys)
    assert [p.name for p in out.iterdir()] == [imported_as]


def test_opset_6_gemm_c_that_does_not_fit_is_refused(tmp_path: Path, capsys: Any) -> None:
    net = onnx_models.Net(8)
    y = net.op("Gemm", ["a", net.weight("b", (6, 5)), net.weight("c", (5,))], "gemm")
    net.op("Relu", ["a"], "relu")
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [4, 6])
    model = net.model("m", [a], "relu_out", [4, 6], opset=6)
    model.graph.output.append(helper.make_tensor_value_info(y, TensorProto.FLOAT, [4, 5]))
    _, _, text = imported(tmp_path, model, capsys)
    assert "Gemm C of shape [5] does not fit the result [4, 5] (without broadcast)" in text
