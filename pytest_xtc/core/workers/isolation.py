"""Running a target's work in a forked child, so a crash or a hang costs one case.

A :class:`Worker` forks a child that inherits everything the parent prepared (imports,
XTC's runtime, the adapter), then serves requests, each result sent back. The child
reports each phase it enters, so the parent applies that phase's time limit; a child past
its limit is killed. A child that dies says how (signal or exit code) and what it last
printed; its successor is forked at once, so the next case never pays for it.

Transfers are not timed: the child reports the request's first phase once its inputs
are in place, and reports ``transfer`` before it sends its result; large arrays move
through shared memory (:mod:`transfer`), without a copy when they were made there.

Pristine (``fresh``, the case workers, docs/design-workers.md): each request runs in a
child of its own, forked from this process (the template, which runs no request) once the
previous one is killed (never while a request's processes live: they could reach it), and
killed after it: nothing a request does to its process reaches the next. Where a core is
free and the fence scopes signals (``ahead``), the next call's child is forked once a
request's child reports it runs, while it runs: out of its reach, faulting in what the first
cases touched (:mod:`prefault`), and serving only if its scheduling is still the
template's as it was before the request (:func:`template.reached`). What a request's
processes lower in this one from outside (limits, CPUs, priority: :mod:`template`) is
raised back after each call; a child that ends before it reports its first phase never
began (ended from outside): the call goes once more to a new one. A call may ``keep``
its child for the next (the order check's pair, on purpose). A reused child (an adapter's
host) ends the processes a request left (it is their subreaper) and compares its state with
its start's (:mod:`hygiene`), replaced when it changed; a fresh child does the same as a
tripwire. Either is said in the call's ``notes``. The
child's fds 1 and 2 go to a pipe read here into a bounded tail (:mod:`output`).

Containment: each child leads its own session and process group (``os.setsid``), so a
kernel's ``killpg(0, ...)`` cannot reach pytest, and a timeout, a crash, ``stop()`` and the
interpreter's exit kill the whole group (grandchildren too). The child holds none of the
parent's file descriptors but its pipes (``pytest | tee`` ends), dies with its parent
(``PR_SET_PDEATHSIG`` on Linux, and a sentinel process that kills the group when the
parent's lifeline pipe closes, even after a ``kill -9`` of pytest). Every request carries
an id; a reply with another id is never taken. Any exception in the parent while a call is
in flight (a pytest-timeout, Ctrl-C) ends the child before it propagates.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pytest_xtc.core.limits import check_limit
from pytest_xtc.core.workers import fence, prefault, template, transfer
from pytest_xtc.core.workers.children import Child, ChildFailure, available
from pytest_xtc.core.workers.containment import kill_tree, reap_dying
from pytest_xtc.core.workers.output import OutputTail
from pytest_xtc.core.workers.replies import REFUSED, Following
from pytest_xtc.core.workers.serving import ACK, TRANSFER, Handler, HandlerError, Message, Report
from pytest_xtc.core.workers.spares import LEARN_FROM, Spares, _workers, live_children
from pytest_xtc.core.workers.template import TemplateChanged

__all__ = ["REFUSED", "TRANSFER", "ChildFailure", "Handler", "HandlerError", "Report", "Worker",
           "available", "call_isolated", "check_limit"]

T = TypeVar("T")


_ids = itertools.count(1)


class Worker(Spares, Following):
    """A forked child running ``handler(request, report)`` for each request sent.

    After a death, a timeout, an interruption or a change of its state, the child is
    replaced at once (``renew``), and sent ``warm`` (when not None) to get it ready,
    so that recovery is paid by the case that caused it, never by the next one. A
    ``fresh`` worker ends its child after every call (unless the call says ``keep``) and
    forks the next one from this process when the next call comes."""

    def __init__(
        self,
        handler: Handler,
        memory_limit: int | None = None,
        warm: Any = None,
        renew: bool = True,
        warm_limit: float = 60.0,
        clean: bool = True,
        fresh: bool = False,
        defer_next: bool = False,
        ahead: bool = False,
    ) -> None:
        self.handler = handler
        self.fresh = fresh  # one child per call, forked from this process: never reused
        self._kept = False  # the last call kept its child for the next (``keep``)
        #: A fresh worker's next child, forked once the last one is killed (never while
        #: a case's process lives), by :meth:`prepare_next`: after each call, or when the
        #: owner says (``defer_next``: the host, once its reply is sent). Where the owner
        #: says a core is free (``ahead``) and the fence scopes signals, it is forked
        #: instead once a call's child has its request and runs (:meth:`_fork_ahead`,
        #: on the other core: forked as the request left, it delayed that child): it waits
        #: through that call, out of its reach, faulting in the memory a case touches
        #: (:mod:`prefault`) so that its own case does not; the fork is off the way
        #: between calls.
        self._spares: list[Child] = []
        self.defer_next = defer_next
        self._retiring = False  # the last call's child, done, is killed by prepare_next
        self.ahead = ahead and fresh and fence.scopes_signals()
        self._seen: list[prefault.Seen] = []  # what its first case workers touched
        self._plan = prefault.NOTHING  # what all of them touched: faulted in ahead
        self._heap = prefault.UNMEASURED  # this process's heap when the child was forked
        #: this process's state that others can change (:mod:`template`), as it was
        self._reachable = template.take()
        self._restored: tuple[str, ...] = ()  # what was put back before the last fork
        #: why children can no longer be forked from this process (its limits were lowered
        #: from outside, past raising back): its owner replaces it, if it can
        self.spoiled: str | None = None
        self._begun = False  # the current call's child reported its first phase
        self._meanwhile: Callable[[], None] | None = None
        self.clean = clean  # tidy after each request (strays, state); not for a host
        self.memory_limit = memory_limit
        self.warm, self.renew, self.warm_limit = warm, renew, warm_limit
        self.pid = 0
        self.owner = 0  # the process that forked the child: only it may stop it
        self.requests = self.replies = self.lifeline = -1
        self.log: OutputTail | None = None  # the child's fds 1 and 2, a bounded tail
        self.notes: tuple[str, ...] = ()  # the last call's notes
        #: The last call's seconds moving its request in and its reply out (packing,
        #: the pipe, mapping; the child's tidying after it), not the handler's work.
        self.moved_s = 0.0
        self._renewing = False
        self._stopper: int | None = None  # the thread that last stopped the child
        self._sent_at = 0.0

    @property
    def kept(self) -> bool:
        """Whether the last call's child is kept, alive, for the next call (``keep``)."""
        return self._kept and bool(self.pid)

    def call(
        self,
        request: Any,
        limits: Mapping[str, float],
        first_phase: str,
        on_phase: Report | None = None,
        meanwhile: Callable[[], None] | None = None,
        keep: bool = False,
        reuse: bool = False,
    ) -> Any:
        """``handler(request, report)`` in the child; its return value, or the exception it
        raised. ``report(phase)`` starts the clock of ``limits[phase]`` (seconds) and is
        passed on to ``on_phase``, as is ``transfer`` when inputs or results move (its
        own, generous, limit). ``meanwhile()`` runs here once the request is sent, while
        the child works (it must not raise): the phases it delays reading are timed from
        when the child reported them. Whatever interrupts the call here ends the child.
        A fresh worker's child serves this call alone, unless ``keep`` (it then serves
        the next call too if that one says ``reuse``; any other is given a fresh child).
        A child that dies before it reports ``first_phase`` never ran any of the request
        (ended from outside): the request goes once more to a new child, said in ``notes``."""
        for phase, limit in limits.items():
            check_limit(f"{phase} time limit", limit)
        if self._retiring:
            self._retire()  # the owner did not say its reply was out: never reused
        if self._kept and not reuse:
            self.stop()  # what the kept child went through must not reach this call
        gone = ("the worker kept for this call was gone: it ran in a new one",) \
            if reuse and self.fresh and not self.kept else ()
        self._kept = False
        self._meanwhile = meanwhile
        retried: tuple[str, ...] = ()
        while True:
            try:
                message = self._attempt(request, limits, first_phase, on_phase)
                break
            except ChildFailure as exc:
                if self._begun or retried or self._renewing or exc.cause.startswith("timed out") \
                        or self._stopper not in (None, threading.get_ident()):
                    self._restored = ()  # said by the failure, never by the next call
                    raise
                retried = (f"the worker made for this call ended before the call began "
                           f"({exc.cause}); it ran in a new one",)
            finally:
                self._check_template()
        self.notes = message.notes + self._restored + retried + gone
        self._restored = ()
        if self.ahead and len(self._seen) < LEARN_FROM and self.pid \
                and self.owner == os.getpid() and not message.retire:
            self._learn()
        if self.fresh and keep and not message.retire:
            self._kept = True
        elif self.fresh and self.defer_next:
            self._retiring = True  # killed by prepare_next, once the owner's reply is out
        elif self.fresh:
            self._retire()  # the next call's child is forked then, from this process
        elif message.retire:
            self._replace(None)
        if message.kind == "error":
            error = message.value
            if not isinstance(error, Exception):
                error = HandlerError(f"{type(error).__name__}: {error}")
            raise error
        return message.value

    def _attempt(self, request: Any, limits: Mapping[str, float], first_phase: str,
                 on_phase: Report | None) -> Message:
        """Send ``request`` to the child (forked now if there is none) and follow it to its
        reply. ``self._begun`` says whether the child reported its first phase."""
        self._begun = False
        try:
            self.start()
        except TemplateChanged as exc:
            raise ChildFailure(first_phase, str(exc)) from None
        pid = self.pid  # another thread may stop this worker meanwhile (a warm-up's wait)
        assert self.log is not None
        self.log.clear()
        self.notes = ()
        self.moved_s = 0.0
        self._sent_at = time.perf_counter()
        ident = next(_ids)
        packed = transfer.pack((ident, first_phase, request))
        settled = template.take() if self.ahead else None  # before the request can act
        requests = replies = -1
        try:
            requests, replies = self._hold(first_phase, pid)
            try:
                transfer.send(requests, packed)
            except OSError:  # the child died between requests
                raise ChildFailure(first_phase, *self._death(first_phase, pid)) from None
            with contextlib.suppress(OSError):  # the last calls' children, killed: reaped
                reap_dying(known=live_children())  # while this one works, not before
            meanwhile, self._meanwhile = self._meanwhile, None  # once, whatever the tries
            if meanwhile is not None:
                meanwhile()
            message = self._watch(ident, limits, on_phase, packed, pid, replies, settled)
            with contextlib.suppress(OSError):
                transfer.write_frame(requests, ACK)  # the child may free what it sent, now
        except BaseException as exc:
            begun = self._begun  # the successor's warm-up is a call of its own
            if not self._stopped_elsewhere(pid):  # then the session ends: no successor
                self._replace(exc)  # a reply still pending must never reach the next call
            self._begun = begun
            raise
        finally:
            packed.close()
            for fd in (requests, replies):
                if fd >= 0:
                    os.close(fd)
        return message

    def _hold(self, phase: str, pid: int) -> tuple[int, int]:
        """This call's own copies of the child ``pid``'s request and reply ends. A stop()
        from another thread closes the worker's, never these: the waiting thread then
        reads the child's end closed, instead of a closed number (or one that an open
        elsewhere was given meanwhile)."""
        held: list[int] = []
        try:
            for fd in (self.requests, self.replies):
                held.append(os.dup(fd))
        except OSError:
            if pid and self.pid == pid:  # not stopped: this process is out of descriptors
                for fd in held:
                    os.close(fd)
                raise
        if len(held) == 2 and pid and self.pid == pid:  # copied before a stop closed them
            return held[0], held[1]
        for fd in held:
            os.close(fd)
        raise ChildFailure(phase, *self._death(phase, pid))

    def start(self) -> None:
        """Fork the child now, unless this process already has one."""
        if self._retiring:
            self._retire()
        if not self.pid or self.owner != os.getpid():
            self._start()

    def stop(self) -> None:
        """Kill the child's whole process group (and its escaped daemons), reap the child.
        The pid is forgotten first: a thread waiting on the child then sees it stopped."""
        pid, mine = self.pid, self.owner == os.getpid()
        self.pid, self._retiring = 0, False
        self._stopper = threading.get_ident()
        self._drop_spare()
        if pid and mine:
            kill_tree(pid)
            self._close()
            if self.log is not None:
                self.log.drained(1.0)  # the pipe's last bytes are in; its read end closed

    def _retire(self) -> None:
        """A fresh child after its call: killed with its group now, reaped later (its
        memory is freed while the next case runs); its output drain ends by itself."""
        self._retiring = False
        pid, self.pid = self.pid, 0
        if pid and self.owner == os.getpid():
            if self.ahead:  # its teardown (unmapping the case's memory) then waits for the
                # free core, taking none that pytest or this process wants meanwhile
                with contextlib.suppress(OSError, AttributeError):
                    os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
            kill_tree(pid, reap=False)
            self._close()
            if not self.defer_next:
                self.prepare_next()

    def _stopped_elsewhere(self, pid: int) -> bool:
        """Whether another thread stopped the child ``pid`` this thread was waiting on."""
        return self.pid != pid and self._stopper not in (None, threading.get_ident())

    def _close(self) -> None:
        for fd in (self.requests, self.replies, self.lifeline):
            with contextlib.suppress(OSError):
                os.close(fd)
        _workers.pop(id(self), None)

    def _replace(self, cause: BaseException | None) -> None:
        """End the child; unless the user interrupts, fork (and warm) its successor now."""
        mine = self.owner == os.getpid()
        self.stop()
        if not mine or not self.renew or self._renewing:
            return
        if isinstance(cause, (KeyboardInterrupt, SystemExit)):
            return
        self._renewing = True
        try:
            self._start()
            if self.warm is not None:
                with contextlib.suppress(Exception):  # the next call meets it and says so
                    self.call(self.warm, {TRANSFER: self.warm_limit}, TRANSFER)
        finally:
            self._renewing = False

    def _forget(self) -> None:
        if self.pid and self.owner == os.getpid():
            self._close()
        self.pid = 0



def call_isolated(fn: Callable[[], T], limit_s: float, what: str) -> T:
    """``fn()`` in a one-shot forked child under ``limit_s`` seconds: its (pickled) result,
    or the exception it raised (non-``Exception`` ones as :class:`HandlerError`), or
    :class:`ChildFailure` naming the crash or the timeout, ``what`` as its phase."""
    worker = Worker(lambda _request, _report: fn(), renew=False)
    try:
        result: T = worker.call(None, {what: limit_s}, what)
        return result
    finally:
        worker.stop()


