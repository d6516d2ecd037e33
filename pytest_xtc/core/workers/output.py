"""A worker's standard output and error, kept as a bounded tail.

The child's fds 1 and 2 are the write end of a pipe; a thread of the parent drains the
read end as the bytes come and keeps only the last :data:`TAIL_BYTES` of them. A kernel
that writes gigabytes then crashes costs neither memory nor disk here: the log is never a
file, and what is quoted of it (the last words of a dead or late worker) is a bounded
tail. The pipe is enlarged so that a burst of output does not wait for the drain.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading

from pytest_xtc.core.workers import transfer

TAIL_BYTES = 64 << 10  # the last bytes kept of a worker's output
_POLL_S = 0.2  # how often the drain looks whether it was told to end


class OutputTail:
    """The last :data:`TAIL_BYTES` a child wrote to fds 1 and 2, read through a pipe."""

    def __init__(self, cap: int = TAIL_BYTES) -> None:
        self.cap = cap
        self.read_fd, self.write_fd = transfer.pipe()
        self.total = 0  # bytes written by the child in all, kept or not
        self._kept = bytearray()
        self._lock = threading.Lock()
        self._ending = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """In the parent, once the child holds the write end: close it here, drain."""
        with contextlib.suppress(OSError):
            os.close(self.write_fd)
        self.write_fd = -1
        self._thread = threading.Thread(target=self._drain, name="xtc-worker-output",
                                        daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        try:
            while not self._ending:
                ready, _, _ = select.select([self.read_fd], [], [], _POLL_S)
                if not ready:
                    continue
                chunk = os.read(self.read_fd, 1 << 16)
                if not chunk:  # every writer is gone
                    return
                with self._lock:
                    self.total += len(chunk)
                    self._kept += chunk
                    if len(self._kept) > self.cap:
                        del self._kept[: len(self._kept) - self.cap]
        except (OSError, ValueError):  # closed under it: the worker is being forgotten
            return
        finally:
            with contextlib.suppress(OSError):
                os.close(self.read_fd)

    def clear(self) -> None:
        """Forget what was kept (a new call begins)."""
        with self._lock:
            self._kept.clear()

    def drained(self, wait_s: float) -> None:
        """Once every writer is dead: wait (at most ``wait_s``) for the drain to read what
        is left in the pipe and end."""
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(wait_s)

    def tail(self, chars: int, wait_s: float = 1.0) -> str:
        """The last ``chars`` characters written, stripped; once the child is dead, after
        waiting (at most ``wait_s``) for the drain to read what is left in the pipe."""
        self.drained(wait_s)
        with self._lock:
            text = bytes(self._kept).decode(errors="replace").strip()
        return text[-chars:]

    def close(self) -> None:
        """End the drain (it closes the read end); the write end too if still held."""
        self._ending = True
        if self.write_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.write_fd)
            self.write_fd = -1
        if self._thread is None:
            with contextlib.suppress(OSError):
                os.close(self.read_fd)
