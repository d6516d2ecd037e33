"""``xtc-conformance import``: ONNX models (ResNet-18, a BERT-base encoder, a model of
every chain and refusal, built with onnx.helper) imported as case files, each layer
cross-checked against ONNX's own reference implementation, run by the plugin on host and
host-c and compiled on nvgpu's compile tier; bad input refused in one line, nothing
written; without the onnx extra, the command says what to install.

Sizes: ResNet-18 at batch 1, 224x224 (its real layer shapes); BERT-base (hidden 768,
12 heads, FFN 3072, 12 layers) at batch 1 and sequence length 16."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

onnx = pytest.importorskip("onnx")

from pytest_xtc import cli  # noqa: E402
from pytest_xtc.importer.model import load  # noqa: E402
from pytest_xtc.importer.onnx_ops import gemm  # noqa: E402
from tests.support import onnx_models  # noqa: E402
from tests.support.importer_check import mismatches  # noqa: E402

MODELS = {
    "resnet18": (onnx_models.resnet18, {"batch": 1}),
    "bert_base": (onnx_models.bert_base, {"batch": 1, "seq": 16}),
    "chains": (onnx_models.chains, {}),
}


def import_model(path: Path, out: Path, dims: dict[str, int],
                 capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    argv = ["import", str(path), "--out", str(out)]
    argv += [f"--dim={k}={v}" for k, v in dims.items()]
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path, str]]:
    """Each model saved and imported once: its path, the case folder, the command's table."""
    folder = tmp_path_factory.mktemp("models")
    found = {}
    for name, (build, dims) in MODELS.items():
        path = onnx_models.save(build(), folder, name)
        out = folder / f"{name}_cases"
        argv = ["import", str(path), "--out", str(out), *(f"--dim={k}={v}" for k, v in
                                                          dims.items())]
        done = subprocess.run([sys.executable, "-m", "pytest_xtc.cli", *argv],
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        found[name] = (path, out, done.stdout)
    return found


def table_rows(text: str, section: str) -> dict[tuple[str, str], int]:
    """The not-imported rows of the command's table: (op, reason) -> count."""
    lines = text.split(section, 1)[1].splitlines()[3:]
    rows = {}
    for line in lines:
        match = re.match(r"(\w+)\s+(\d+)\s+(.+)$", line)
        if not match or line.startswith("wrote "):
            break
        rows[(match[1], match[3].strip())] = int(match[2])
    return rows


def test_resnet18_layers_and_what_is_not_imported(imported: Any) -> None:
    _, out, text = imported["resnet18"]
    assert "resnet18: 38 layers imported as 17 case files" in text
    files = {p.name: yaml.safe_load(p.read_text()) for p in out.glob("*.yaml")}
    assert len(files) == 17
    counts = sorted((d["source"]["count"], "_".join(n["expr"]["op"]["name"] for n in d["nodes"]))
                    for d in files.values())
    assert sum(c for c, _ in counts) == 38
    assert sum(c for c, ops in counts if "conv2d" in ops) == 20  # every conv of ResNet-18
    assert sum(c for c, ops in counts if ops == "relu") == 17
    first = files["03_pad2d_conv2d.yaml"]["source"]
    assert first["count"] == 4 and first["model"] == "resnet18"
    assert first["layers"][0] == {"nodes": ["layer1.0.conv1"],
                                  "tensors": {"X": "maxpool_out", "W": "layer1.0.conv1.weight",
                                              "conv": "layer1.0.conv1_out"}}
    assert first["layouts"] == {"X": [0, 2, 3, 1], "W": [2, 3, 1, 0], "conv": [0, 3, 1, 2]}
    fc = files["17_matmul_without_bias.yaml"]["source"]  # the head, without its bias
    assert fc["omitted"] == "matmul without its bias add (C): XTC has no add"
    assert fc["layers"][0]["nodes"] == ["fc"]
    assert table_rows(text, "not imported: 31 nodes") == {
        ("BatchNormalization", "no normalization op in XTC"): 20,
        ("Add", "no elementwise arithmetic in XTC"): 8,
        ("MaxPool", "no pooling op in XTC"): 1,
        ("GlobalAveragePool", "no pooling op in XTC"): 1,
        ("Flatten", "data layout only: XTC's MLIR backend has no reshape or transpose"): 1,
    }


def test_bert_base_layers_and_what_is_not_imported(imported: Any) -> None:
    _, out, text = imported["bert_base"]
    assert "bert_base: 72 layers imported as 3 case files" in text
    files = {p.name: yaml.safe_load(p.read_text()) for p in sorted(out.glob("*.yaml"))}
    shapes = {name: ([e["expr"]["type"]["shape"] for e in d["inputs"]], d["source"]["count"])
              for name, d in files.items()}
    assert shapes == {
        "01_matmul.yaml": ([[16, 768], [768, 768]], 48),  # query, key, value, output
        "02_matmul.yaml": ([[16, 768], [768, 3072]], 12),
        "03_matmul.yaml": ([[16, 3072], [3072, 768]], 12),
    }
    nodes = [u["nodes"][0] for u in files["01_matmul.yaml"]["source"]["layers"]]
    assert nodes[:4] == ["layer0.query", "layer0.key", "layer0.value", "layer0.output"]
    batched = "batched matmul (right operand {}): XTC's matmul folds leading dimensions " \
        "into the reduction"
    assert table_rows(text, "not imported: 324 nodes") == {
        ("Add", "no elementwise arithmetic in XTC"): 108,
        ("Reshape", "data layout only: XTC's MLIR backend has no reshape or transpose"): 48,
        ("Transpose", "data layout only: XTC's MLIR backend has no reshape or transpose"): 48,
        ("MatMul", batched.format([1, 12, 64, 16])): 12,
        ("MatMul", batched.format([1, 12, 16, 64])): 12,
        ("Div", "no elementwise arithmetic in XTC"): 24,
        ("Mul", "no elementwise arithmetic in XTC"): 24,
        ("LayerNormalization", "no normalization op in XTC"): 24,
        ("Softmax", "no softmax in XTC"): 12,
        ("Erf", "no such activation in XTC (relu only)"): 12,
    }


def test_chains_and_refusals(imported: Any) -> None:
    _, out, text = imported["chains"]
    ops = {p.name for p in out.glob("*.yaml")}
    assert ops == {"01_pad2d_conv2d_relu.yaml", "02_pad2d_conv2d.yaml",
                   "03_matmul_relu.yaml", "04_matmul_relu.yaml",
                   "05_matmul_without_alpha.yaml", "06_pad.yaml", "07_matmul.yaml"}
    pad_conv = yaml.safe_load((out / "01_pad2d_conv2d_relu.yaml").read_text())
    assert pad_conv["source"]["layers"][0]["nodes"] == ["pad", "conv_a", "relu_a"]
    assert pad_conv["nodes"][0]["expr"]["op"]["attrs"]["padding"] == {1: [1, 2], 2: [2, 1]}
    same = yaml.safe_load((out / "02_pad2d_conv2d.yaml").read_text())["nodes"]
    assert same[0]["expr"]["op"]["attrs"]["padding"] == {1: [0, 1], 2: [1, 1]}  # SAME_UPPER
    assert same[1]["expr"]["op"]["attrs"]["stride"] == [2, 2]
    assert table_rows(text, "not imported: 3 nodes") == {
        ("Conv", "grouped conv (group 2): XTC's conv2d has no groups"): 1,
        ("Conv", "dilated conv (dilations [2, 2]): XTC's conv2d has no dilation"): 1,
        ("Flatten", "data layout only: XTC's MLIR backend has no reshape or transpose"): 1,
    }


@pytest.mark.parametrize("name", list(MODELS))
def test_every_imported_layer_agrees_with_onnx_reference(imported: Any, name: str) -> None:
    path, out, _ = imported[name]
    model = load(path, MODELS[name][1])
    files = sorted(out.glob("*.yaml"))
    problems = [p for f in files for p in mismatches(path, model, f)]
    assert files and not problems, problems


def outcomes(result: pytest.RunResult) -> dict[str, int]:
    return {k: v for k, v in result.parseoutcomes().items() if k != "seconds"}


def test_imported_cases_pass_on_host_and_host_c(imported: Any, run: Any) -> None:
    """Every imported case of the three models, random inputs, on host and host-c:
    nothing fails (XTC's listed bugs would be xfailed)."""
    folders = [f"--xtc-cases={imported[name][1]}" for name in MODELS]
    result = run("--xtc-target=host,host-c", *folders, "--xtc-only-cases", "--xtc-repeat=0",
                 "-k", "not exact", "-n", "2")
    counts = outcomes(result)
    assert result.ret == 0 and counts.get("failed", 0) == 0 and counts.get("error", 0) == 0, \
        result.stdout.str()[-3000:]
    assert counts["passed"] + counts.get("xfailed", 0) == 2 * 27, counts


def test_imported_cases_compile_on_nvgpu(imported: Any, run: Any) -> None:
    """ResNet-18's and BERT's cases compiled for sm_90, in every placement (no GPU: the
    compile tier): each passes or is a listed XTC bug (relu's result placement, recognised
    by properties in cases named anything)."""
    from pytest_xtc.core.adapter import Tier
    from pytest_xtc.core.adapters import registry

    probe = registry.resolve("nvgpu", {"nvgpu-arch": "sm_90"})[0].status()
    if probe.tier not in (Tier.COMPILE_ONLY, Tier.EXECUTE):
        pytest.skip(f"nvgpu cannot compile here: {probe.reason}")
    folders = [f"--xtc-cases={imported[name][1]}" for name in ("resnet18", "bert_base")]
    result = run("--xtc-target=nvgpu", "--xtc-nvgpu-arch=sm_90", *folders, "--xtc-only-cases",
                 "-k", "not exact", "-n", "2")
    counts = outcomes(result)
    assert counts.get("failed", 0) == 0 and counts.get("error", 0) == 0, \
        result.stdout.str()[-3000:]
    assert counts.get("passed", 0) + counts.get("xfailed", 0) == 80 + 15, counts  # 5 places


def test_a_gemm_imported_without_its_transpose_is_caught(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    """The cross-check rejects a faulty import (transB forgotten: the square weight keeps
    its shape, the numbers change) and accepts the right one."""
    net = onnx_models.Net(3)
    y = net.op("Gemm", ["a", net.weight("w", (8, 8))], "fc", transB=1)
    a = onnx.helper.make_tensor_value_info("a", onnx.TensorProto.FLOAT, [4, 8])
    path = onnx_models.save(net.model("fc", [a], y, [4, 8]), tmp_path, "fc")
    assert import_model(path, tmp_path / "right", {}, capsys)[0] == 0
    monkeypatch.setattr(gemm, "SWAP", None)
    assert import_model(path, tmp_path / "faulty", {}, capsys)[0] == 0
    model = load(path, {})
    assert mismatches(path, model, tmp_path / "right" / "01_matmul.yaml") == []
    found = mismatches(path, model, tmp_path / "faulty" / "01_matmul.yaml")
    assert len(found) == 1 and "beyond the bound" in found[0], found


def tiny(tmp_path: Path, op: str = "Relu", opset: int = onnx_models.OPSET,
         dims: list[Any] | None = None) -> Any:
    net = onnx_models.Net(4)
    y = net.op(op, ["x", "x"] if op == "Add" else ["x"], "n")
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, dims or [2, 3])
    return net.model("tiny", [x], y, dims or [2, 3], opset)


def refused(tmp_path: Path, path: Path, capsys: Any, *needles: str,
            dims: dict[str, int] | None = None) -> None:
    out = tmp_path / "cases"
    code, stdout, err = import_model(path, out, dims or {}, capsys)
    assert code == 1 and stdout == "", stdout
    assert err.count("\n") == 1 and err.startswith("xtc-conformance: "), err
    for needle in needles:
        assert needle in err, err
    assert not out.exists() and [p.name for p in tmp_path.iterdir()
                                 if p.name.startswith(".")] == []


def test_bad_input_not_onnx(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "m.onnx"
    path.write_text("name: a YAML file, not a model\n")
    refused(tmp_path, path, capsys, "not an ONNX model")


def test_bad_input_truncated(tmp_path: Path, capsys: Any) -> None:
    whole = onnx_models.save(onnx_models.chains(), tmp_path, "whole").read_bytes()
    path = tmp_path / "m.onnx"
    path.write_bytes(whole[: len(whole) // 2])
    refused(tmp_path, path, capsys, "truncated or corrupt ONNX file", "export or copy it")


def test_bad_input_external_data_missing(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "m.onnx"
    onnx.save(onnx_models.chains(), str(path), save_as_external_data=True,
              location="m.weights", size_threshold=0)
    (tmp_path / "m.weights").unlink()
    refused(tmp_path, path, capsys, "external data m.weights", "not found")


def test_bad_input_opset_unknown_to_onnx(tmp_path: Path, capsys: Any) -> None:
    model = tiny(tmp_path)
    model.opset_import[0].version = onnx.defs.onnx_opset_version() + 1
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    refused(tmp_path, path, capsys, f"opset {onnx.defs.onnx_opset_version() + 1} is newer",
            "upgrade onnx")


def test_bad_input_nothing_importable(tmp_path: Path, capsys: Any) -> None:
    path = onnx_models.save(tiny(tmp_path, "Add"), tmp_path, "m")
    refused(tmp_path, path, capsys, "no node XTC can express",
            "Add: no elementwise arithmetic in XTC")


def test_bad_input_symbolic_dims_without_sizes(tmp_path: Path, capsys: Any) -> None:
    path = onnx_models.save(tiny(tmp_path, dims=["rows", "cols"]), tmp_path, "m")
    refused(tmp_path, path, capsys, "symbolic dimensions without a size: cols, rows",
            "--dim cols=N --dim rows=N")
    refused(tmp_path, path, capsys, "--dim width: the model has no dimension of that name",
            dims={"rows": 2, "cols": 3, "width": 4})
    code, stdout, _ = import_model(path, tmp_path / "cases", {"rows": 2, "cols": 3}, capsys)
    assert code == 0 and "02x03" not in stdout and "2x3" in stdout, stdout


def test_bad_input_out_not_empty(tmp_path: Path, capsys: Any) -> None:
    path = onnx_models.save(tiny(tmp_path), tmp_path, "m")
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "mine.yaml").write_text("kept")
    code, _, err = import_model(path, tmp_path / "cases", {}, capsys)
    assert code == 1 and "exists and is not an empty folder" in err
    assert [p.name for p in (tmp_path / "cases").iterdir()] == ["mine.yaml"]


def test_without_the_onnx_extra_import_says_what_to_install(tmp_path: Path) -> None:
    """onnx hidden: ``import`` names the extra; ``list`` and the plugin still work."""
    script = textwrap.dedent(f"""
        import sys
        class NoOnnx:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "onnx":
                    raise ImportError("No module named " + repr(name))
        sys.meta_path.insert(0, NoOnnx())
        from pytest_xtc import cli
        code = cli.main(["import", "m.onnx", "--out", {str(tmp_path / 'cases')!r}])
        assert code == 1, code
        assert cli.main(["list"]) == 0
        import pytest
        assert pytest.main(["-p", "no:cacheprovider", "--xtc-list-targets"]) == 0
        assert "onnx" not in sys.modules
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == ("xtc-conformance: import needs the onnx package: "
                                   "pip install 'pytest-xtc[onnx]'"), done.stderr
    assert "host" in done.stdout and not (tmp_path / "cases").exists()


@pytest.mark.parametrize("source", [
    "bert",  # not a mapping
    {"model": "m", "count": 2, "layers": [{"nodes": ["a"], "tensors": {}}]},  # count
    {"model": "m", "count": 1, "layers": [{"nodes": [], "tensors": {}}]},  # no node
    {"model": "m", "count": 1, "layers": [{"nodes": ["a"], "tensors": {}}], "layouts":
     {"X": [0, 0]}},  # not a permutation
    {"model": "m", "count": 1, "layers": [{"nodes": ["a"], "tensors": {}}], "seq": 1},
    {"model": "m", "count": 1, "layers": [{"nodes": ["a"], "tensors": {}}], "omitted": 3},
])
def test_a_malformed_source_key_is_refused(tmp_path: Path, source: Any) -> None:
    from pytest_xtc.conformance.families import FAMILIES
    from pytest_xtc.core.cases import case as cases

    graph, _ = FAMILIES["matmul"](4, 5, 6)
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump({**graph, "source": source}))
    with pytest.raises(cases.CaseFileError, match=r"m\.yaml: source"):
        cases.load_case_paths([path])
    good = {"model": "m", "count": 1, "layers": [{"nodes": ["a"], "tensors": {"A": "x"}}]}
    path.write_text(yaml.safe_dump({**graph, "source": good}))
    assert cases.load_case_paths([path])
