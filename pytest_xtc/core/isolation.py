"""Running a target's work in a forked child, so a crash or a hang costs one case.

A :class:`Worker` forks a child that inherits everything the parent prepared (imports,
XTC's runtime, the adapter), then serves one request after another: each request is
handled, and its picklable result sent back. The child reports each phase it enters, so
the parent applies that phase's time limit; a child past its limit is killed. A child that
dies says how (signal or exit code) and what it last printed, and the next request forks
a fresh one. Cost: a pipe round trip and pickling the arrays (well under a millisecond
for the suite's sizes), plus a fork (about 3 ms) after each death.
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import gc
import os
import pickle
import select
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO

Report = Callable[[str], None]
Handler = Callable[[Any, Report], Any]
OUTPUT_TAIL = 800  # characters of the child's last output quoted in a failure


class ChildFailure(Exception):
    """The child crashed, exited or timed out. ``phase`` is where it was."""

    def __init__(self, phase: str, message: str) -> None:
        super().__init__(message)
        self.phase = phase


@dataclass
class _Message:
    kind: str  # "phase", "result" or "error"
    value: Any


def available() -> bool:
    return hasattr(os, "fork")


class Worker:
    """A forked child running ``handler(request, report)`` for each request sent."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.pid = 0
        self.requests = self.replies = -1
        self.log: BinaryIO | None = None
        _workers.append(self)

    def call(self, request: Any, limits: Mapping[str, float], first_phase: str) -> Any:
        """``handler(request, report)`` in the child; its return value, or the exception it
        raised. ``report(phase)`` starts the clock of ``limits[phase]`` (seconds)."""
        if not self.pid:
            self._start()
        assert self.log is not None
        self.log.seek(0)
        self.log.truncate()
        try:
            _send(self.requests, pickle.dumps(request))
        except OSError:  # the child died between requests
            raise ChildFailure(first_phase, self._death(first_phase)) from None
        message = self._watch(limits, first_phase)
        if message.kind == "error":
            raise message.value
        return message.value

    def stop(self) -> None:
        if self.pid:
            with contextlib.suppress(OSError):
                os.close(self.requests)
                os.close(self.replies)
            _kill(self.pid)
            self.pid = 0

    def _start(self) -> None:
        requests_read, self.requests = os.pipe()
        self.replies, replies_write = os.pipe()
        if self.log is not None:
            self.log.close()
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (the worker's, for its life)
        gc.freeze()  # the child's collector then leaves the parent's objects (and pages) alone
        pid = os.fork()
        if pid == 0:  # the child: never returns
            _serve(self.handler, requests_read, replies_write, self.log.fileno())
        os.close(requests_read)
        os.close(replies_write)
        self.pid = pid

    def _watch(self, limits: Mapping[str, float], phase: str) -> _Message:
        buffer = b""
        deadline = time.monotonic() + limits[phase]
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.stop()
                limit = f"{limits[phase]:g} s limit"
                raise ChildFailure(phase, f"timed out: {phase} exceeded its {limit}{self._tail()}")
            ready, _, _ = select.select([self.replies], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(self.replies, 1 << 20)
            if not chunk:  # the child is gone without a result
                raise ChildFailure(phase, self._death(phase))
            buffer += chunk
            while len(buffer) >= 8 and len(buffer) >= 8 + int.from_bytes(buffer[:8], "little"):
                size = int.from_bytes(buffer[:8], "little")
                message: _Message = pickle.loads(buffer[8 : 8 + size])
                buffer = buffer[8 + size :]
                if message.kind != "phase":
                    return message
                phase = message.value
                deadline = time.monotonic() + limits[phase]

    def _death(self, phase: str) -> str:
        _, status = os.waitpid(self.pid, 0)
        self.pid = 0
        with contextlib.suppress(OSError):
            os.close(self.requests)
            os.close(self.replies)
        if os.WIFSIGNALED(status):
            number = os.WTERMSIG(status)
            name = signal.Signals(number).name
            cause = f"killed by signal {name} ({signal.strsignal(number)})"
        else:
            cause = f"exited with code {os.WEXITSTATUS(status)} and no result"
        return f"crashed during {phase}: {cause}{self._tail()}"

    def _tail(self) -> str:
        if self.log is None:
            return ""
        self.log.seek(0)
        text = self.log.read().decode(errors="replace").strip()
        return f"; last output: {text[-OUTPUT_TAIL:]}" if text else ""


def _serve(handler: Handler, requests: int, replies: int, log: int) -> None:
    code = 0
    try:
        os.dup2(log, 1)
        os.dup2(log, 2)
        faulthandler.enable(file=sys.stderr)  # a crash's Python stack goes to the log too
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        gc.disable()  # collecting would only copy the parent's pages into this child

        def report(phase: str) -> None:
            _send(replies, pickle.dumps(_Message("phase", phase)))

        while (data := _receive(requests)) is not None:
            try:
                reply = _Message("result", handler(pickle.loads(data), report))
            except BaseException as exc:  # the parent decides what it means
                reply = _Message("error", exc)
            try:
                payload = pickle.dumps(reply)
            except Exception:  # an exception that does not pickle
                error = RuntimeError(f"{type(reply.value).__name__}: {reply.value}")
                payload = pickle.dumps(_Message("error", error))
            _send(replies, payload)
    except BaseException:
        code = 70
    finally:
        os._exit(code)


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


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


_workers: list[Worker] = []


@atexit.register
def _stop_all() -> None:
    for worker in _workers:
        worker.stop()
