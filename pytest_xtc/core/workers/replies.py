"""The parent's side of a call's child: its phase reports followed under their time limits
until its reply, and how a child that ended, timed out or wrote what no worker sends is
said (:class:`ChildFailure`). Every reply is read taking only a reply's kinds of value
(:mod:`unpickling`), from a bounded frame; a phase is timed from when the child sent its
report, however late it is read."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Mapping

from pytest_xtc.core.outcome import Failure, FailureKind
from pytest_xtc.core.workers import interrupts, template, transfer, unpickling
from pytest_xtc.core.workers.children import ChildFailure, how_it_ended
from pytest_xtc.core.workers.output import OutputTail
from pytest_xtc.core.workers.serving import TRANSFER, Message, Report

OUTPUT_TAIL = 800  # characters of the child's last output quoted in a failure
TRANSFER_S = 300.0  # its limit, a backstop: a GiB moves in about a second
INTERRUPT_S = 0.25  # how often a wait looks for a Ctrl-C swallowed elsewhere
MAX_FRAME = 256 << 20  # the largest reply frame taken (inline buffers are under 64 KiB)
REFUSED = "sent a reply that is not one"  # how a child that wrote anything else ended
#: Phase reports one call may make: each starts its phase's clock, so a child reporting
#: without end (a kernel writing reports) would never time out.
MAX_REPORTS = 256


class Following:
    """Following a call's child to its reply (a mixin of the worker)."""

    pid: int
    owner: int
    log: OutputTail | None
    moved_s: float
    _begun: bool
    _sent_at: float

    def stop(self) -> None:
        raise NotImplementedError

    def _forget(self) -> None:
        raise NotImplementedError

    def _fork_ahead(self, settled: template.Reachable) -> None:
        raise NotImplementedError

    def _watch(
        self,
        ident: int,
        limits: Mapping[str, float],
        on_phase: Report | None,
        packed: transfer.Packed,
        pid: int,
        replies: int,
        settled: template.Reachable | None = None,
    ) -> Message:
        """Follow the child ``pid``'s phase reports under their limits until its reply.
        Each phase is timed from when the child sent its report (``Message.at``, the
        machine's monotonic clock), however late this process reads it. Once the child
        reports its first phase (it runs: it holds a core), the next call's child is forked
        when ``settled`` is given (:meth:`_fork_ahead`)."""
        phase, buffer, reports = TRANSFER, bytearray(), 0
        since, arrived = self._sent_at, False  # when the last message left (or the request)
        if on_phase is not None:
            on_phase(phase)
        deadline = since + limits.get(phase, TRANSFER_S)
        while True:
            if self.pid != pid:  # stopped by another thread: its pipes are closed
                raise ChildFailure(phase, *self._death(phase, pid))
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise self._timeout(phase, limits.get(phase, TRANSFER_S))
            ready, _, _ = select.select([replies], [], [], min(remaining, INTERRUPT_S))
            interrupts.check()  # a Ctrl-C swallowed elsewhere still ends the wait
            if not ready:
                continue
            chunk = os.read(replies, 1 << 20)
            if not chunk:  # the child is gone without a result
                raise ChildFailure(phase, *self._death(phase, pid))
            buffer += chunk
            while len(buffer) >= 8:
                size = int.from_bytes(buffer[:8], "little")
                if size > MAX_FRAME:  # a reply is small: its arrays come by shared memory
                    raise self._refused(phase, f"a frame of {size} bytes announced (a reply "
                                               f"takes at most {MAX_FRAME >> 20} MiB)")
                if len(buffer) < 8 + size:
                    break
                try:
                    message = transfer.unpack(bytes(buffer[8 : 8 + size]), sender=pid)
                except unpickling.Unreadable as exc:
                    raise self._refused(phase, str(exc)) from None
                del buffer[: 8 + size]
                if not isinstance(message, Message):
                    raise self._refused(phase, f"a {type(message).__name__} sent as a message")
                if message.id != ident:  # a stale reply: never this call's
                    continue
                sent = message.at if isinstance(message.at, float) else since
                now = min(max(since, sent), time.perf_counter())  # a NaN: since
                if message.kind != "phase":
                    if phase == TRANSFER:  # reported as the handler returned: the reply's way
                        self.moved_s += now - since
                    return message
                if not arrived:  # the child's first report: its inputs are in place
                    self.moved_s, arrived = self.moved_s + now - since, True
                    self._begun = True
                packed.close()  # the child has its inputs
                reports += 1  # each report starts a new clock: a bounded number of them
                if reports > MAX_REPORTS:
                    raise self._refused(phase, f"more than {MAX_REPORTS} phase reports in "
                                               "one call (a worker makes a handful)")
                phase, since = str(message.value), now
                if phase not in limits and phase != TRANSFER:
                    raise ChildFailure(phase, f"the child reported an unknown phase {phase!r}")
                deadline = now + limits.get(phase, TRANSFER_S)
                if on_phase is not None:
                    on_phase(phase)
                if settled is not None:
                    self._fork_ahead(settled)
                    settled = None

    def _refused(self, phase: str, why: str) -> ChildFailure:
        """The child wrote into its reply pipe what no worker sends (a kernel may write
        anything there): it is ended, and nothing it sent is believed."""
        self.stop()
        cause = f"{REFUSED}: {why}"
        return ChildFailure(phase, f"{phase}: the worker {cause}{self._tail()}", cause,
                            FailureKind(Failure.EXCEPTION, "UnreadableReply"))

    def _timeout(self, phase: str, seconds: float) -> ChildFailure:
        self.stop()
        limit = f"{seconds:g} s"
        tail = self._tail()
        text = f"timed out: {phase} exceeded its {limit} limit{tail}"
        return ChildFailure(phase, text, f"timed out after {limit}{tail}",
                            FailureKind(Failure.TIMEOUT))

    def _death(self, phase: str, pid: int) -> tuple[str, str, FailureKind]:
        """The child ``pid`` died: kill what is left of its group, reap it, say how it
        died. When this process already stopped it (another thread), nothing is killed:
        ``killpg(0)`` would end this process's own group, pytest with it."""
        stopped = "stopped: this process ended the worker (the session is ending)"
        if pid <= 0 or pid != self.pid or self.owner != os.getpid():
            return f"{phase}: {stopped}", stopped, FailureKind(Failure.SIGNAL, "SIGKILL")
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:  # reaped by a stop() in another thread
            return f"{phase}: {stopped}", stopped, FailureKind(Failure.SIGNAL, "SIGKILL")
        self._forget()
        cause, kind = how_it_ended(status)
        tail = self._tail()
        return f"crashed during {phase}: {cause}{tail}", cause + tail, kind

    def _tail(self) -> str:
        """The child's last output (bounded: :mod:`output`), to quote after its end."""
        text = "" if self.log is None else self.log.tail(OUTPUT_TAIL)
        return f"; last output: {text}" if text else ""

