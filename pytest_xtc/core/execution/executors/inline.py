"""Target work in the pytest process itself: no containment (``--xtc-no-isolation``)."""

from __future__ import annotations

from collections.abc import Mapping

from pytest_xtc.core.adapter import TargetAdapter
from pytest_xtc.core.execution.work import Work, WorkRequest, target_work


class InlineExecutor:
    shared = False

    def __init__(self, adapter: TargetAdapter) -> None:
        self.adapter = adapter

    def run(self, request: WorkRequest, limits: Mapping[str, float]) -> Work:
        return target_work(self.adapter, request, lambda phase: None)

    def close(self) -> None:
        """Nothing to end."""
