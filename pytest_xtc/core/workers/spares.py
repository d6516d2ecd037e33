"""The children a fresh :class:`~pytest_xtc.core.workers.isolation.Worker` forks ahead of
its calls (spares), and the registry of this process's workers, stopped at its exit.

A spare is forked between calls, once the last call's child is killed (never while a
call's processes live), or, where a core is free (``ahead``), once a call's child reports
its first phase: it then waits through that call, out of its reach (the fence), faulting
in what the first calls' children touched (:mod:`prefault`), and serves only if its
scheduling is still the template's as it was before the request
(:func:`template.reached`). What a call's processes lowered in this process from outside
is raised back before each fork (:mod:`template`)."""

from __future__ import annotations

import atexit
import contextlib
import os
from typing import Any

from pytest_xtc.core.workers import prefault, template
from pytest_xtc.core.workers.children import Child, spawn
from pytest_xtc.core.workers.containment import kill_tree, reap_dying
from pytest_xtc.core.workers.hygiene import process_state
from pytest_xtc.core.workers.serving import Handler
from pytest_xtc.core.workers.template import TemplateChanged

#: The first fresh children whose touched memory an ``ahead`` worker reads
#: (:meth:`Spares._learn`); what all of them touched is faulted in ahead.
LEARN_FROM = 2


class Spares:
    """A worker's spares: its next calls' children, forked ahead of them."""

    handler: Handler
    memory_limit: int | None
    clean: bool
    fresh: bool
    ahead: bool
    pid: int
    owner: int
    requests: int
    replies: int
    lifeline: int
    log: Any
    spoiled: str | None
    _spares: list[Child]
    _retiring: bool
    _seen: list[prefault.Seen]
    _plan: prefault.Plan
    _heap: Any
    _reachable: template.Reachable
    _restored: tuple[str, ...]
    _stopper: int | None

    def _retire(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def prepare_next(self) -> None:
        """Fork the next call's child now, unless one waits or a child lives: a fresh
        worker between calls, so that the next call does not wait for the fork. Called
        after a call's child is killed (or by the owner, with ``defer_next``: the last
        call's child is killed first, its teardown no longer delaying the owner's reply).
        An ``ahead`` worker's is forked earlier, during the call (:meth:`_fork_ahead`):
        one is made here only where that fork failed."""
        if self._retiring:
            self._retire()
        if not self.fresh or self.pid:
            return
        with contextlib.suppress(TemplateChanged):  # the next call forks and says it
            self._add_spare()

    def _fork_ahead(self, settled: template.Reachable) -> None:
        """The next call's child, forked once this call's child reported its first phase
        (it has its request and runs), on the free core while the call runs. Its case's
        processes may change this process's scheduling meanwhile (limits they cannot: the
        fence) and the child would inherit it: it serves only if its own is still
        ``settled``, this process's before the request was sent (else it exits,
        :data:`serving.REACHED`, and the next call forks another)."""
        with contextlib.suppress(Exception):  # the next call forks its own and says why
            self._add_spare(settled)

    def _add_spare(self, settled: template.Reachable | None = None) -> None:
        """Fork the next call's child (:meth:`_fork`), unless one waits already."""
        if not self._spares:
            self._spares.append(self._fork(settled))
            _workers[id(self)] = self  # its spares are stopped with it at exit

    def _learn(self) -> None:
        """Read what the call's child touched (it lives still); once the first
        :data:`LEARN_FROM` children said, what all of them touched is faulted in ahead by
        every spare forked after (one hostile case alone cannot make them all do more)."""
        self._seen.append(prefault.learn(self.pid, self._heap))
        if len(self._seen) == LEARN_FROM:
            self._plan = prefault.Plan.of(self._seen)

    def _fork(self, settled: template.Reachable | None = None) -> Child:
        """A new child, forked once this process's limits, CPUs and priority are back to
        what they were (a case's process may have lowered them from outside); it checks
        its scheduling against ``settled`` (default: this process's at the fork) before
        it serves."""
        self._restored += tuple(template.restore(self._reachable))
        learned = self.ahead and len(self._seen) < LEARN_FROM
        return spawn(self.handler, self.memory_limit, self.clean, self._plan, settled, learned)

    def _check_template(self) -> None:
        """After a call: raise back what the call's processes lowered in this one, at once
        (the reply's way out needs it too; pytest's own work, for a host's); what cannot
        be spoils it (``spoiled``)."""
        if self.owner != os.getpid():
            return
        try:
            self._restored += tuple(template.restore(self._reachable))
        except TemplateChanged as exc:
            self.spoiled = str(exc)

    def _start(self) -> None:
        self._stopper = None
        spare = None
        while spare is None and self._spares:
            spare = self._spares.pop(0)
            if not _usable(spare):  # stopped or ended from outside
                _discard(spare)
                spare = None
        if spare is None:
            spare = self._fork()
        if self.log is not None:
            self.log.close()
        self.pid, self.owner = spare.pid, spare.owner
        self.requests, self.replies, self.lifeline = spare.requests, spare.replies, spare.lifeline
        self.log, self._heap = spare.log, spare.heap
        _workers[id(self)] = self

    def _drop_spare(self) -> None:
        spares, self._spares = self._spares, []
        for spare in spares:
            if spare.owner == os.getpid():
                _discard(spare)


_workers: dict[int, Spares] = {}


def _discard(spare: Child) -> None:
    """Kill a child forked ahead (reaped later) and close this process's ends of it."""
    kill_tree(spare.pid, reap=False)
    spare.close()


def _usable(spare: Child) -> bool:
    """Whether a child forked ahead is this process's, alive and not stopped."""
    return spare.owner == os.getpid() and process_state(spare.pid) in ("R", "S", "D")


def live_children() -> set[int]:
    """The children this process's workers serve or hold ready (never reaped here)."""
    me = os.getpid()
    found = set()
    for worker in list(_workers.values()):
        if worker.owner == me and worker.pid:
            found.add(worker.pid)
        found.update(spare.pid for spare in worker._spares if spare.owner == me)
    return found


@atexit.register
def _stop_all() -> None:
    for worker in list(_workers.values()):
        worker.stop()
    reap_dying(block=True)
