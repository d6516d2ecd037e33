"""Target work in a worker forked by the adapter's host process (an
:class:`~pytest_xtc.core.execution.remote.IsolatedAdapter`: the vendor's code never runs
in the pytest process)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pytest_xtc.core.execution.executors.beside import one_blas_thread
from pytest_xtc.core.execution.remote import IsolatedAdapter
from pytest_xtc.core.execution.work import Work, WorkRequest
from pytest_xtc.core.outcome import Phase


class HostedExecutor:
    shared = True

    def __init__(self, adapter: IsolatedAdapter) -> None:
        self.adapter = adapter
        self.phase = Phase.COMPILE.value
        self.kept = ""  # the case whose own worker is kept, having run it alone (runner)

    def run(self, request: WorkRequest, limits: Mapping[str, float],
            meanwhile: Callable[[], None] | None = None) -> Work:
        done: Work = self.adapter.work(request, limits, Phase.COMPILE.value, self._enter,
                                       one_blas_thread(meanwhile))
        return done

    def _enter(self, phase: str) -> None:
        self.phase = phase

    def close(self) -> None:
        self.adapter.stop()
