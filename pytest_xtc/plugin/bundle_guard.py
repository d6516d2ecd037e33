"""What keeps a bundle whole while it is written: one writer per directory (a lock beside
it) and Ctrl-C held off while the last files are written."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def writer_lock(path: Path) -> Any:
    """The bundle directory's writer lock (``filelock``, beside the directory, so the
    bundle holds only its own files), taken now; a second writer is a usage error."""
    from filelock import FileLock, Timeout

    lock_file = path.with_name(f".{path.name}.xtc-lock")
    try:  # what cannot be made is said as it is, not taken for another writer's lock
        path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(lock_file, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK, 0o644))
    except OSError as exc:
        raise pytest.UsageError(f"--xtc-report={path}: {_cause(exc)}; choose a directory "
                                "that can be written") from None
    lock = FileLock(str(lock_file))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise pytest.UsageError(
            f"--xtc-report={path}: another run is writing this bundle now; wait for it to "
            "end or choose another directory"
        ) from None
    return lock


def _cause(exc: OSError) -> str:
    where = exc.filename or "the report folder"
    if isinstance(exc, (FileExistsError, NotADirectoryError)):
        return f"{where} is a file, not a directory"
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
