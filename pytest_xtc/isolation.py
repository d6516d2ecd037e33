"""Running a case's target work in a forked child, so a crash or a hang costs one case.

The child inherits everything the parent prepared (imports, XTC's runtime, inputs), does
the work, and sends back one picklable result. It reports each phase it enters, so the
parent applies that phase's time limit; a child past its limit is killed. A child that
dies says how (signal or exit code) and what it last printed.

Cost: one ``fork`` per case (about 2-3 ms here) and pickling the outputs back.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Report = Callable[[str], None]
OUTPUT_TAIL = 800  # characters of the child's last output quoted in a failure


class ChildFailure(Exception):
    """The child crashed, exited or timed out. ``phase`` is where it was."""

    def __init__(self, phase: str, message: str, infrastructure: bool = False) -> None:
        super().__init__(message)
        self.phase = phase
        self.infrastructure = infrastructure


@dataclass
class _Message:
    kind: str  # "phase", "result" or "error"
    value: Any


def available() -> bool:
    return hasattr(os, "fork")


def run_in_child(
    work: Callable[[Report], Any], limits: Mapping[str, float], first_phase: str
) -> Any:
    """``work(report)`` in a forked child; its return value, or the exception it raised
    (re-raised here as it was, when it pickles). ``report(phase)`` starts the clock of
    ``limits[phase]`` (seconds)."""
    reader, writer = os.pipe()
    with tempfile.TemporaryFile() as log:
        pid = os.fork()
        if pid == 0:  # the child: never returns
            _child(work, writer, reader, log.fileno())
        os.close(writer)
        try:
            message = _watch(pid, reader, limits, first_phase, log)
        finally:
            os.close(reader)
    if message.kind == "error":
        raise message.value
    return message.value


def _child(work: Callable[[Report], Any], writer: int, reader: int, log: int) -> None:
    code = 0
    try:
        os.close(reader)
        os.dup2(log, 1)
        os.dup2(log, 2)
        signal.signal(signal.SIGINT, signal.SIG_DFL)

        def report(phase: str) -> None:
            _send(writer, _Message("phase", phase))

        try:
            _send(writer, _Message("result", work(report)))
        except BaseException as exc:  # the parent decides what it means
            try:
                _send(writer, _Message("error", exc))
            except Exception:  # an exception that does not pickle
                _send(writer, _Message("error", RuntimeError(f"{type(exc).__name__}: {exc}")))
    except BaseException:
        code = 70
    finally:
        os._exit(code)


def _send(fd: int, message: _Message) -> None:
    data = pickle.dumps(message)
    payload = len(data).to_bytes(8, "little") + data
    while payload:
        payload = payload[os.write(fd, payload) :]


def _watch(pid: int, fd: int, limits: Mapping[str, float], phase: str, log: Any) -> _Message:
    buffer = b""
    deadline = time.monotonic() + limits[phase]
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            _kill(pid)
            raise ChildFailure(
                phase, f"timed out: {phase} exceeded its {limits[phase]:g} s limit{_tail(log)}"
            )
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            continue
        chunk = os.read(fd, 1 << 20)
        if not chunk:  # the child is gone without a result
            raise ChildFailure(phase, _death(pid, phase) + _tail(log))
        buffer += chunk
        while len(buffer) >= 8 and len(buffer) >= 8 + int.from_bytes(buffer[:8], "little"):
            size = int.from_bytes(buffer[:8], "little")
            message: _Message = pickle.loads(buffer[8 : 8 + size])
            buffer = buffer[8 + size :]
            if message.kind == "phase":
                phase = message.value
                deadline = time.monotonic() + limits[phase]
                continue
            os.waitpid(pid, 0)
            return message


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def _death(pid: int, phase: str) -> str:
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        name = signal.Signals(number).name
        return f"crashed during {phase}: killed by signal {name} ({signal.strsignal(number)})"
    return f"exited during {phase} with code {os.WEXITSTATUS(status)} and no result"


def _tail(log: Any) -> str:
    log.seek(0)
    text = log.read().decode(errors="replace").strip()
    if not text:
        return ""
    return f"; last output: {text[-OUTPUT_TAIL:]}"
