"""Reading an untrusted bundle safely: names confined to the bundle, sizes capped, JSON
nesting bounded. No pytest.

A bundle comes from someone else's machine. Every file it names is opened only when the
name is a plain file name inside the bundle directory (no absolute path, no ``..``, no
sub-directory), the file itself is a regular file and not a symbolic link (checked with
``lstat``, never followed), and it is at most :data:`MAX_FILE_BYTES` long. JSON is parsed
only after its nesting depth was counted without recursion (at most
:data:`MAX_JSON_DEPTH`), an object naming a key twice is refused, and
``results.jsonl`` lines are read one at a time, each at most :data:`MAX_LINE_BYTES`.
Each breach raises :class:`LimitError`, whose message is one line.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from pytest_xtc.core.cases.unique_keys import MAX_DEPTH, DuplicateKey, TooDeep, loads_json

#: The largest file a bundle may hold (results.jsonl of a few thousand cases is a few MB).
MAX_FILE_BYTES = 256 << 20
#: The longest line of results.jsonl (a case result is about a kilobyte).
MAX_LINE_BYTES = 1 << 20
#: The deepest JSON nesting accepted (bundles nest about six levels).
MAX_JSON_DEPTH = MAX_DEPTH


class LimitError(ValueError):
    """A bundle breaks one of the reading limits; the message is one line."""


def check_name(name: str) -> None:
    """Refuse a name that is not a plain file name inside the bundle directory."""
    if not name or name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        raise LimitError(f"{name!r}: absolute path; a bundle names only its own files")
    parts = re.split(r"[/\\]", name)
    if ".." in parts:
        raise LimitError(f"{name!r}: '..' leaves the bundle; a bundle names only its own files")
    if len(parts) > 1 or name in (".", ""):
        raise LimitError(f"{name!r}: not a file name of the bundle directory")


def open_file(root: Path, name: str) -> BinaryIO:
    """``root / name`` opened for reading when ``name`` is a plain file name of the bundle
    and the file a regular file (not a link: checked with lstat and opened with
    O_NOFOLLOW) within the size cap; raises LimitError otherwise, FileNotFoundError when
    it is absent."""
    check_name(name)
    path = root / name
    if stat.S_ISLNK(os.lstat(path).st_mode):
        raise LimitError(f"{name}: a symbolic link; a bundle holds regular files only")
    try:
        fd = os.open(
            path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        )
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LimitError(
                f"{name}: a symbolic link; a bundle holds regular files only"
            ) from None
        raise
    file = os.fdopen(fd, "rb")
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        file.close()
        raise LimitError(f"{name}: not a regular file")
    if info.st_size > MAX_FILE_BYTES:
        file.close()
        raise LimitError(
            f"{name}: {info.st_size} bytes, over the {MAX_FILE_BYTES >> 20} MiB limit per file"
        )
    return file


def exists(root: Path, name: str) -> bool:
    """True when ``name`` is there at all (a link included: open_file() then refuses it)."""
    try:
        os.lstat(root / name)
    except OSError:
        return False
    return True


def sha256(root: Path, name: str) -> str:
    """The SHA-256 of a bundle file, streamed in chunks, within the limits."""
    digest = hashlib.sha256()
    with open_file(root, name) as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def read_text(root: Path, name: str) -> str:
    with open_file(root, name) as file:
        data = file.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:  # it grew since it was opened
        raise LimitError(f"{name}: over the {MAX_FILE_BYTES >> 20} MiB limit per file")
    return data.decode("utf-8")


def loads(text: str, where: str, line: int | None = None) -> Any:
    """``json.loads`` after refusing nesting deeper than MAX_JSON_DEPTH; an object that
    names a key twice is refused (readers differ on which value counts), naming its line
    (``text``: line ``line`` of the file ``where``, or the whole file)."""
    try:
        return loads_json(text, where, line or 1)
    except TooDeep:
        at = where if line is None else f"{where}: line {line}"
        raise LimitError(f"{at}: JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    except DuplicateKey as exc:
        raise LimitError(
            f"{where}:{exc.line}: duplicate JSON key {exc.key!r} (first at line {exc.first}; "
            "readers disagree on which value counts); the file was altered, rewrite it"
        ) from None


def lines(root: Path, name: str) -> Iterator[tuple[int, str]]:
    """Numbered lines of a bundle file, each at most MAX_LINE_BYTES (streamed)."""
    with open_file(root, name) as file:
        for number in range(1, 1 << 62):
            line = file.readline(MAX_LINE_BYTES + 1)
            if not line:
                return
            if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                raise LimitError(f"{name}: line {number} is longer than {MAX_LINE_BYTES >> 10} KiB")
            text = line.decode("utf-8").rstrip("\n")
            if text:
                yield number, text
