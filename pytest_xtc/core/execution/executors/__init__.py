"""Where a case's target work runs, behind one small protocol (one strategy per module):

- :mod:`.inline`: in the pytest process (``--xtc-no-isolation``, or no ``fork``);
- :mod:`.forked`: in a worker forked from the pytest process (an adapter built here);
- :mod:`.hosted`: in a worker forked by the adapter's own host process (the registry's
  :class:`~pytest_xtc.core.execution.remote.IsolatedAdapter`).

:func:`executor_for` is the one place that chooses. An executor's ``run`` returns the
:class:`~pytest_xtc.core.execution.work.Work` or raises
:class:`~pytest_xtc.core.workers.isolation.ChildFailure`; ``shared`` says whether the
output placeholders it is given should lie in shared memory (they then cross without a
copy; inputs are copied into it once, on their way). ``run`` also runs the checking
side's ``meanwhile`` (the references): while a worker works (on one BLAS thread,
:mod:`.beside`), or after the work in process.
"""

from __future__ import annotations

import atexit
from collections.abc import Callable, Mapping
from typing import Protocol

from pytest_xtc.core.adapter import TargetAdapter
from pytest_xtc.core.cases.case import Case
from pytest_xtc.core.execution.settings import Settings
from pytest_xtc.core.execution.work import Work, WorkRequest, outcome_phase
from pytest_xtc.core.outcome import Outcome, Status


class Executor(Protocol):
    shared: bool
    phase: str  # the phase the last (or current) case's work reported
    #: the id of the case whose work, run alone in a fresh worker, left that worker kept
    #: for the next work (``keep_worker``); "" if none. Set by the runner.
    kept: str

    @property
    def adapter(self) -> TargetAdapter: ...

    def run(self, request: WorkRequest, limits: Mapping[str, float],
            meanwhile: Callable[[], None] | None = None) -> Work: ...

    def close(self) -> None: ...


_chosen: dict[tuple[int, bool], Executor] = {}


def executor_for(adapter: TargetAdapter, settings: Settings) -> Executor:
    """The executor of ``adapter``'s cases (one per adapter and mode, kept)."""
    from pytest_xtc.core.execution.executors import forked, hosted, inline
    from pytest_xtc.core.execution.remote import IsolatedAdapter
    from pytest_xtc.core.workers import isolation

    key = (id(adapter), settings.isolate)
    if key not in _chosen or _chosen[key].adapter is not adapter:
        executor: Executor
        if isinstance(adapter, IsolatedAdapter):
            executor = hosted.HostedExecutor(adapter)
        elif settings.isolate and isolation.available():
            executor = forked.ForkedExecutor(adapter)
        else:
            executor = inline.InlineExecutor(adapter)
        _chosen[key] = executor
    return _chosen[key]


def interrupted(adapter: TargetAdapter, case: Case, settings: Settings, why: str) -> Outcome:
    """The outcome of a case that something outside the suite ended (pytest-timeout): an
    infrastructure error in the phase its executor was in, never a wrong result."""
    phase = executor_for(adapter, settings).phase
    where = outcome_phase(phase)
    message = f"interrupted during {phase}: {why.strip().splitlines()[0] if why.strip() else ''}"
    return Outcome(case.id, adapter.name, Status.ERROR, where, message.rstrip(": "))


@atexit.register
def close_all() -> None:
    """End every executor's workers (and hosts); a later case starts new ones."""
    for executor in list(_chosen.values()):
        executor.close()
    _chosen.clear()
