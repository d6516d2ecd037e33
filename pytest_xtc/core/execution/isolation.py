"""Running a target's work in a forked child, so a crash or a hang costs one case.

A :class:`Worker` forks a child that inherits everything the parent prepared (imports,
XTC's runtime, the adapter), then serves one request after another: each request is
handled, and its picklable result sent back. The child reports each phase it enters, so
the parent applies that phase's time limit; a child past its limit is killed. A child that
dies says how (signal or exit code) and what it last printed, and the next request forks
a fresh one. Cost: a pipe round trip and pickling the arrays (well under a millisecond
for the suite's sizes), plus a fork (about 3 ms) after each death.

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

import atexit
import contextlib
import ctypes
import faulthandler
import gc
import itertools
import os
import pickle
import select
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO, TypeVar

from pytest_xtc.core.limits import check_limit
from pytest_xtc.core.outcome import Failure, FailureKind

__all__ = ["ChildFailure", "HandlerError", "Worker", "available", "call_isolated", "check_limit"]

Report = Callable[[str], None]
Handler = Callable[[Any, Report], Any]
T = TypeVar("T")
OUTPUT_TAIL = 800  # characters of the child's last output quoted in a failure
_PR_SET_PDEATHSIG = 1


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


class HandlerError(RuntimeError):
    """The handler raised something that is not an ``Exception`` (``SystemExit``,
    ``KeyboardInterrupt``...) or that does not pickle: its type and message, as text."""


@dataclass
class _Message:
    kind: str  # "phase", "result" or "error"
    value: Any
    id: int = 0


def available() -> bool:
    return hasattr(os, "fork") and hasattr(os, "setsid")


_ids = itertools.count(1)


class Worker:
    """A forked child running ``handler(request, report)`` for each request sent."""

    def __init__(self, handler: Handler, memory_limit: int | None = None) -> None:
        self.handler = handler
        self.memory_limit = memory_limit
        self.pid = 0
        self.owner = 0  # the process that forked the child: only it may stop it
        self.requests = self.replies = self.lifeline = -1
        self.log: BinaryIO | None = None

    def call(
        self,
        request: Any,
        limits: Mapping[str, float],
        first_phase: str,
        on_phase: Report | None = None,
    ) -> Any:
        """``handler(request, report)`` in the child; its return value, or the exception it
        raised. ``report(phase)`` starts the clock of ``limits[phase]`` (seconds) and is
        passed on to ``on_phase``. Whatever interrupts the call here ends the child."""
        for phase, limit in limits.items():
            check_limit(f"{phase} time limit", limit)
        if not self.pid or self.owner != os.getpid():
            self._start()
        assert self.log is not None
        self.log.seek(0)
        self.log.truncate()
        ident = next(_ids)
        try:
            try:
                _send(self.requests, pickle.dumps((ident, request)))
            except OSError:  # the child died between requests
                raise ChildFailure(first_phase, *self._death(first_phase)) from None
            message = self._watch(ident, limits, first_phase, on_phase)
        except BaseException:
            self.stop()  # a reply still pending must never reach the next call
            raise
        if message.kind == "error":
            error = message.value
            if not isinstance(error, Exception):
                error = HandlerError(f"{type(error).__name__}: {error}")
            raise error
        return message.value

    def stop(self) -> None:
        """Kill the child's whole process group and reap the child."""
        if self.pid and self.owner == os.getpid():
            _kill_group(self.pid)
        self._forget()

    def _forget(self) -> None:
        if self.pid and self.owner == os.getpid():
            for fd in (self.requests, self.replies, self.lifeline):
                with contextlib.suppress(OSError):
                    os.close(fd)
            _workers.pop(id(self), None)
        self.pid = 0

    def _start(self) -> None:
        requests_read, self.requests = os.pipe()
        self.replies, replies_write = os.pipe()
        lifeline_read, self.lifeline = os.pipe()
        if self.log is not None:
            self.log.close()
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (the worker's, for its life)
        parent = os.getpid()
        gc.freeze()  # the child's collector then leaves the parent's objects (and pages) alone
        pid = os.fork()
        if pid == 0:  # the child: never returns
            fds = _Fds(requests_read, replies_write, lifeline_read, self.log.fileno())
            _child(self.handler, fds, parent, self.memory_limit)
        os.close(requests_read)
        os.close(replies_write)
        os.close(lifeline_read)
        self.pid, self.owner = pid, parent
        _workers[id(self)] = self

    def _watch(
        self, ident: int, limits: Mapping[str, float], phase: str, on_phase: Report | None
    ) -> _Message:
        buffer = b""
        deadline = time.monotonic() + limits[phase]
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.stop()
                limit = f"{limits[phase]:g} s"
                tail = self._tail()
                text = f"timed out: {phase} exceeded its {limit} limit{tail}"
                raise ChildFailure(phase, text, f"timed out after {limit}{tail}",
                                   FailureKind(Failure.TIMEOUT))
            ready, _, _ = select.select([self.replies], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(self.replies, 1 << 20)
            if not chunk:  # the child is gone without a result
                raise ChildFailure(phase, *self._death(phase))
            buffer += chunk
            while len(buffer) >= 8 and len(buffer) >= 8 + int.from_bytes(buffer[:8], "little"):
                size = int.from_bytes(buffer[:8], "little")
                message: _Message = pickle.loads(buffer[8 : 8 + size])
                buffer = buffer[8 + size :]
                if message.id != ident:  # a stale reply: never this call's
                    continue
                if message.kind != "phase":
                    return message
                phase = str(message.value)
                if phase not in limits:
                    raise ChildFailure(phase, f"the child reported an unknown phase {phase!r}")
                deadline = time.monotonic() + limits[phase]
                if on_phase is not None:
                    on_phase(phase)

    def _death(self, phase: str) -> tuple[str, str, FailureKind]:
        """The child died: kill what is left of its group, reap it, say how it died."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        _, status = os.waitpid(self.pid, 0)
        self._forget()
        if os.WIFSIGNALED(status):
            number = os.WTERMSIG(status)
            name = signal.Signals(number).name
            cause = f"killed by signal {name} ({signal.strsignal(number)})"
            kind = FailureKind(Failure.SIGNAL, name)
        else:
            cause = f"exited with code {os.WEXITSTATUS(status)} and no result"
            kind = FailureKind(Failure.EXIT_CODE, str(os.WEXITSTATUS(status)))
        tail = self._tail()
        return f"crashed during {phase}: {cause}{tail}", cause + tail, kind

    def _tail(self) -> str:
        if self.log is None:
            return ""
        self.log.seek(0)
        text = self.log.read().decode(errors="replace").strip()
        return f"; last output: {text[-OUTPUT_TAIL:]}" if text else ""


def call_isolated(fn: Callable[[], T], limit_s: float, what: str) -> T:
    """``fn()`` in a one-shot forked child under ``limit_s`` seconds: its (pickled) result,
    or the exception it raised (non-``Exception`` ones as :class:`HandlerError`), or
    :class:`ChildFailure` naming the crash or the timeout, ``what`` as its phase."""
    worker = Worker(lambda _request, _report: fn())
    try:
        result: T = worker.call(None, {what: limit_s}, what)
        return result
    finally:
        worker.stop()


@dataclass(frozen=True)
class _Fds:
    requests: int
    replies: int
    lifeline: int
    log: int


def _child(handler: Handler, fds: _Fds, parent: int, memory_limit: int | None) -> None:
    """The forked child: contain it, then serve requests until the pipe closes."""
    code = 70
    try:
        os.setsid()
        _die_with(parent)
        _sentinel(fds.lifeline)
        _own_stdio(fds.log)
        _close_fds_except({0, 1, 2, fds.requests, fds.replies})
        if memory_limit:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
        faulthandler.enable(file=sys.stderr)  # a crash's Python stack goes to the log too
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        gc.disable()  # collecting would only copy the parent's pages into this child
        _serve(handler, fds.requests, fds.replies)
        code = 0
    except BaseException:  # the exit code says it
        pass
    finally:
        os._exit(code)


def _serve(handler: Handler, requests: int, replies: int) -> None:
    me = os.getpid()
    while (data := _receive(requests)) is not None:
        ident, request = pickle.loads(data)

        def report(phase: str, ident: int = ident) -> None:
            _send(replies, pickle.dumps(_Message("phase", phase, ident)))

        try:
            reply = _Message("result", handler(request, report), ident)
        except BaseException as exc:  # the parent decides what it means
            if not isinstance(exc, Exception):
                exc = HandlerError(f"{type(exc).__name__}: {exc}")
            reply = _Message("error", exc, ident)
        if os.getpid() != me:  # a process the handler forked came back here: end it
            os._exit(0)
        try:
            payload = pickle.dumps(reply)
        except Exception:  # a result or an exception that does not pickle
            error = HandlerError(f"{type(reply.value).__name__}: {reply.value}")
            payload = pickle.dumps(_Message("error", error, ident))
        _send(replies, payload)


def _die_with(parent: int) -> None:
    """Linux: SIGKILL this process when its parent dies (and check it is not dead yet)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(70)


def _sentinel(lifeline: int) -> None:
    """Fork a small process of this group that kills the group when ``lifeline`` reads
    EOF: when the parent, the only holder of its write end, is gone (even by SIGKILL)."""
    if os.fork() != 0:
        os.close(lifeline)
        return
    try:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        _close_fds_except({0, 1, 2, lifeline})
        while True:
            with contextlib.suppress(InterruptedError):
                if os.read(lifeline, 1) == b"":
                    break
        os.killpg(0, signal.SIGKILL)
    finally:
        os._exit(0)


def _own_stdio(log: int) -> None:
    """fds 0, 1, 2 become /dev/null and the log; Python's streams write to the log."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 (the child's, for its life)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115


def _close_fds_except(keep: set[int]) -> None:
    """Close every open descriptor not in ``keep`` (inherited pipes, sockets, files)."""
    try:
        open_fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        open_fds = list(range(3, 256))
    for fd in open_fds:
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)


def _send(fd: int, data: bytes) -> None:
    payload = len(data).to_bytes(8, "little") + data
    while payload:
        payload = payload[os.write(fd, payload) :]


def _read_exactly(fd: int, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _receive(fd: int) -> bytes | None:
    header = _read_exactly(fd, 8)
    return None if header is None else _read_exactly(fd, int.from_bytes(header, "little"))


def _kill_group(pid: int) -> None:
    """SIGKILL the process group led by ``pid`` (and ``pid`` itself), then reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


_workers: dict[int, Worker] = {}


@atexit.register
def _stop_all() -> None:
    for worker in list(_workers.values()):
        worker.stop()
