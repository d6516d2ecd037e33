"""``xtc-conformance import`` of what PyTorch writes by default: weights in a separate file
(``model.onnx`` + ``model.onnx.data``, saved with onnx's ``save_as_external_data=True``)
imported from another directory; output dimensions named symbolically (TorchScript's
exports) inferred from the inputs; a shape-inference error met while folding said; long
model names kept apart; the printed pytest line quoted."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402

from pytest_xtc import cli  # noqa: E402
from pytest_xtc.importer import folding  # noqa: E402
from pytest_xtc.importer import model as model_module  # noqa: E402
from pytest_xtc.importer.model import case_prefix, load  # noqa: E402
from tests.support import onnx_models  # noqa: E402


def external(folder: Path, name: str = "model") -> Path:
    """A small model saved as torch does by default: its weights in ``<name>.onnx.data``."""
    folder.mkdir(parents=True, exist_ok=True)
    model = onnx_models.two_layers("main_graph")
    path = folder / f"{name}.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=f"{name}.onnx.data", size_threshold=0)
    return path


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_external_data_imports_from_another_directory(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    path = external(tmp_path / "exported")
    assert (tmp_path / "exported" / "model.onnx.data").stat().st_size == (16 * 8 + 8 * 8) * 4
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # not the model's folder
    code, out, err = run(["import", str(path), "--out", "cases"], capsys)
    assert code == 0, err
    files = {f.name: yaml.safe_load(f.read_text()) for f in (elsewhere / "cases").glob("*")}
    assert sorted(files) == ["01_matmul_relu.yaml", "02_matmul.yaml"], out
    shapes = [i["expr"]["type"]["shape"] for i in files["01_matmul_relu.yaml"]["inputs"]]
    assert shapes == [[4, 16], [16, 8]] and "model: 2 layers imported" in out, out


def test_external_data_outside_the_folder_still_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = external(tmp_path / "m")
    model = onnx.load(str(path), load_external_data=False)
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = "../secret.data"
    onnx.save(model, str(path))
    code, _, err = run(["import", str(path), "--out", str(tmp_path / "cases")], capsys)
    assert code == 3 and "is not a file in the model's folder" in err, err
    assert not (tmp_path / "cases").exists()


def symbolic(out_dims: list[Any]) -> Any:
    """MatMul + Relu on x[batch, 16], its output's dimensions as ``out_dims`` say."""
    net = onnx_models.Net(3)
    y = net.op("Relu", [net.op("MatMul", ["x", net.weight("w", (16, 8))], "mm")], "relu")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])
    return net.model("torch_jit", [x], y, out_dims)


def test_output_dimensions_follow_from_the_inputs(tmp_path: Path) -> None:
    path = onnx_models.save(symbolic(["Relu_out_dim_0", "Relu_out_dim_1"]), tmp_path, "m")
    model = load(path, {"batch": 4})
    assert model.shape("relu_out") == (4, 8) and model.shape("mm_out") == (4, 8)


def test_input_dimensions_still_demanded(tmp_path: Path) -> None:
    path = onnx_models.save(symbolic(["batch", 8]), tmp_path, "m")
    with pytest.raises(ValueError, match=r"without a size: batch; give them: --dim batch=N"):
        load(path, {})
    with pytest.raises(ValueError, match=r"--dim seq: the model has no dimension"):
        load(path, {"batch": 2, "seq": 3})


def test_a_shape_inference_error_while_folding_is_said(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Folding reinfers shapes with the folded values; when ONNX refuses that graph, the
    model still imports with the shapes known before, and the command prints ONNX's
    message as a note (it was dropped silently)."""
    net = onnx_models.Net(4)  # a Pad whose pads a Constant node gives: one node folded
    net.nodes.append(helper.make_node("Constant", [], ["pads"], name="pads",
                                      value_ints=[0, 0, 1, 1, 0, 0, 1, 1]))
    y = net.op("Relu", [net.op("Pad", ["x", "pads"], "pad")], "relu")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 5])
    path = onnx_models.save(net.model("padded", [x], y, [1, 3, 7, 7]), tmp_path, "m")
    real = model_module._infer
    calls: list[int] = []

    def refuse_after_folding(where: Path, proto: Any) -> Any:
        calls.append(1)
        if len(calls) > 1:  # the first inference is the model's own; then folding's
            raise model_module.ModelError(f"{where}: ONNX shape inference fails: boom")
        return real(where, proto)

    monkeypatch.setattr(model_module, "_infer", refuse_after_folding)
    monkeypatch.setattr(folding, "_unknown_after_folded", lambda model: True)
    loaded = load(path, {})
    assert len(calls) == 2 and loaded.notes == [
        f"shape inference after constant folding failed, the shapes known before kept: "
        f"{path}: ONNX shape inference fails: boom"]
    calls.clear()
    code, out, err = run(["import", str(path), "--out", str(tmp_path / "cases")], capsys)
    assert code == 0, err
    assert "\nnote: shape inference after constant folding failed" in out and "boom" in out


def test_long_model_names_stay_apart() -> None:
    first, second = "a" * 45 + "_resnet50", "a" * 45 + "_resnet101"
    one, two = case_prefix(first), case_prefix(second)
    assert one != two and len(one) <= 40 and len(two) <= 40
    assert case_prefix("resnet18") == "resnet18" and case_prefix("a-b") == "a_b"
    assert case_prefix(first) == one  # the same name, the same prefix


def test_the_printed_line_quotes_paths(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    path = external(tmp_path / "m")
    out_dir = tmp_path / "my cases"
    monkeypatch.chdir(tmp_path)
    code, out, err = run(["import", str(path), "--out", str(out_dir)], capsys)
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("wrote "))
    command = line.split(": ", 1)[1]
    words = shlex.split(command)
    assert words[:2] == ["pytest", "--xtc-target=host"]
    assert f"--xtc-cases={out_dir}" in words, words
    assert os.path.isdir(words[2].split("=", 1)[1])
