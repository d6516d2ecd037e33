"""Expectations by properties: a known XTC bug is recognised in a case named anything."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_xtc.conformance import builtin_cases
from pytest_xtc.core.cases import expectations
from pytest_xtc.core.cases.selectors import Selector, SelectorError, Traits
from tests import ROOT

TARGETS = ROOT / "pytest_xtc" / "targets"


def _case(case_id: str):  # type: ignore[no-untyped-def]
    return next(c for c in builtin_cases() if c.id == case_id)


def _renamed(case_id: str, placement: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    """The built-in case as a user's case file would hold it: another graph name."""
    case = _case(case_id)
    graph = {**case.graph, "name": "my_layer"}
    found = replace(case, op="my_layer", graph=graph, source="mine.yaml")
    return found.place(placement) if placement else found


@pytest.mark.parametrize(
    ("case_id", "placement", "reason"),
    [
        ("matmul-float32-1x1x1-tile", None, "one-point iteration space"),
        ("matmul-float32-64x64x64-vectorize", None, "unrealized_conversion_cast"),
        ("matmul-float32-16x16x1-descript", None, "unrealized_conversion_cast"),
        ("relu-float32-5x7-none", {"X": "device", "Y": "host"}, "carries memref.on_device"),
        ("matmul+relu-float32-13x11x7-none", {"A": "host", "B": "host", "R": "device"},
         "lacks memref.on_device"),
        ("unpad-float32-8x10-pad0:1-2_1:0-3-none", {"X": "device", "Y": "device"}, "unpad drops"),
        ("pad-float64-1x17-pad0:3-0_1:1-0-none-element-offset", None, "leading size-1 dimension"),
        ("pad2d-float32-1x1x1x1-pad1-0_1-2-none", None, "leading size-1 dimension"),
    ],
)
def test_nvgpu_bugs_are_recognised_in_a_user_case_named_anything(case_id, placement, reason):
    entries = expectations.load(TARGETS / "nvgpu.expectations.yaml")
    found = expectations.find(entries, _renamed(case_id, placement), "0.3.2")
    assert found is not None and reason in found.reason
    assert expectations.find(entries, _renamed(case_id, placement), "0.4.0") is None


@pytest.mark.parametrize(
    ("case_id", "placement"),
    [
        ("matmul-float64-13x11x7-vectorize", None),  # 11 is no multiple of the 16-wide tile
        ("relu-float32-64x129-vectorize", None),
        ("relu-float32-5x7-none", {"X": "device", "Y": "device"}),
        ("unpad-float32-8x10-pad0:1-2_1:0-3-none", {"X": "device", "Y": "host"}),
        ("pad-float64-1x16-pad1:4-4-none", None),  # 1xN padded on axis 1 only
        ("pad-float32-1x16-pad1:4-4-tile", None),
        # the size-1 h follows a batch of 2
        ("pad2d-float64-2x1x8x16-pad3-0_3-1-none-element-offset", None),
    ],
)
def test_nvgpu_entries_leave_cases_without_the_bug_alone(case_id, placement) -> None:
    entries = expectations.load(TARGETS / "nvgpu.expectations.yaml")
    assert expectations.find(entries, _renamed(case_id, placement), "0.3.2") is None


def test_host_c_relu_nan_bug_is_recognised_by_the_input_kind() -> None:
    entries = expectations.load(TARGETS / "host_c.expectations.yaml")
    special = _renamed("relu-float32-6x5-none-special")
    found = expectations.find(entries, special, "0.3.2")
    assert found is not None and "relu(NaN) = 0" in found.reason
    assert expectations.find(entries, replace(special, values="random"), "0.3.2") is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"output_elements": "about 1"}, "output_elements must be a count condition"),
        ({"output_elements": True}, "output_elements must be a count condition"),
        ({"whole_vectors": "yes"}, "whole_vectors must be true or false"),
        ({"values": ["weird"]}, "values must be among random, exact, special"),
        ({"node_placements": ["relu"]}, "is not OP:IN->OUT"),
    ],
)
def test_malformed_property_is_refused(data, message) -> None:
    with pytest.raises(SelectorError, match=message):
        Selector.from_data(data, "f.yaml:1")


def test_unknown_key_is_refused(tmp_path) -> None:
    path = tmp_path / "t.expectations.yaml"
    path.write_text("- output_size: 1\n  phase: compile\n  reason: r\n  url: u\n")
    with pytest.raises(expectations.ExpectationFileError, match="unknown key output_size"):
        expectations.load(path)


def test_count_conditions_and_traits_round_trip() -> None:
    traits = Traits.of(_case("matmul-float32-64x64x64-vectorize"))
    assert traits.output_elements == 64 * 64 and traits.whole_vectors
    assert Traits.from_dict(traits.to_dict()) == traits
    for condition, hit in (("4096", True), ("<=1", False), (">=16", True), ("<4096", False)):
        assert Selector.from_data({"output_elements": condition}, "w").matches(traits, None) is hit


@pytest.mark.parametrize(("case_id", "count"), [
    ("conv2d-float32-1x9x9x3-3x3x8-s2-p1-none", 1),  # pad2d's result, then conv2d
    ("conv2d-float32-1x9x9x3-3x3x8-s2-p1-fuse_producer_at", 0),  # the pad read in place
    ("conv2d-float32-1x8x8x3-3x3x4-s1-p0-none", 0),  # no padding: one node
    ("matmul+relu-float32-13x11x7-fuse_producer_at", 1),  # a fused matmul keeps a tile
    ("mlp-float32-1x16x32x10-none", 2),
])
def test_intermediates_count_the_buffers_left_between_nodes(case_id, count) -> None:
    assert Traits.of(_case(case_id)).intermediates == count


@pytest.mark.parametrize(("case_id", "reason"), [
    ("conv2d-float32-1x9x9x3-3x3x8-s2-p1-none", "host stack"),
    ("matmul+relu-float32-13x11x7-fuse_producer_at", "host stack"),
    ("relu-float32-6x7-thr0.25-none", "threshold"),
])
def test_nvgpu_device_bugs_apply_to_executed_runs_only(case_id, reason) -> None:
    """Seen on an H100 (2026-11-26): listed with ``executed: true``."""
    entries = expectations.load(TARGETS / "nvgpu.expectations.yaml")
    found = expectations.find(entries, _renamed(case_id), "0.3.2", executed=True)
    assert found is not None and reason in found.reason
    assert expectations.find(entries, _renamed(case_id), "0.3.2", executed=False) is None
    fused = _renamed("conv2d-float32-1x9x9x3-3x3x8-s2-p1-fuse_producer_at")
    assert expectations.find(entries, fused, "0.3.2", executed=True) is None


@pytest.mark.parametrize(("name", "message"), [
    ("relu.treshold", "relu declares threshold"),
    ("rel.threshold", "ops are conv2d"),
    ("threshold", "not OP.ATTRIBUTE"),
])
def test_an_attribute_no_op_declares_is_refused(name, message) -> None:
    with pytest.raises(SelectorError, match=message):
        Selector.from_data({"attributes": [name]}, "x.yaml:1")


def test_an_attribute_left_at_its_default_is_not_set() -> None:
    plain, twin = _case("relu-float32-5x7-none"), _case("relu-float32-6x7-thr0.25-none")
    assert Traits.of(twin).attributes == {"relu.threshold"}
    assert not Traits.of(plain).attributes
    zero = replace(twin, graph={**twin.graph, "nodes": [
        {**twin.graph["nodes"][0], "expr": {**twin.graph["nodes"][0]["expr"],
                                            "op": {"name": "relu", "attrs": {"threshold": 0.0}}}}]})
    assert not Traits.of(zero).attributes
