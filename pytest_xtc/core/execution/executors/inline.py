"""Target work in the pytest process itself: no containment (``--xtc-no-isolation``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pytest_xtc.core.adapter import TargetAdapter
from pytest_xtc.core.execution.work import Work, WorkRequest, target_work
from pytest_xtc.core.outcome import Phase


class InlineExecutor:
    shared = False

    def __init__(self, adapter: TargetAdapter) -> None:
        self.adapter = adapter
        self.phase = Phase.COMPILE.value
        self.kept = ""  # no worker: none is ever kept

    def run(self, request: WorkRequest, limits: Mapping[str, float],
            meanwhile: Callable[[], None] | None = None) -> Work:
        """The work, then ``meanwhile()``: one process does both, one after the other."""
        self.phase = Phase.COMPILE.value
        done = target_work(self.adapter, request, self._enter)
        if meanwhile is not None:
            meanwhile()
        return done

    def _enter(self, phase: str) -> None:
        self.phase = phase

    def close(self) -> None:
        """Nothing to end."""
