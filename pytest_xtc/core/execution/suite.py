"""Which cases a target runs: the case set, expanded by the placements it declares."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_xtc.core.adapter import TargetAdapter, declared_placements
from pytest_xtc.core.cases.case import DEVICE, Case, placements


def cases_for(adapter: TargetAdapter, cases: Sequence[Case]) -> list[Case]:
    """The cases a target runs: each case in every placement variant when the target
    declares device placement, else each case as it is. The class's declared
    ``placements`` are taken when it has them (the adapter is not asked: collection
    does not wait for its toolchain; each case checks they are its capabilities')."""
    try:
        declared = declared_placements(adapter)
        on_device = DEVICE in (declared if declared is not None else
                               adapter.capabilities().placements)
    except Exception:  # the case itself will report the broken adapter
        on_device = False
    if not on_device:
        return list(cases)
    return [case.place(p) for case in cases for p in placements(case.graph)]
