"""The catalog is generated from a model of what can vary (issue 52, points 1 and 2): every
dimension of the model is a cover axis taking each of its values, every size class and
every scheduler primitive on every loop and operand is met; the model holds every
attribute and scheduler primitive XTC's own definitions accept. Each audit is shown
failing when one dimension is taken out."""

from __future__ import annotations

import ast
import copy
import inspect

import pytest

from pytest_xtc import ops
from pytest_xtc.conformance import audit, model, model_taken

#: The graph-level dimensions the model must have (listed here, not read from the model:
#: one dropped from it is a red test).
GRAPH_DIMENSIONS = {"dtype", "values", "align"}
VALUE_KINDS = {"random", "exact", "special", "wide", "large"}
TOPOLOGIES = {"chain", "fan_out", "two_outputs", "two_outputs_reversed", "output_feeds_node",
              "output_feeds_node_reversed"}
#: Attributes XTC's op factory reads that are not the op's: where the operand lies.
PLACEMENT = {"device"}


@pytest.fixture(scope="module")
def catalog_taken() -> audit.Taken:
    return model_taken()


def test_the_model_lists_every_dimension() -> None:
    for family in ("matmul", "conv2d", "relu", "pad", "pad2d", "unpad", "transpose",
                   "reshape", "graph"):
        dims = model.cover_dimensions(family)
        assert set(dims) >= GRAPH_DIMENSIONS, family
        op = model.op_of(family)
        if op is not None:  # every attribute of the op, with its forms
            assert {a.name for a in ops.get(op).attrs} == set(ops.get(op).forms), op
            assert {f"{a.name}_form" for a in ops.get(op).attrs} <= set(dims), op
    assert set(model.VALUE_KINDS) == VALUE_KINDS
    assert set(model.TOPOLOGIES) == TOPOLOGIES
    assert {"aligned_then_odd", "odd_then_aligned"} <= set(model.ALIGNMENTS)
    assert set(model.SIZE_CLASSES.values()) == {1 << 8, 1 << 16, 1 << 24}
    assert {"nan", "inf", "negative_inf", "negative_zero", "subnormal"} <= set(
        ops.get("pad").forms["constant_value"])
    assert {"negative_axes"} <= set(ops.get("pad").forms["padding"])
    assert "negative" in ops.get("transpose").forms["axes"]
    assert {"pack_at:0", "pack_at:1", "vectorize:j", "split:j"} <= model.schedule_targets("matmul")


def test_the_catalog_takes_every_value_of_the_model(catalog_taken: audit.Taken) -> None:
    assert catalog_taken.problems() == []
    assert set(catalog_taken.covers["graph"]["topology"]) == TOPOLOGIES


def _without(taken: audit.Taken, family: str, name: str, value: object = None) -> audit.Taken:
    changed = copy.deepcopy(taken)
    if value is None:
        del changed.covers[family][name]
    else:
        changed.covers[family][name][value] = 0
    return changed


@pytest.mark.parametrize(("family", "name"), [
    ("matmul", "values"), ("conv2d", "align"), ("pad", "constant_value_form"),
    ("pad2d", "axes_form"), ("transpose", "axes_form"), ("graph", "topology"),
    ("conv2d", "stride_form"), ("relu", "dtype")])
def test_the_audit_fails_when_a_dimension_is_not_a_cover_axis(
        catalog_taken: audit.Taken, family: str, name: str) -> None:
    assert catalog_taken.problems() == []
    problems = _without(catalog_taken, family, name).problems()
    assert problems == [f"{family}: dimension {name} is not a cover axis"]


@pytest.mark.parametrize(("family", "name", "value"), [
    ("matmul", "values", "wide"), ("conv2d", "align", "odd_then_aligned"),
    ("pad", "constant_value_form", "nan"), ("graph", "topology", "two_outputs_reversed"),
    ("unpad", "padding_form", "negative_axes")])
def test_the_audit_fails_when_the_catalog_never_takes_a_value(
        catalog_taken: audit.Taken, family: str, name: str, value: str) -> None:
    problems = _without(catalog_taken, family, name, value).problems()
    assert problems == [f"{family}: {name} never takes {value!r}"]


def test_the_audit_fails_without_a_size_class_or_a_schedule_target(
        catalog_taken: audit.Taken) -> None:
    smaller = copy.deepcopy(catalog_taken)
    smaller.sizes["relu"] = 1 << 24
    assert smaller.problems() == ["relu: no case past_2^24 elements"]
    fewer = copy.deepcopy(catalog_taken)
    fewer.scheduled["matmul"] -= {"pack_at:0"}
    fewer.scheduled["conv2d"] -= {"split:r"}
    assert fewer.problems() == ["matmul: no schedule applies pack_at:0",
                                "conv2d: no schedule applies split:r"]


# -- point 2: the model against XTC's own definitions ----------------------------------------


def xtc_attributes() -> dict[str, set[str]]:
    """Each op of XTC's graph operators (``xtc.graphs.xtc.operators``) with the attributes
    its definition reads (``attrs.get("x")``, ``"x" in attrs``, ``self.attrs.x``)."""
    import xtc.graphs.xtc.operators as defined

    found: dict[str, set[str]] = {}
    for cls in ast.parse(inspect.getsource(defined)).body:
        if not isinstance(cls, ast.ClassDef) or not cls.name.startswith("XTCOper"):
            continue
        name, read = None, set()
        for node in ast.walk(cls):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                args = node.args
                if node.func.attr == "__init__" and args and isinstance(args[0], ast.Constant):
                    name = args[0].value
                if (node.func.attr == "get" and isinstance(node.func.value, ast.Name)
                        and node.func.value.id == "attrs" and args
                        and isinstance(args[0], ast.Constant)):
                    read.add(args[0].value)
            if isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant) and any(
                    isinstance(c, ast.Name) and c.id == "attrs" for c in node.comparators):
                read.add(node.left.value)
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                    and node.value.attr == "attrs" and node.attr != "__dict__"):
                read.add(node.attr)
        if name is not None and name != "tensor":
            found[name] = read - PLACEMENT
    return found


def xtc_primitives() -> set[str]:
    from xtc.itf.schd.scheduler import Scheduler

    return {n for n in vars(Scheduler) if not n.startswith("_")}


def gaps(attributes: dict[str, set[str]], primitives: set[str]) -> list[str]:
    """What XTC accepts that the model leaves out."""
    found = []
    for op, read in sorted(attributes.items()):
        if op not in ops.modules():
            found.append(f"XTC op {op} is not in the model")
            continue
        forms = ops.get(op).forms
        found += [f"{op}: XTC's attribute {a} has no forms in the model"
                  for a in sorted(read - set(forms))]
    modelled = model.primitives() | set(model.NOT_MODELLED)
    found += [f"XTC's scheduler primitive {p} is not in the model"
              for p in sorted(primitives - modelled)]
    return found


def test_the_model_holds_what_xtc_accepts() -> None:
    attributes, primitives = xtc_attributes(), xtc_primitives()
    assert attributes["pad2d"] >= {"padding", "constant_value", "axes"}  # the reader reads
    assert {"tile", "pack_at", "split", "vectorize"} <= primitives
    assert gaps(attributes, primitives) == []


@pytest.mark.parametrize("left_out", ["pad2d.axes", "unpad.constant_value", "relu.threshold",
                                      "primitive:pack_at", "primitive:buffer_at"])
def test_the_xtc_audit_fails_when_the_model_lacks_one(
        left_out: str, monkeypatch: pytest.MonkeyPatch) -> None:
    attributes, primitives = xtc_attributes(), xtc_primitives()
    kind, _, what = left_out.partition(":")
    if kind == "primitive":
        monkeypatch.setattr(model, "primitives", lambda: {
            t.split(":")[0] for op in model.LOOPS for t in model.schedule_targets(op)} - {what})
        assert gaps(attributes, primitives) == [
            f"XTC's scheduler primitive {what} is not in the model"]
        return
    op, attr = left_out.split(".")
    cls = type(ops.get(op))
    monkeypatch.setattr(cls, "forms", {k: v for k, v in cls.forms.items() if k != attr})
    assert gaps(attributes, primitives) == [
        f"{op}: XTC's attribute {attr} has no forms in the model"]


# -- the model's schedules are ones XTC takes -------------------------------------------------


def test_the_models_schedules_parallelize_outer_parallel_loops_only() -> None:
    """XTC's parallelize takes outer parallel axes and checks neither: the model's schedules
    keep to them (a parallel reduction races; an inner parallel loop forks a parallel
    region on each outer iteration, which timed out under load)."""
    for op in model.LOOPS:
        for name, steps in model.missing_schedules(op, set()).items():
            pairs = [(next(iter(s)), next(iter(s.values()))) for s in steps if "root" not in s]
            assert model.misplaced_parallel(op, pairs) == [], (op, name)


def test_a_parallel_reduction_or_inner_loop_is_misplaced() -> None:
    assert model.misplaced_parallel("matmul", [("parallelize", [["k"]])]) == ["k"]
    assert model.misplaced_parallel("matmul", [("parallelize", [["j"]])]) == ["j"]
    assert model.misplaced_parallel("matmul", [("tile", ["k", {"k1": 4}]),
                                               ("interchange", [["k1", "i", "j", "k"]]),
                                               ("parallelize", [["k1"]])]) == ["k1"]
    assert model.misplaced_parallel("matmul", [("parallelize", [["i", "j"]])]) == ["j"]
    assert model.misplaced_parallel("matmul", [("interchange", [["j", "i", "k"]]),
                                               ("parallelize", [["j"]])]) == []
    assert model.misplaced_parallel("matmul", [("tile", ["i", {"i1": 4}]),
                                               ("parallelize", [["i"]])]) == []
