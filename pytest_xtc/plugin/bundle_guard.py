"""What keeps a bundle whole while it is written: one writer per directory (a lock on the
directory itself) and Ctrl-C held off while the last files are written."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest


class DirectoryLock:
    """A writer's hold on a bundle directory: an exclusive ``flock`` of the directory
    itself, released when its descriptor closes (at the end of the run, or by the system
    when the run is killed). No lock file: nothing is left beside the bundle, and there
    is no file a link could redirect."""

    def __init__(self, fd: int) -> None:
        self.fd: int | None = fd

    def release(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)


def writer_lock(path: Path) -> DirectoryLock:
    """The bundle directory's writer lock (made now if need be), taken now; a second
    writer, or a directory that is a link or cannot be made, is a usage error."""
    import fcntl

    try:  # what cannot be made is said as it is, not taken for another writer's lock
        path.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise pytest.UsageError(f"--xtc-report={path}: {_cause(exc)}; choose a directory "
                                "that can be written") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise pytest.UsageError(
            f"--xtc-report={path}: another run is writing this bundle now; wait for it to "
            "end or choose another directory"
        ) from None
    return DirectoryLock(fd)


def _cause(exc: OSError) -> str:
    where = exc.filename or "the report folder"
    if isinstance(exc, (FileExistsError, NotADirectoryError)) or exc.errno == errno.ELOOP:
        return f"{where} is a file or a link, not a directory"
    return f"cannot create {where}: {exc.strerror or exc}"


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[list[int]]:
    """Hold Ctrl-C (SIGINT) off while the bundle's last files are written, so that it is
    whole; the signals received are listed for the caller."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    previous = signal.signal(signal.SIGINT, lambda number, frame: received.append(number))
    try:
        yield received
    finally:
        signal.signal(signal.SIGINT, previous)
