"""Only what this machine's suite wrote is believed from its cache: every cache file and
every kept library is sealed with an HMAC-SHA256 under a secret key that lives outside the
cache directory, in the user's state directory (``platformdirs.user_state_dir``: on Linux
``$XDG_STATE_HOME/pytest-xtc`` or ``~/.local/state/pytest-xtc``), readable by its owner
alone. A cache restored from elsewhere (a CI cache of another branch, a shared folder) or
edited by hand carries no valid seal and is ignored: the facts are computed again, the
library built again. Where no such key can be kept (an unwritable home, a key file that
others can read or write, a state directory inside the cache), nothing is cached.

Who can still change what the suite believes: whoever can read or replace the key, that
is the same user account (docs/caches.md). A certification run uses no cache at all.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import secrets
import stat
import tempfile
from pathlib import Path

import platformdirs

APP = "pytest-xtc"
KEY_FILE = "cache-seal.key"
KEY_BYTES = 32
MAGIC = b"pytest-xtc-sealed-v1 "


def cache_dir() -> Path:
    """The suite's cache directory, as the platform has it (``~/.cache/pytest-xtc`` or
    ``$XDG_CACHE_HOME/pytest-xtc`` on Linux, ``~/Library/Caches/pytest-xtc`` on macOS)."""
    return Path(platformdirs.user_cache_dir(APP, appauthor=False))


def key_file() -> Path:
    return Path(platformdirs.user_state_dir(APP, appauthor=False)) / KEY_FILE


def key() -> bytes | None:
    """This user's sealing key, made on first use; None when none can be trusted."""
    return _key(str(key_file()), str(cache_dir()))


@functools.lru_cache(maxsize=8)
def _key(path_text: str, cache_text: str) -> bytes | None:
    path, cache = Path(path_text), Path(cache_text)
    if path.resolve().is_relative_to(cache.resolve()):
        return None  # a key restored with the cache would seal nothing
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    except OSError:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".key-")  # mode 0600
        try:
            with os.fdopen(fd, "wb") as stream:
                stream.write(secrets.token_bytes(KEY_BYTES))
            os.link(temporary, path)  # never replaces a key another process just made
        except FileExistsError:
            pass
        finally:
            os.unlink(temporary)
        return _read(path)
    except OSError:
        return None


def unavailable() -> str | None:
    """Why no sealing key can be kept here (so every cache is off), in one line; None when
    one can."""
    if key() is not None:
        return None
    path, cache = key_file(), cache_dir()
    if path.resolve().is_relative_to(cache.resolve()):
        return f"the key file {path} lies inside the cache folder {cache}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.stat(path)
    except OSError as exc:
        return f"no key file can be kept at {path} ({exc.strerror or exc})"
    return f"the key file {path} is not a private {KEY_BYTES}-byte file of this user"


def _read(path: Path) -> bytes | None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as stream:
        info = os.fstat(fd)
        owner = os.getuid() if hasattr(os, "getuid") else info.st_uid
        private = info.st_mode & 0o077 == 0 and info.st_uid == owner
        if not stat.S_ISREG(info.st_mode) or not private or info.st_size != KEY_BYTES:
            return None
        return stream.read(KEY_BYTES + 1)


def seal(data: bytes) -> bytes | None:
    """``data`` sealed (a first line holding its HMAC, then ``data``); None without a key."""
    secret = key()
    if secret is None:
        return None
    return MAGIC + hmac.new(secret, data, hashlib.sha256).hexdigest().encode() + b"\n" + data


def unseal(sealed: bytes) -> bytes | None:
    """The data of a sealed blob when its seal is this user's; else None."""
    secret = key()
    head, newline, data = sealed.partition(b"\n")
    if secret is None or not newline or not head.startswith(MAGIC):
        return None
    expected = hmac.new(secret, data, hashlib.sha256).hexdigest().encode()
    return data if hmac.compare_digest(head[len(MAGIC):], expected) else None


def tag(data: bytes) -> str | None:
    """The HMAC of ``data`` alone (a kept library's record); None without a key."""
    secret = key()
    return None if secret is None else hmac.new(secret, data, hashlib.sha256).hexdigest()


def tag_matches(data: bytes, recorded: str) -> bool:
    expected = tag(data)
    return expected is not None and hmac.compare_digest(expected, recorded)
