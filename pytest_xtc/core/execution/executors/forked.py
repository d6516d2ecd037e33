"""Target work in a worker forked from the pytest process, for an adapter built here: the
adapter is prepared once in this process, so that every worker it forks starts warm; each
case gets a worker of its own (``fresh``), forked from this process, which runs no kernel."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from functools import partial

from pytest_xtc.core.adapter import TargetAdapter
from pytest_xtc.core.execution.executors.beside import one_blas_thread
from pytest_xtc.core.execution.work import Work, WorkRequest, target_work
from pytest_xtc.core.limits import worker_memory_limit
from pytest_xtc.core.outcome import Phase
from pytest_xtc.core.workers import isolation


class ForkedExecutor:
    shared = True

    def __init__(self, adapter: TargetAdapter) -> None:
        self.adapter = adapter
        self.worker: isolation.Worker | None = None
        self.phase = Phase.COMPILE.value
        self.kept = ""  # the case whose own worker is kept, having run it alone (runner)

    def run(self, request: WorkRequest, limits: Mapping[str, float],
            meanwhile: Callable[[], None] | None = None) -> Work:
        if self.worker is None:
            with contextlib.suppress(Exception):  # the cases meet the same problem and say it
                self.adapter.prepare(request.workdir.parent / f"prepare-{self.adapter.name}")
            handler = partial(target_work, self.adapter, in_worker=True)
            self.worker = isolation.Worker(handler, worker_memory_limit(self.adapter),
                                           fresh=True)
        done: Work = self.worker.call(request, limits, Phase.COMPILE.value, self._enter,
                                      one_blas_thread(meanwhile),
                                      keep=request.settings.keep_worker,
                                      reuse=request.settings.kept_worker)
        done.notes += self.worker.notes
        done.moved_s = self.worker.moved_s
        done.kept = self.worker.kept
        return done

    def _enter(self, phase: str) -> None:
        self.phase = phase

    def close(self) -> None:
        if self.worker is not None:
            self.worker.stop()
