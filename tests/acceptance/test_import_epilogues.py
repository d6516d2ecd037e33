"""``xtc-conformance import`` of layers with an epilogue XTC cannot express: AlexNet (built
with onnx.helper at its real layer shapes; every Conv and Gemm with a bias) imports every
conv and Gemm as its contraction, the bias named as left out (file name, case id, source,
table), each checked against ONNX's reference evaluator without that bias; ``--strict``
refuses them as before; a reduced AlexNet's cases pass on host under pytest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

onnx = pytest.importorskip("onnx")

from pytest_xtc import cli  # noqa: E402
from pytest_xtc.importer.model import load  # noqa: E402
from tests.support import onnx_models  # noqa: E402
from tests.support.importer_check import mismatches  # noqa: E402

CONV_LEFT_OUT = "conv2d without its bias add: XTC has no add"
GEMM_LEFT_OUT = "matmul without its bias add (C): XTC has no add"


def import_model(path: Path, out: Path, capsys: Any, *flags: str) -> tuple[int, str, str]:
    code = cli.main(["import", str(path), "--out", str(out), *flags])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def alexnet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return onnx_models.save(onnx_models.alexnet(), tmp_path_factory.mktemp("alexnet"),
                            "alexnet")


def test_alexnet_real_size_imports_every_conv_and_gemm_without_its_bias(
        alexnet: Path, tmp_path: Path, capsys: Any) -> None:
    code, text, err = import_model(alexnet, tmp_path / "cases", capsys)
    assert code == 0, err
    assert "alexnet: 8 layers imported as 8 case files" in text
    files = {p.name: yaml.safe_load(p.read_text()) for p in (tmp_path / "cases").iterdir()}
    convs = [n for n in files if "conv2d" in n]
    gemms = [n for n in files if "matmul" in n]
    assert len(convs) == 5 and len(gemms) == 3 and all("_without_bias" in n for n in files)
    shapes = sorted(tuple(e["expr"]["type"]["shape"]) for d in files.values()
                    for e in d["inputs"][1:])
    assert shapes == sorted([(11, 11, 3, 64), (5, 5, 64, 192), (3, 3, 192, 384),
                             (3, 3, 384, 256), (3, 3, 256, 256), (9216, 4096),
                             (4096, 4096), (4096, 1000)])  # AlexNet's real weights
    first = files["01_pad2d_conv2d_relu_without_bias.yaml"]
    assert first["name"] == "alexnet_01_pad2d_conv2d_relu_without_bias"
    assert first["source"]["omitted"] == CONV_LEFT_OUT
    assert files["08_matmul_without_bias.yaml"]["source"]["omitted"] == GEMM_LEFT_OUT
    assert f"Conv+Relu; {CONV_LEFT_OUT}" in text and f"Gemm; {GEMM_LEFT_OUT}" in text
    assert "Conv bias" not in text and "Gemm bias" not in text
    model = load(alexnet, {})
    problems = [p for f in sorted(files) for p in mismatches(alexnet, model,
                                                              tmp_path / "cases" / f)]
    assert problems == []


def test_strict_refuses_what_has_an_epilogue(alexnet: Path, tmp_path: Path,
                                             capsys: Any) -> None:
    """As before this change: every Conv and Gemm refused, only the Relus imported."""
    code, text, err = import_model(alexnet, tmp_path / "cases", capsys, "--strict")
    assert code == 0, err
    names = sorted(p.name for p in (tmp_path / "cases").iterdir())
    assert names == [f"0{i}_relu.yaml" for i in range(1, 6)], names
    assert "alexnet: 7 layers imported as 5 case files" in text
    assert "Conv     5      Conv bias: XTC has no add to express it" in text
    assert "Gemm     3      Gemm bias C: XTC has no add to express it" in text
    assert "without" not in text


def test_the_cross_check_rejects_a_case_claiming_what_it_left_out(
        tmp_path: Path, capsys: Any) -> None:
    """A case file whose source forgets the omitted bias is caught (ONNX's Conv with its
    bias differs from the case); the true one is accepted."""
    path = onnx_models.save(onnx_models.alexnet(8, 64), tmp_path, "small")
    assert import_model(path, tmp_path / "cases", capsys)[0] == 0
    case = tmp_path / "cases" / "02_pad2d_conv2d_relu_without_bias.yaml"
    model = load(path, {})
    assert mismatches(path, model, case) == []
    data = yaml.safe_load(case.read_text())
    del data["source"]["omitted"]
    case.write_text(yaml.safe_dump(data))
    found = mismatches(path, model, case)
    assert len(found) == 1 and "beyond the bound" in found[0], found


def test_scaled_gemm_imported_without_alpha_and_bias(tmp_path: Path, capsys: Any) -> None:
    net = onnx_models.Net(7)
    y = net.op("Gemm", ["a", net.weight("b", (6, 5)), net.weight("c", (1, 5))], "fc",
               alpha=0.5, beta=2.0)
    a = onnx.helper.make_tensor_value_info("a", onnx.TensorProto.FLOAT, [4, 6])
    path = onnx_models.save(net.model("scaled", [a], y, [4, 5]), tmp_path, "scaled")
    code, text, _ = import_model(path, tmp_path / "cases", capsys)
    (case,) = (tmp_path / "cases").iterdir()
    assert code == 0 and case.name == "01_matmul_without_alpha_bias.yaml"
    said = ("matmul without its alpha scaling (alpha 0.5) and bias add (beta*C, beta 2): "
            "XTC has no scaling op or add")
    assert yaml.safe_load(case.read_text())["source"]["omitted"] == said and said in text
    assert mismatches(path, load(path, {}), case) == []
    code, _, err = import_model(path, tmp_path / "strict", capsys, "--strict")
    assert code == 3 and ("Gemm alpha other than 1: XTC has no scaling op; Gemm bias C: XTC "
                          "has no add to express it") in err


def test_reduced_alexnet_cases_pass_on_host(tmp_path: Path, capsys: Any, run: Any) -> None:
    """AlexNet at 1/8 of its channels and 96x96 (its real size is too slow for the suite;
    its import above is real-size): every layer cross-checked, then run by the plugin."""
    path = onnx_models.save(onnx_models.alexnet(8, 96), tmp_path, "alexnet_small")
    assert import_model(path, tmp_path / "cases", capsys)[0] == 0
    model = load(path, {})
    files = sorted((tmp_path / "cases").glob("*.yaml"))
    assert len(files) == 8 and [p for f in files for p in mismatches(path, model, f)] == []
    result = run("--xtc-target=host", f"--xtc-cases={tmp_path / 'cases'}", "--xtc-only-cases",
                 "--xtc-repeat=0", "-k", "not exact", "-n", "2")
    counts = {k: v for k, v in result.parseoutcomes().items() if k != "seconds"}
    assert result.ret == 0 and counts.get("passed", 0) + counts.get("xfailed", 0) == 8, \
        result.stdout.str()[-3000:]
    assert "alexnet_small_01_pad2d_conv2d_relu_without_bias" in result.stdout.str() or \
        counts["passed"] == 8
