"""Reading a user case file safely: UTF-8 text, YAML without aliases, an explicit schema.

Every problem is one line naming the file, the key and what to do; nothing of a case file
reaches XTC or numpy before it has passed :func:`read`.
"""

from __future__ import annotations

import difflib
import math
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from pytest_xtc.core.cases.textfile import UnreadableFile, one_line, read_text
from pytest_xtc.core.cases.unique_keys import DuplicateKey, load_yaml, yaml_events

MAX_FILE_BYTES = 4 << 20  # a case file is a graph, not data
MAX_RANK = 8
MAX_NAME = 100
DTYPES = ("float32", "float64")
VALUE_KINDS = ("random", "exact", "special", "wide", "large")
GRAPH_KEYS = ("inputs", "nodes", "outputs")
KEYS = (
    *GRAPH_KEYS,
    "name",
    "ops_version",
    "schedules",
    "schedule_node",
    "dtypes",
    "values",
    "align",
    "error_rule",
    "source",
)
SOURCE_KEYS = ("model", "count", "layers", "layouts", "omitted")


class CaseFileError(ValueError):
    """A case file that cannot be read; the message names the file."""


def read(path: Path) -> dict[str, Any]:
    """The validated top-level mapping of a case file."""
    check_file_name(path)
    text = _text(path)
    _refuse_aliases(path, text)
    try:
        data = load_yaml(text, str(path))
    except DuplicateKey as exc:
        raise CaseFileError(str(exc)) from None
    except yaml.YAMLError as exc:
        raise CaseFileError(f"{path}: cannot read case file: {one_line(exc)}") from None
    if not isinstance(data, dict) or not set(GRAPH_KEYS) <= set(data):
        raise CaseFileError(f"{path}: not an XTC graph YAML (needs inputs, nodes, outputs)")
    _check(path, data)
    return data


def _text(path: Path) -> str:
    try:
        return read_text(path, MAX_FILE_BYTES)
    except UnreadableFile as exc:
        raise CaseFileError(f"{path}: not a case file: {exc}") from None


def _refuse_aliases(path: Path, text: str) -> None:
    """YAML anchors and aliases are refused: a few lines of them expand to gigabytes (and
    nesting past unique_keys.MAX_DEPTH)."""
    try:
        for event in yaml_events(text):
            anchor = getattr(event, "anchor", None)
            if isinstance(event, yaml.AliasEvent) or anchor is not None:
                line = event.start_mark.line + 1
                raise CaseFileError(
                    f"{path}:{line}: YAML anchors and aliases (&{anchor}, *{anchor}) are not "
                    "allowed in case files; write the values out"
                )
    except yaml.YAMLError as exc:
        raise CaseFileError(f"{path}: cannot read case file: {one_line(exc)}") from None


def _check(path: Path, data: Mapping[str, Any]) -> None:
    def fail(key: str, problem: str) -> CaseFileError:
        return CaseFileError(f"{path}: {key}: {problem}")

    for key in data:
        if key not in KEYS:
            close = difflib.get_close_matches(str(key), KEYS, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise fail(str(key), f"unknown key; {hint}known keys: {', '.join(KEYS)}")
    if "name" in data:
        _name(data["name"], "name", fail)
    _graph(data, fail)
    if data.get("schedule_node") is not None:
        _name(data["schedule_node"], "schedule_node", fail, separators=False)
    schedules = data.get("schedules")
    if schedules is not None:
        if not isinstance(schedules, dict) or not schedules:
            got = type(schedules).__name__
            raise fail(
                "schedules",
                f"expected a mapping of name to steps, e.g. "
                f"{{tiled: [{{tile: [i, {{i1: 4}}]}}]}}, got a {got}",
            )
        for name, steps in schedules.items():
            _name(name, "schedules", fail)
            if steps is not None and not isinstance(steps, (list, dict)):
                raise fail(
                    f"schedules.{name}",
                    "expected a list of steps ({primitive: args}) or a mapping "
                    "(steps, descript, dims, sizes, sample, node, backend)",
                )
    for key, allowed in (("dtypes", DTYPES), ("values", VALUE_KINDS)):
        if data.get(key) is not None:
            _choices(data[key], key, allowed, fail)
    if data.get("align") is not None:
        _align(data["align"], fail)
    if data.get("error_rule") is not None:
        _error_rule(data["error_rule"], fail)
    if "source" in data:
        _source(data["source"], fail)


def _name(value: Any, key: str, fail: Any, separators: bool = True) -> None:
    if not isinstance(value, str) or not value or len(value) > MAX_NAME:
        raise fail(key, f"expected a name (text, 1 to {MAX_NAME} characters), got {value!r:.60}")
    bad = odd_character(value, separators)
    if bad is not None:
        raise fail(key, f"the name {value!r:.60} holds {bad}; a name takes no control "
                        f"character{' or path separator' if separators else ''}")


def odd_character(text: str, separators: bool = True) -> str | None:
    """The first character of ``text`` that no name may hold, said in words (a control
    character, NUL among them, a line separator, or with ``separators`` a path
    separator), or None. Such a name reaches file names, MLIR and report lines."""
    for at, char in enumerate(text, 1):
        if unicodedata.category(char) in ("Cc", "Zl", "Zp") or (separators and char in "/\\"):
            what = "NUL" if char == "\0" else repr(char)
            return f"{what} (U+{ord(char):04X}, character {at})"
    return None


def check_file_name(path: Path) -> None:
    """Refuse a case file whose name holds a control character or a path separator."""
    bad = odd_character(path.name)
    if bad is not None:
        raise CaseFileError(f"{str(path)!r}: the file name holds {bad}; rename the file "
                            "(a case file's name takes no control character)")


def _choices(value: Any, key: str, allowed: tuple[str, ...], fail: Any) -> None:
    if not isinstance(value, list) or not value:
        raise fail(
            key,
            f"expected a list among {', '.join(allowed)}, e.g. [{allowed[0]}], got {value!r:.60}",
        )
    bad = [v for v in value if v not in allowed]
    if bad:
        raise fail(key, f"{bad[0]!r:.60} is not one of {', '.join(allowed)}")


def _align(value: Any, fail: Any) -> None:
    """Where the runner puts the operands, one case each: ``[aligned, odd,
    aligned_then_odd]`` (``FIRST_then_LATER``: the first call's, then the later calls')."""
    from pytest_xtc.core.cases.values import for_call

    if not isinstance(value, list) or not value:
        raise fail("align", f"expected a list, e.g. [aligned, odd_then_aligned], got {value!r:.60}")
    for one in value:
        try:
            for_call(str(one), 0)
        except ValueError as exc:
            raise fail("align", str(exc)) from None


def _error_rule(rule: Any, fail: Any) -> None:
    if rule == "exact":
        return
    if not isinstance(rule, dict) or set(rule) != {"c"}:
        raise fail("error_rule", f"expected 'exact' or {{c: NUMBER}}, got {rule!r:.60}")
    c = rule["c"]
    if isinstance(c, bool) or not isinstance(c, (int, float)) or not math.isfinite(c) or c <= 0:
        raise fail("error_rule.c", f"expected a finite number above 0, got {c!r:.60}")


def _source(source: Any, fail: Any) -> None:
    """Where an imported case comes from (``xtc-conformance import``): the model, each use
    of the layer (its ONNX nodes; the model tensor each case operand stands for), their
    count, and the permutation taking a model tensor's layout to the case's."""
    if not isinstance(source, dict) or not {"model", "count", "layers"} <= set(source) \
            or set(source) - set(SOURCE_KEYS):
        raise fail("source", f"expected a mapping with model, count, layers (and layouts), "
                   f"got {source!r:.60}")
    _name(source["model"], "source.model", fail)
    layers, count = source["layers"], source["count"]
    if not isinstance(layers, list) or not layers or count != len(layers):
        raise fail("source.layers", f"expected a list of {count!r:.20} uses")
    for i, use in enumerate(layers):
        ok = isinstance(use, dict) and set(use) == {"nodes", "tensors"}
        nodes, tensors = (use.get("nodes"), use.get("tensors")) if ok else (None, None)
        if not (isinstance(nodes, list) and nodes and all(isinstance(n, str) for n in nodes)
                and isinstance(tensors, dict)
                and all(isinstance(v, str) for v in tensors.values())):
            raise fail(f"source.layers[{i}]", "expected {nodes: [NAME...], tensors: "
                       "{OPERAND: TENSOR}}")
    for name, perm in (source.get("layouts") or {}).items():
        if not isinstance(perm, list) or sorted(perm) != list(range(len(perm))):
            raise fail(f"source.layouts.{name}", f"expected a permutation, got {perm!r:.60}")
    omitted = source.get("omitted", "text")
    if not isinstance(omitted, str) or not omitted:  # the epilogue the import left out
        raise fail("source.omitted", f"expected text, got {omitted!r:.60}")


def _graph(data: Mapping[str, Any], outer: Any) -> None:
    def fail(key: str, problem: str) -> CaseFileError:
        error: CaseFileError = outer(key, problem)
        return CaseFileError(str(error).replace(f": {key}: ", f": malformed graph: {key}: ", 1))

    for key in GRAPH_KEYS:
        if not isinstance(data[key], list):
            raise fail(key, f"expected a list, got {type(data[key]).__name__}")
    if not data["inputs"] or not data["outputs"]:
        raise fail("inputs", "a case needs at least one input and one output")
    for i, entry in enumerate(data["inputs"]):
        where = f"inputs[{i}]"
        if not isinstance(entry, dict):
            raise fail(where, "expected a mapping with uid and expr.type")
        try:
            kind = entry["expr"]["type"]
            shape, dtype = kind["shape"], kind["dtype"]
        except (KeyError, TypeError):
            raise fail(where, "expected expr: {type: {shape: [...], dtype: ...}}") from None
        if not isinstance(shape, list) or not 1 <= len(shape) <= MAX_RANK:
            raise fail(
                f"{where}.expr.type.shape",
                f"expected a list of 1 to {MAX_RANK} dimensions, got {shape!r:.60}",
            )
        for dim in shape:
            if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0:
                raise fail(
                    f"{where}.expr.type.shape", f"dimensions are integers above 0, got {dim!r:.60}"
                )
        if dtype not in DTYPES:
            raise fail(
                f"{where}.expr.type.dtype",
                f"expected one of {', '.join(DTYPES)}, got {dtype!r:.60}",
            )
    for i, node in enumerate(data["nodes"]):
        if not isinstance(node, dict) or not isinstance(node.get("expr"), dict):
            raise fail(f"nodes[{i}]", "expected a mapping with uid and expr")
    for i, out in enumerate(data["outputs"]):
        if not isinstance(out, dict) or "uid" not in out:
            raise fail(f"outputs[{i}]", "expected {uid: ...}")
