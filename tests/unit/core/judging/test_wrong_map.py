"""Where an output's wrong elements lie (:mod:`pytest_xtc.core.judging.wrong_map`): the
map every wrong output's record holds, bounded, and recorded by the comparison."""

from __future__ import annotations

import numpy as np

from pytest_xtc.core.judging import checking
from pytest_xtc.core.judging.reference import Reference
from pytest_xtc.core.judging.wrong_map import SIDE, wrong_map


def test_the_map_says_where_the_wrong_elements_lie() -> None:
    wrong = np.zeros((5, 7), bool)
    wrong[4, 2:5] = True
    found = wrong_map("C", wrong)
    assert found["blocks"] == ["0000000"] * 4 + ["0099900"] and found["wrong"] == 3
    big = np.zeros((300, 4, 50), bool)  # folded to 1200 rows x 50 columns
    big[-1, -1, -1] = True
    found = wrong_map("O", big)
    assert (found["rows"], found["cols"]) == (1200, 50)
    assert len(found["blocks"]) == SIDE and {len(b) for b in found["blocks"]} == {SIDE}
    assert found["blocks"][-1][-1] == "1"  # one wrong of a block of 50 x 2: still shown
    assert "".join(found["blocks"]).strip("0") == "1"
    every = wrong_map("Y", np.ones((3, 2), bool))
    assert every["blocks"] == ["99"] * 3
    assert wrong_map("s", np.array(True))["blocks"] == ["9"]


def test_compare_records_the_map_of_a_wrong_output() -> None:
    expected = np.arange(12, dtype=np.float64).reshape(3, 4)
    reference = Reference([expected], [np.zeros_like(expected)], {})
    got = expected.astype(np.float32)
    got[2, 1] += 1
    found = checking.compare(["C"], [got], reference)
    assert found.mismatches[0].wrong_map == {
        "output": "C", "shape": [3, 4], "wrong": 1, "rows": 3, "cols": 4,
        "blocks": ["0000", "0000", "0900"]}
    assert checking.compare(["C"], [expected.astype(np.float32)], reference).ok
