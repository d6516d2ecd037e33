"""What users of real models meet first: refusals that say what XTC lacks, and a reference
that does not fill their warning summary."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from pytest_xtc.core.cases import graphs
from pytest_xtc.core.judging import reference
from pytest_xtc.ops.builder import GraphBuilder


def _matmul(a: tuple[int, ...], b: tuple[int, ...], dtype: str = "float32") -> dict:
    g = GraphBuilder("mm")
    return g.output(g.node("matmul", "C", [g.tensor("A", a, dtype), g.tensor("B", b, dtype)]))


def test_special_value_matmul_reference_does_not_warn_on_overflow() -> None:
    # float64 magnitudes whose products overflow: the IEEE rule expects +-Inf there
    graph = _matmul((3, 4), (4, 2), "float64")
    big = np.finfo(np.float64).max / 2
    a = np.full((3, 4), big)
    b = np.full((4, 2), 4.0)
    a[0, 0] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning would raise here
        ref = reference.evaluate(graph, [a, b])
    assert ref is not None


def test_batched_matmul_is_refused_saying_xtc_folds_leading_dimensions() -> None:
    with pytest.raises(ValueError, match=r"reduction sizes differ: 4096 and 768 .*folds .*"
                       "into the reduction"):
        graphs.operands(_matmul((12, 64, 64), (12, 64, 64)))


def test_two_dimensional_size_mismatch_says_no_more_than_the_sizes() -> None:
    with pytest.raises(ValueError) as info:
        graphs.operands(_matmul((4, 8), (9, 3)))
    assert "reduction sizes differ: 8 and 9" in str(info.value)
    assert "folds" not in str(info.value)


def test_depthwise_conv_is_refused_saying_xtc_has_no_grouped_conv() -> None:
    g = GraphBuilder("dw")
    x = g.tensor("X", (1, 8, 8, 32), "float32")
    with pytest.raises(ValueError, match=r"input has 32 channels, weights 1 .*no grouped or "
                       "depthwise"):
        g.node("conv2d", "O", [x, g.tensor("W", (3, 3, 1, 32), "float32")])


def test_conv_groups_attribute_is_refused_saying_xtc_has_no_grouped_conv() -> None:
    g = GraphBuilder("grouped")
    x = g.tensor("X", (1, 8, 8, 4), "float32")
    w = g.tensor("W", (3, 3, 4, 4), "float32")
    with pytest.raises(ValueError, match=r"no attribute groups .*no grouped or depthwise"):
        g.node("conv2d", "O", [x, w], groups=2)
