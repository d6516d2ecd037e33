"""Files written whole or not at all, and an append-only stream that keeps whole lines.
No pytest.

:func:`write_text` writes to a temporary name in the same directory, syncs it, then
renames it over the target: a reader sees the old file or the new one, never half of one.
:class:`LineAppender` appends lines (``results.jsonl`` during a run), each written whole
at once (a killed run keeps every line written) and synced at most once a second and at
the end (a machine that loses power keeps all but the last second's lines: a sync per
line was 2.5 ms of the session's process per case); a line that cannot be written whole
(a full disk) is cut off again, so the file keeps only whole lines. Every failure is an
:class:`OSError` for the caller, who says what was kept.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from pathlib import Path

#: Temporary files are ``.<name>.<random>.tmp`` beside the file they become.
TEMP_SUFFIX = ".tmp"
SYNC_EVERY_S = 1.0  # LineAppender: the longest a written line waits for its sync


def is_temp(name: str, final: str) -> bool:
    """True when ``name`` is a temporary file of :func:`write_text` for ``final``."""
    return name.startswith(f".{final}.") and name.endswith(TEMP_SUFFIX)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd`` (``os.write`` may write fewer)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _sync_directory(path: Path) -> None:
    """Make a rename in ``path`` durable where the system allows it (cheap, best effort)."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_text(path: Path, text: str, mode: int = 0o644) -> None:
    """Replace ``path`` by ``text`` (UTF-8) whole, or leave it as it was and raise."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    try:
        try:
            write_all(fd, text.encode("utf-8"))
            os.fsync(fd)
            os.fchmod(fd, mode)  # mkstemp's 0600 is for secrets; a bundle is for sharing
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _sync_directory(path.parent)


class LineAppender:
    """A file of whole lines, each appended as it comes, synced within a second."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines = 0  # lines written whole
        self._fd: int | None = os.open(
            path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o644
        )
        self._size = 0
        self._synced = time.monotonic()

    def append(self, line: str) -> None:
        """Write ``line`` (ending in a newline) whole, and sync the file when its last
        sync is :data:`SYNC_EVERY_S` old; on failure the file is cut back to its previous
        whole lines, closed, and the error raised."""
        if self._fd is None:
            raise ValueError(f"{self.path} is closed")
        data = line.encode("utf-8")
        try:
            write_all(self._fd, data)
            if time.monotonic() - self._synced >= SYNC_EVERY_S:
                os.fsync(self._fd)
                self._synced = time.monotonic()
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)  # a half line would read as damage
            self.close()
            raise
        self._size += len(data)
        self.lines += 1

    @property
    def closed(self) -> bool:
        return self._fd is None

    def close(self) -> None:
        """Sync what was written (best effort), then close."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                with contextlib.suppress(OSError):
                    os.fsync(fd)
            finally:
                os.close(fd)
