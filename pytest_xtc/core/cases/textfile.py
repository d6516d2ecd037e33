"""Reading the suite's small input files safely: regular files only (a FIFO, a device or a
folder is refused before it is read: opening a FIFO would wait forever), a size cap, UTF-8
or a clear refusal, and one-line YAML errors. No pytest."""

from __future__ import annotations

import os
import stat
from pathlib import Path


class UnreadableFile(ValueError):
    """A file that cannot be read as text; the message says why and what to do."""


class FileTooLarge(UnreadableFile):
    """A file over its cap; ``size`` its bytes (at least those read)."""

    def __init__(self, limit: int, size: int) -> None:
        super().__init__(f"larger than {limit >> 20} MiB")
        self.size = size


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def read_bytes(path: Path, limit: int) -> bytes:
    """``path``'s bytes when it is a regular file (links followed) of at most ``limit``
    bytes. Opened without blocking and checked with fstat before anything is read."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise UnreadableFile(f"cannot read: {exc.strerror or exc}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise UnreadableFile(f"{_kind(info.st_mode)}, not a regular file; give a regular file")
    if info.st_size > limit:  # refused before a byte of it is read
        os.close(fd)
        raise FileTooLarge(limit, info.st_size)
    os.set_blocking(fd, True)
    with os.fdopen(fd, "rb") as file:
        try:
            raw = file.read(limit + 1)
        except OSError as exc:
            raise UnreadableFile(f"cannot read: {exc.strerror or exc}") from None
    if len(raw) > limit:  # it grew since it was opened
        raise FileTooLarge(limit, len(raw))
    return raw


def read_text(path: Path, limit: int) -> str:
    """``path``'s text, refused when not a regular file, larger than ``limit`` bytes or not
    UTF-8."""
    raw = read_bytes(path, limit)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableFile(
            f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
            "save the file as UTF-8"
        ) from None


def one_line(exc: BaseException) -> str:
    """An exception's message on one line (YAML errors span several)."""
    return " ".join(str(exc).split())
