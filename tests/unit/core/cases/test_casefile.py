"""Bad user case files: each a one-line CaseFileError naming the file, the key and the fix."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_xtc.conformance import builtin_cases
from pytest_xtc.conformance.families import FAMILIES
from pytest_xtc.core.cases import case as cases
from pytest_xtc.core.cases.case import CaseFileError


def matmul(m: int = 4, n: int = 5, k: int = 6) -> dict[str, Any]:
    graph, _ = FAMILIES["matmul"](m, n, k)
    return copy.deepcopy(graph)


def write(tmp_path: Path, data: dict[str, Any] | str | bytes) -> Path:
    path = tmp_path / "mine.yaml"
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


def refused(path: Path, *needles: str) -> str:
    start = time.monotonic()
    with pytest.raises(CaseFileError) as info:
        cases.load_case_paths([path])
    message = str(info.value)
    assert time.monotonic() - start < 2, "refusing took too long"
    assert message.startswith(f"{path}"), message
    assert "\n" not in message
    for needle in needles:
        assert needle in message, message
    return message


def with_key(**extra: Any) -> dict[str, Any]:
    return {**matmul(), **extra}


def shape_of(shape: Any) -> dict[str, Any]:
    graph = matmul()
    graph["inputs"][0]["expr"]["type"]["shape"] = shape
    return graph


LAUGHS = "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 9))


def test_a_valid_file_still_loads(tmp_path: Path) -> None:
    path = write(tmp_path, with_key(dtypes=["float32"], error_rule={"c": 2}))
    assert [c.id for c in cases.load_case_paths([path])] == [
        "matmul-float32-4x5-none",
        "matmul-float32-4x5-none-exact",
    ]


def test_a_yaml_bomb_in_dtypes_is_refused(tmp_path: Path) -> None:
    text = "l0: &l0 [float32]\n" + LAUGHS + yaml.safe_dump(matmul()) + "dtypes: *l8\n"
    refused(write(tmp_path, text), "anchors and aliases", "not allowed")


def test_an_alias_in_the_name_is_refused(tmp_path: Path) -> None:
    text = yaml.safe_dump({k: v for k, v in matmul().items() if k != "name"})
    refused(write(tmp_path, "n: &n big\nname: *n\n" + text), ":1: YAML anchors")


def test_an_alias_in_a_shape_is_refused(tmp_path: Path) -> None:
    text = yaml.safe_dump(matmul()).replace("- 4\n", "- &d 4\n", 1).replace("- 6\n", "- *d\n", 1)
    refused(write(tmp_path, text), "anchors and aliases")


def test_a_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    data = yaml.safe_dump(matmul()).encode() + b"# caf\xe9\n"
    refused(write(tmp_path, data), "not UTF-8 text (byte 0xe9", "save the file as UTF-8")


def test_an_error_rule_c_that_is_not_a_number_is_refused(tmp_path: Path) -> None:
    refused(write(tmp_path, with_key(error_rule={"c": "abc"})), "error_rule.c", "finite number")


def test_an_error_rule_with_other_keys_is_refused(tmp_path: Path) -> None:
    refused(write(tmp_path, with_key(error_rule={"k": 1})), "error_rule: expected 'exact'")


def test_schedules_as_a_list_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, with_key(schedules=[{"tile": ["i", {"i1": 4}]}]))
    refused(path, "schedules: expected a mapping of name to steps", "got a list")


def test_a_string_shape_is_refused(tmp_path: Path) -> None:
    refused(write(tmp_path, shape_of("4x6")), "inputs[0].expr.type.shape", "expected a list")


@pytest.mark.parametrize("dim", [0, -3])
def test_a_dimension_below_one_is_refused(tmp_path: Path, dim: int) -> None:
    refused(write(tmp_path, shape_of([dim, 6])), "inputs[0].expr.type.shape", "above 0")


def test_a_result_dimension_below_one_is_refused(tmp_path: Path) -> None:
    graph, _ = FAMILIES["conv2d"](1, 3, 3, 1, 3, 3, 1, 1, 0)
    graph = copy.deepcopy(graph)
    graph["inputs"][1]["expr"]["type"]["shape"] = [5, 5, 1, 1]  # a 5x5 kernel, 3x3 image
    message = refused(write(tmp_path, graph), "malformed graph")
    assert "node 'O': op conv2d cannot take operands" in message
    assert "a 5x5 window does not fit in 3x3" in message


def test_dtypes_as_a_string_are_refused(tmp_path: Path) -> None:
    refused(write(tmp_path, with_key(dtypes="float32")), "dtypes: expected a list", "[float32]")


def test_an_unknown_dtype_is_refused(tmp_path: Path) -> None:
    refused(write(tmp_path, with_key(dtypes=["int4"])), "dtypes: 'int4' is not one of")


def test_an_unknown_key_is_refused_with_a_suggestion(tmp_path: Path) -> None:
    path = write(tmp_path, with_key(schedule={"tiled": []}))
    refused(path, "schedule: unknown key; did you mean 'schedules'?")


def test_a_case_over_the_memory_budget_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, matmul(100000, 100000, 100000))
    refused(path, "case matmul-float32-100000x100000-none needs about", "over the budget")


def test_the_memory_budget_is_a_parameter(tmp_path: Path) -> None:
    path = write(tmp_path, matmul(64, 64, 64))
    assert cases.load_case_paths([path])
    with pytest.raises(CaseFileError, match="over the budget of 0 MiB"):
        cases.load_case_paths([path], max_case_bytes=1000)


def test_a_user_case_with_a_builtin_id_is_refused(tmp_path: Path) -> None:
    graph, _ = FAMILIES["relu"](5, 7)  # its id: relu-float32-5x7-none, as the catalog's
    path = write(tmp_path, copy.deepcopy(graph))
    loaded = cases.load_case_paths([path])
    with pytest.raises(CaseFileError, match="has the id of a built-in case") as info:
        cases.check_unique(loaded, (c.id for c in builtin_cases()))
    assert str(path) in str(info.value)
