"""Kept kernels: each case's compiled artifact directory, kept under its key and sealed
(docs/caches.md, "Kernels"). No pytest.

An entry is a folder ``kernels-v1/<key[:2]>/<key>/`` in the suite's cache directory: the
artifact's files under ``files/`` and a ``seal`` (``cache_seal``: an HMAC under this
user's key) over the key and each file's path, size and SHA-256. An entry is placed in a
case's work folder only when its seal holds and every file copied matches its digest as it
is copied: one changed, cut short, planted by another user or copied from another machine
is never loaded: it is removed, the case compiles afresh, its notes say so. Entries are
written whole in a temporary folder then renamed into place (xdist workers and concurrent
sessions share the folder; the first to store a key keeps it); the least recently used
(a hit touches its seal) go once the folder holds more than its size bound. The runner
calls it from the session's side only (``core/execution/kernels.py``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pytest_xtc.core.adapters import cache_seal, declcache

FOLDER = "kernels-v1"
#: Another folder for the kept kernels (tests and CI use a fresh one: no run relies on
#: another's); the sealing key and ``PYTEST_XTC_CACHE=off`` still apply.
ENV_FOLDER = "XTC_KERNEL_CACHE"
SEAL = "seal"
FILES = "files"
#: The size bound by default: a laptop's share (the host catalog keeps about 15 MB).
DEFAULT_BYTES = 1 << 30
MODES = ("on", "off", "refresh")
_SEAL_BYTES = 1 << 20
_EVICT_EVERY = 32  # stores between two walks of the folder for its size


def opened(mode: str, size: int = DEFAULT_BYTES, folder: Path | None = None) -> KernelCache | None:
    """The cache for ``--xtc-compile-cache=mode`` (``on``, ``off``, ``refresh``); None when
    off, when ``PYTEST_XTC_CACHE=off`` switches every cache off, or when no sealing key
    can be kept. ``folder``: another place than the suite's cache directory."""
    if mode not in MODES:
        raise ValueError(f"--xtc-compile-cache={mode}: expected one of {', '.join(MODES)}")
    if mode == "off":
        return None
    kept = declcache.cache_file(FOLDER)
    if kept is None:
        return None
    return KernelCache(Path(folder) / FOLDER if folder else kept, size, mode == "refresh")


@dataclass
class KernelCache:
    folder: Path
    max_bytes: int = DEFAULT_BYTES
    refresh: bool = False
    stored: int = field(default=0, compare=False)

    def entry(self, key: str) -> Path:
        if len(key) != 64 or not all(c in "0123456789abcdef" for c in key):
            raise ValueError(f"not a kernel key: {key!r}")
        return self.folder / key[:2] / key

    def place(self, key: str, workdir: Path) -> tuple[bool, str]:
        entry = self.entry(key)
        try:
            sealed = _read(entry / SEAL, _SEAL_BYTES)
        except FileNotFoundError:
            return False, ""
        except OSError as exc:
            return False, self._spoiled(entry, f"unreadable ({exc.strerror})")
        data = cache_seal.unseal(sealed)
        if data is None:
            return False, self._spoiled(entry, "its seal is not this user's (changed, or "
                                        "written elsewhere)")
        try:
            record = json.loads(data)
            listed = {str(k): (int(v[0]), str(v[1])) for k, v in record["files"].items()}
            same = record["key"] == key
        except (ValueError, KeyError, TypeError, IndexError):
            return False, self._spoiled(entry, "its record is malformed")
        if not same:
            return False, self._spoiled(entry, "it holds another key's kernel")
        placed: list[Path] = []
        for name, (size, digest) in sorted(listed.items()):
            target = _inside(workdir, name)
            problem = "a file outside the work folder" if target is None else ""
            if target is not None:
                problem = _copy(entry / FILES / name, target, size, digest)
                placed.append(target)
            if problem:
                for path in placed:
                    path.unlink(missing_ok=True)
                return False, self._spoiled(entry, f"{name}: {problem}")
        with contextlib.suppress(OSError):
            os.utime(entry / SEAL)  # most recently used
        return True, ""

    def store(self, key: str, workdir: Path, files: Mapping[str, str]) -> str:
        entry = self.entry(key)
        if entry.exists() and not self.refresh:
            return ""  # another worker or session kept it meanwhile
        entry.parent.mkdir(parents=True, exist_ok=True)
        temporary = Path(tempfile.mkdtemp(dir=entry.parent, prefix=".new-"))
        try:
            listed: dict[str, list[object]] = {}
            for name, digest in sorted(files.items()):
                source = _inside(workdir, name)
                data = source.read_bytes() if source is not None else b""
                if source is None or hashlib.sha256(data).hexdigest() != digest:
                    return f"kernel cache: not kept ({name} changed after the compile)"
                target = temporary / FILES / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
                listed[name] = [len(data), digest]
            sealed = cache_seal.seal(json.dumps({"key": key, "files": listed}).encode())
            if sealed is None:
                return "kernel cache: not kept (no sealing key)"
            (temporary / SEAL).write_bytes(sealed)
            if self.refresh:
                _remove(entry)
            with contextlib.suppress(OSError):  # one already there: the first one stays
                temporary.rename(entry)
        except OSError as exc:
            return f"kernel cache: not kept ({exc.strerror or exc})"
        finally:
            shutil.rmtree(temporary, ignore_errors=True)
        self.stored += 1
        if self.stored % _EVICT_EVERY == 1:
            self.evict()
        return ""

    def evict(self) -> None:
        """Remove the least recently used entries while the folder holds more than
        ``max_bytes`` (down to nine tenths of it)."""
        from filelock import FileLock

        self.folder.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.folder / ".evict.lock")):
            entries = []
            for entry in self.folder.glob("??/" + "?" * 64):
                with contextlib.suppress(OSError):
                    size = sum(p.stat().st_size for p in entry.rglob("*") if p.is_file())
                    entries.append(((entry / SEAL).stat().st_mtime_ns, size, entry))
            total = sum(size for _, size, _ in entries)
            if total <= self.max_bytes:
                return
            for _, size, entry in sorted(entries):
                if total <= self.max_bytes * 9 // 10:
                    break
                _remove(entry)
                total -= size

    def _spoiled(self, entry: Path, why: str) -> str:
        _remove(entry)
        return f"kernel cache: entry {entry.name[:12]} rebuilt, never loaded: {why}"


def _read(path: Path, limit: int) -> bytes:
    with path.open("rb") as stream:
        return stream.read(limit)


def _inside(folder: Path, name: str) -> Path | None:
    """``folder/name`` when ``name`` is a relative path that stays inside ``folder``."""
    parts = Path(name).parts
    if not parts or Path(name).is_absolute() or any(p in ("..", "") for p in parts):
        return None
    return folder.joinpath(*parts)


def _copy(source: Path, target: Path, size: int, digest: str) -> str:
    """Copy one file, checking its size and digest on the bytes copied; why not, or ""."""
    try:
        if source.is_symlink() or not source.is_file():
            return "missing"
        data = _read(source, size + 1)
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    if len(data) != size:
        return f"{len(data)} bytes where {size} were kept (cut short or changed)"
    if hashlib.sha256(data).hexdigest() != digest:
        return "its contents changed since it was kept"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return ""


def _remove(entry: Path) -> None:
    """Take ``entry`` out of use at once (a rename), then delete it."""
    aside = entry.with_name(f".old-{entry.name}-{os.getpid()}-{os.urandom(4).hex()}")
    with contextlib.suppress(OSError):
        entry.rename(aside)
        shutil.rmtree(aside, ignore_errors=True)
