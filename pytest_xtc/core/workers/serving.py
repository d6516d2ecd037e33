"""The forked child's side of an :class:`~pytest_xtc.core.workers.isolation.Worker`:
contain itself, then serve requests, reporting each phase it enters, and tidy after each
one (end the processes it left, compare the process state with the one it started with,
:mod:`hygiene`). Messages are length-prefixed frames of :mod:`transfer`: requests come
down a channel with the shared files they refer to, replies go up a pipe."""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pytest_xtc.core.workers import containment, fence, hygiene, prefault, template, transfer

Report = Callable[[str], None]
Handler = Callable[[Any, Report], Any]
TRANSFER = "transfer"  # the phase of moving a request in or a result out (untimed work)
ACK = b""  # the parent's frame saying it has mapped the last result
#: The exit code of a worker whose state that others can change (its niceness, CPUs,
#: policy: :mod:`template`) changed while it waited for its first request: it serves
#: none (the parent forks another, where nothing can reach it before its call).
REACHED = 76


class HandlerError(RuntimeError):
    """The handler raised something that is not an ``Exception`` (``SystemExit``,
    ``KeyboardInterrupt``...) or that does not pickle: its type and message, as text."""


@dataclass
class Message:
    kind: str  # "phase", "result" or "error"
    value: Any
    id: int = 0
    notes: tuple[str, ...] = ()  # what the child did after the handler, said in a line each
    retire: bool = False  # the handler changed the child's state: replace it
    #: When the sender made it (``time.perf_counter``: one clock for every process of the
    #: machine), so that a reader busy elsewhere still times phases from when they began.
    at: float = field(default_factory=time.perf_counter)


@dataclass(frozen=True)
class Fds:
    requests: int
    replies: int
    lifeline: int
    log: int


def child(
    handler: Handler, fds: Fds, parent: int, memory_limit: int | None, clean: bool,
    born: template.Reachable, ahead: prefault.Plan = prefault.NOTHING,
) -> None:
    """The forked child (its template's state ``born``): contain it, fault in what
    ``ahead`` says, then serve requests until the pipe closes."""
    code = 70
    try:
        expected = template.case_policy(born)
        os.setsid()
        containment.die_with(parent)
        hygiene.become_subreaper()
        hygiene.roomy_stack()  # before the state is fingerprinted (_serve): its baseline
        keeper = containment.sentinel(fds.lifeline)
        containment.own_stdio(fds.log)
        containment.close_fds_except({0, 1, 2, fds.requests, fds.replies})
        transfer.drop_inherited()  # the operands of a call the parent is serving now
        if memory_limit:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
        fence.install()  # from here, the processes around this one are out of reach
        faulthandler.enable(file=sys.stderr)  # a crash's Python stack goes to the log too
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        gc.disable()  # collecting would only copy the parent's pages into this child
        prefault.populate(ahead, fds.requests)
        _serve(handler, fds.requests, fds.replies, keeper if clean else 0, expected)
        code = 0
    except BaseException:  # the exit code says it
        pass
    finally:
        os._exit(code)


def _serve(handler: Handler, requests: int, replies: int, keeper: int,
           expected: template.Reachable) -> None:
    """Serve requests; ``keeper`` (the sentinel's pid; 0: do not tidy) is spared when the
    processes a request left are ended. Before the first, a state other than
    ``expected`` (set from outside while it waited) ends this process (:data:`REACHED`)."""
    me = os.getpid()
    clean = hygiene.fingerprint()
    waited: template.Reachable | None = expected
    #: the handler's work between requests (a host forks its next case's worker then)
    after_reply = getattr(handler, "after_reply", None)
    sent: transfer.Packed | None = None
    while (received := transfer.receive(requests)) is not None:
        frame, passed = received
        if sent is not None:
            sent.close()  # the parent has read the last result: free what it held
            sent = None
        if frame == ACK:  # (while the parent checks the result, on another core)
            continue
        if waited is not None:
            if template.reached(waited):
                os._exit(REACHED)
            waited = None
        ident, first_phase, request = transfer.unpack(frame, passed)

        def report(phase: str, ident: int = ident) -> None:
            transfer.write_frame(replies, transfer.pack(Message("phase", phase, ident)).frame)

        report(first_phase)  # the inputs are in place: the clock starts now
        try:
            reply = Message("result", handler(request, report), ident)
        except BaseException as exc:  # the parent decides what it means
            if not isinstance(exc, Exception):
                exc = HandlerError(f"{type(exc).__name__}: {exc}")
            reply = Message("error", exc, ident)
        del request  # its operands are freed now, not at the next request
        if os.getpid() != me:  # a process the handler forked came back here: end it
            os._exit(0)
        report(TRANSFER)
        if keeper:
            reply.notes, reply.retire = _tidy(clean, keeper)
        reply.at = time.perf_counter()  # it leaves now: the reader times its way from here
        try:
            sent = transfer.pack(reply)
        except Exception:  # a result or an exception that does not pickle
            error = HandlerError(f"{type(reply.value).__name__}: {reply.value}")
            reply.kind, reply.value = "error", error
            sent = transfer.pack(reply)
        del reply  # ``sent`` keeps its arrays until the parent has them
        transfer.write_frame(replies, sent.frame)
        if after_reply is not None:
            with contextlib.suppress(Exception):  # the next request meets it and says so
                after_reply()


def _tidy(clean: dict[str, object], keeper: int) -> tuple[tuple[str, ...], bool]:
    """After a request: end the processes it left, and say whether it changed the child's
    state (then the timers are disarmed and the recursion limit restored, so that the
    reply gets out; the parent replaces the child)."""
    changed = hygiene.changes(clean, hygiene.fingerprint())
    if changed:
        hygiene.disarm_timers()
        sys.setrecursionlimit(int(clean["recursion limit"]))  # type: ignore[call-overload]
    notes = []
    ended = hygiene.end_strays({keeper})
    if ended:
        notes.append(f"ended {ended} process{'es' if ended > 1 else ''} the case left behind")
    if changed:
        notes.append("worker replaced: the case changed its " + ", ".join(changed))
    return tuple(notes), bool(changed)
