"""What an adapter declares (options, flags, its expectations file), kept across sessions.

Reading a declaration imports the adapter module in a one-shot child (a broken adapter
must never take pytest with it), which costs a fork and an import per installed adapter
on every start. A declaration read successfully is kept in a cache file and reused while
nothing it came from has changed: the key holds the entry point, and the size and
modification time of the adapter module and of the other modules of its package (found on
the path without importing anything), of the distribution's ``METADATA`` or ``PKG-INFO``
(standing for its name and version; without such a file, those themselves) and
``entry_points.txt``, and of ``core/adapter.py``. Failures are never kept
(a library installed since then is seen at the next start).

The cache lives in ``$XDG_CACHE_HOME/pytest-xtc`` (else ``~/.cache/pytest-xtc``); set
``PYTEST_XTC_CACHE=off`` to read every declaration afresh. It is written whole to a
temporary file then renamed, so concurrent sessions (xdist workers) never see half a file;
a cache that cannot be read or written is ignored. Other facts computed from the
installed files (the catalog's all-pairs rows) are kept the same way, in files of their
own (``load``/``store``'s ``name``).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Mapping
from importlib.machinery import PathFinder
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

ENV_SWITCH = "PYTEST_XTC_CACHE"
FILE_NAME = "declarations-v1.json"
MAX_ENTRIES = 512  # the oldest are dropped past this (many temporary vendor dirs in tests)
_ADAPTER_API = Path(__file__).resolve().parents[1] / "adapter.py"


def cache_file(name: str = FILE_NAME) -> Path | None:
    """Where the cache file ``name`` lives, or None when the cache is switched off."""
    if os.environ.get(ENV_SWITCH, "").lower() in ("off", "0", "no"):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pytest-xtc" / name


def module_file(name: str) -> Path | None:
    """The source file of module ``name``, found on the path without importing it (its
    parent packages are used when already imported); None when it cannot be found so."""
    search: list[str] | None = None
    spec = None
    parts = name.split(".")
    for i in range(len(parts)):
        prefix = ".".join(parts[: i + 1])
        loaded = sys.modules.get(prefix)
        if loaded is not None and i < len(parts) - 1 and hasattr(loaded, "__path__"):
            search = list(loaded.__path__)
            continue
        try:
            spec = PathFinder.find_spec(prefix, search)
        except (ImportError, ValueError):
            return None
        if spec is None:
            return None
        search = list(spec.submodule_search_locations or [])
    if spec is None or not spec.origin or not spec.has_location:
        return None
    return Path(spec.origin)


_METADATA = ("METADATA", "PKG-INFO")  # a .dist-info's, an .egg-info's
_DIST_FILES = (*_METADATA, "entry_points.txt")


def _stamp(path: Path) -> list[Any]:
    info = path.stat()
    return [str(path), info.st_mtime_ns, info.st_size]


def key(entry: EntryPoint) -> str | None:
    """The cache key of ``entry``'s declaration, or None when its sources cannot be found
    without importing them (it is then read every time)."""
    source = module_file(entry.module)
    dist = entry.dist
    if source is None or dist is None:
        return None
    files = [source, _ADAPTER_API]
    if source.name == "__init__.py" or (source.parent / "__init__.py").is_file():
        files += sorted(p for p in source.parent.glob("*.py") if p != source)
    info = getattr(dist, "_path", None)  # the .dist-info folder (PathDistribution)
    held = [info / n for n in _DIST_FILES] if isinstance(info, Path) else []
    held = [p for p in held if p.is_file()]
    files += held
    # A metadata file's stamp stands for the name and version: reading them parses the
    # whole file (a long description included), about 1 ms for each of them.
    named = [] if any(p.name in _METADATA for p in held) else [dist.name, dist.version]
    try:
        stamps = [_stamp(p) for p in files]
    except OSError:
        return None
    return _digest([*named, entry.name, entry.value, stamps])


def module_key(name: str, *fields: Any) -> str | None:
    """The cache key of a fact read from module ``name``: ``fields`` and the module's
    path, time stamp and size (found without importing it); None when it is not found."""
    source = module_file(name)
    if source is None:
        return None
    try:
        return _digest([*fields, _stamp(source)])
    except OSError:
        return None


def _digest(fields: list[Any]) -> str:
    return hashlib.sha256(json.dumps(fields).encode()).hexdigest()


def load(name: str = FILE_NAME) -> dict[str, Any]:
    """The cached entries by key; empty when there is no usable cache."""
    path = cache_file(name)
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def store(found: Mapping[str, Any], name: str = FILE_NAME) -> None:
    """Add ``found`` (key -> entry) to the cache, atomically; errors ignored."""
    path = cache_file(name)
    if path is None or not found:
        return
    entries = {k: v for k, v in load(name).items() if k not in found}
    entries.update(found)
    kept = dict(list(entries.items())[-MAX_ENTRIES:])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_whole(path, json.dumps(kept).encode())
    except OSError:
        pass


def replace_whole(path: Path, data: bytes) -> None:
    """Replace ``path`` by ``data`` through a temporary file renamed over it, so that a
    concurrent reader sees the old file or the new one, never half of one."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
