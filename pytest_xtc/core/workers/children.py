"""A worker's child process: forking one ready to serve (:func:`spawn`), the parent's ends
of its pipes (:class:`Child`), and how a child's end is said (:class:`ChildFailure`)."""

from __future__ import annotations

import contextlib
import gc
import os
import signal
from dataclasses import dataclass
from typing import Any

from pytest_xtc.core.outcome import Failure, FailureKind
from pytest_xtc.core.workers import fence, prefault, template, transfer
from pytest_xtc.core.workers.output import OutputTail
from pytest_xtc.core.workers.serving import REACHED, Fds, Handler, child


class ChildFailure(Exception):
    """The child crashed, exited or timed out. ``phase`` is where it was; ``cause`` says
    what happened in a few words (``timed out after 3 s``, ``killed by signal SIGSEGV``)."""

    def __init__(self, phase: str, message: str, cause: str = "",
                 kind: FailureKind | None = None) -> None:
        super().__init__(message)
        self.phase = phase
        self.cause = cause or message
        self.kind = kind  # the timeout, signal or exit code, as data

    def __reduce__(self) -> tuple[Any, ...]:
        return (ChildFailure, (self.phase, str(self), self.cause, self.kind))


def available() -> bool:
    return hasattr(os, "fork") and hasattr(os, "setsid")


@dataclass
class Child:
    """A forked child and this process's ends of its pipes."""

    pid: int
    owner: int
    requests: int
    replies: int
    lifeline: int
    log: OutputTail
    heap: prefault.Heap  # this process's heap when the child was forked

    def close(self) -> None:
        for fd in (self.requests, self.replies, self.lifeline):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.log.close()


def spawn(handler: Handler, memory_limit: int | None, clean: bool,
          ahead: prefault.Plan = prefault.NOTHING, settled: template.Reachable | None = None,
          learned: bool = False) -> Child:
    """Fork a child of this process, ready to serve ``handler``'s requests; it faults in
    what ``ahead`` says (:mod:`prefault`) while it waits for its first, and serves it only
    if its scheduling is then still ``settled``'s (default: this process's now). A child
    ``learned`` from (:func:`prefault.learn`) has this process's heap measured first."""
    requests_read, requests = transfer.channel()
    replies, replies_write = transfer.pipe()
    lifeline_read, lifeline = os.pipe()
    log = OutputTail()
    parent = os.getpid()
    gc.freeze()  # the child's collector then leaves the parent's objects (and pages) alone
    fence.landlock_abi()  # libc loaded and the kernel asked here once, not in each child
    #: what the child must still have when its first request comes
    born = template.take() if settled is None else settled
    heap = prefault.Heap.now() if learned else prefault.UNMEASURED
    pid = os.fork()
    if pid == 0:  # the child: never returns
        fds = Fds(requests_read, replies_write, lifeline_read, log.write_fd)
        child(handler, fds, parent, memory_limit, clean, born, ahead)
    log.start()
    os.close(requests_read)
    os.close(replies_write)
    os.close(lifeline_read)
    return Child(pid, parent, requests, replies, lifeline, log, heap)


def how_it_ended(status: int) -> tuple[str, FailureKind]:
    """A dead child's wait status, said in a few words and as data."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        name = signal.Signals(number).name
        return (f"killed by signal {name} ({signal.strsignal(number)})",
                FailureKind(Failure.SIGNAL, name))
    code = os.WEXITSTATUS(status)
    if code == REACHED:
        return (f"exited with code {code} before its call: its scheduling was changed from "
                "outside while it waited", FailureKind(Failure.EXIT_CODE, str(code)))
    return f"exited with code {code} and no result", FailureKind(Failure.EXIT_CODE, str(code))
