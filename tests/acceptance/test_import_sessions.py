"""``xtc-conformance import`` for several models and big layers: case names unique per
model file (its stem, or ``--name``), so models exported under one graph name (PyTorch's
``main_graph``) run in one pytest session; a layer over the case budget is written and
marked, the rest imported, and pytest skips it naming the budget; a folder of models gives
one table each and a total; a write error never names the gone temporary folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

onnx = pytest.importorskip("onnx")

from pytest_xtc import cli  # noqa: E402
from pytest_xtc.importer import writer  # noqa: E402
from tests.support import onnx_models  # noqa: E402

BIG = 7_000_000  # an [8, BIG] weight: about 1.6 GiB of operands and reference, over 1 GiB


def import_model(source: Path, out: Path, capsys: Any, *flags: str) -> tuple[int, str, str]:
    code = cli.main(["import", str(source), "--out", str(out), *flags])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def zoo(tmp_path: Path) -> Path:
    """Two models exported under the same graph name, the second with a layer over 1 GiB."""
    folder = tmp_path / "zoo"
    folder.mkdir()
    onnx_models.save(onnx_models.two_layers("main_graph"), folder, "encoder")
    onnx_models.save(onnx_models.two_layers("main_graph", BIG), folder, "decoder")
    return folder


def test_case_names_come_from_the_file_or_name(zoo: Path, tmp_path: Path,
                                               capsys: Any) -> None:
    assert import_model(zoo / "encoder.onnx", tmp_path / "a", capsys)[0] == 0
    data = yaml.safe_load((tmp_path / "a" / "01_matmul_relu.yaml").read_text())
    assert data["name"] == "encoder_01_matmul_relu" and data["source"]["model"] == "encoder"
    assert import_model(zoo / "encoder.onnx", tmp_path / "b", capsys, "--name", "enc2")[0] == 0
    assert yaml.safe_load((tmp_path / "b" / "02_matmul.yaml").read_text())["name"] == \
        "enc2_02_matmul"
    code, out, err = import_model(zoo / "encoder.onnx", tmp_path / "c", capsys, "--name", "a b")
    assert code == 2 and out == "" and "--name a b: expected a letter" in err
    assert not (tmp_path / "c").exists()


def test_a_layer_over_the_budget_is_written_and_marked(zoo: Path, tmp_path: Path,
                                                       capsys: Any) -> None:
    code, out, err = import_model(zoo / "decoder.onnx", tmp_path / "cases", capsys)
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "cases").iterdir()) == \
        ["01_matmul_relu.yaml", "02_matmul.yaml", "03_matmul.yaml"]
    assert "MatMul; over the budget: needs 1,602 MiB of 1,024 MiB, pytest skips it" in out
    assert "(1 over the budget: skipped)" in out
    code, out, _ = import_model(zoo / "decoder.onnx", tmp_path / "raised", capsys,
                                "--max-case-bytes", str(2 << 30))
    assert code == 0 and "over the budget" not in out
    code, out, _ = import_model(zoo / "decoder.onnx", tmp_path / "low", capsys,
                                "--max-case-bytes=4096")
    assert code == 0 and out.count("over the budget: needs") == 2  # 02_matmul: 2,560 B
    assert "--xtc-max-case-bytes=4096" in out  # the pytest command it prints keeps it
    with pytest.raises(SystemExit) as exited:
        import_model(zoo / "decoder.onnx", tmp_path / "bad", capsys, "--max-case-bytes=0")
    assert exited.value.code == 2 and "expected an integer >= 1" in capsys.readouterr().err


def test_a_folder_of_models_one_table_each_and_a_total(zoo: Path, tmp_path: Path,
                                                      capsys: Any) -> None:
    (zoo / "broken.onnx").write_bytes(b"not a model")
    for stem in ("x-y", "x_y"):  # one name once made a case name: told apart
        (zoo / f"{stem}.onnx").write_bytes((zoo / "encoder.onnx").read_bytes())
    code, out, err = import_model(zoo, tmp_path / "cases", capsys)
    assert code == 1 and err.count("\n") == 1 and "broken.onnx: not an ONNX model" in err
    assert "decoder: 3 layers imported as 3 case files" in out
    assert "encoder: 2 layers imported as 2 case files" in out
    assert ("total: 4 models, 9 layers imported as 9 case files (1 over the budget), 0 nodes "
            "not imported; 1 models not read (below)") in out
    folders = sorted(p.name for p in (tmp_path / "cases").iterdir())
    assert folders == ["decoder", "encoder", "x_y", "x_y_2"]
    names = {yaml.safe_load(p.read_text())["name"] for p in (tmp_path / "cases").rglob("*")
             if p.is_file()}
    assert len(names) == 9 and "x_y_2_01_matmul_relu" in names


def test_two_models_of_one_graph_name_run_in_one_session(zoo: Path, tmp_path: Path,
                                                         capsys: Any, run: Any) -> None:
    """Imported one by one (before: both named main_graph, "defined twice", exit 4): one
    pytest session runs both; the decoder's big layer is skipped naming the budget."""
    for name in ("encoder", "decoder"):
        assert import_model(zoo / f"{name}.onnx", tmp_path / name, capsys)[0] == 0
    result = run("--xtc-target=host", f"--xtc-cases={tmp_path / 'encoder'}",
                 f"--xtc-cases={tmp_path / 'decoder'}", "--xtc-only-cases", "--xtc-repeat=0",
                 "-k", "not exact", "-rs")
    counts = {k: v for k, v in result.parseoutcomes().items() if k != "seconds"}
    text = result.stdout.str()
    assert result.ret == 0 and counts == {"passed": 4, "skipped": 1, "deselected": 5}, text
    assert (f"decoder_03_matmul-float32-4x{BIG}-none needs about 1,602 MiB for its operands "
            "and reference, over the budget of 1,024 MiB (--xtc-max-case-bytes)") in text


def test_a_write_error_names_out_not_the_gone_temporary_folder(
        zoo: Path, tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(path: Path, max_case_bytes: int) -> Any:
        from pytest_xtc.core.cases.casefile import CaseFileError

        raise CaseFileError(f"{path}: malformed graph: made up for this test")

    monkeypatch.setattr(writer.cases, "load_case_file", refuse)
    out = tmp_path / "cases"
    code, stdout, err = import_model(zoo / "encoder.onnx", out, capsys)
    assert code == 1 and stdout == "" and err.count("\n") == 1
    assert f"{out}/01_matmul_relu.yaml: malformed graph" in err, err
    assert [p.name for p in tmp_path.iterdir()] == ["zoo"]  # nothing left behind
