"""Installed versions of Python distributions: the one lookup every report uses; and
what the kernel cache's key reads of the toolchain (files, programs, environment, CPU)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import platform
import shutil
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any


def installed(*names: str) -> dict[str, str]:
    """Name -> version of each named distribution that is installed (others left out)."""
    return {name: version for name in names if (version := _version(name)) is not None}


@functools.cache
def _version(name: str) -> str | None:
    """Read once per process (a few ms: the metadata of every installed distribution is
    scanned; each case's expectations ask): what this process imported does not change
    with a later install."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


#: Files of a distribution hashed by content (sources); the others (libraries, programs of
#: a hundred megabytes) by size and modification time.
_HASHED = (".py", ".c", ".h", ".mlir", ".txt", ".json", ".yaml", ".toml", ".cfg")


@functools.cache
def distribution_files(name: str) -> str | None:
    """A digest of distribution ``name`` as installed: its version, its ``RECORD``, and
    every file it lists (sources by content, others by size and modification time), so
    that a file edited or replaced in place under an unchanged version (an editable
    install, a patched wheel) changes it; None when it is not installed. Computed once
    per process (about 10 ms for XTC's six distributions)."""
    try:
        found = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None
    digest = hashlib.sha256(f"{name}\0{found.version}\0".encode())
    digest.update((found.read_text("RECORD") or "").encode())
    digest.update((found.read_text("direct_url.json") or "").encode())
    for listed in sorted(found.files or [], key=str):
        path = Path(str(found.locate_file(listed)))
        digest.update(f"\0{listed}\0".encode())
        try:
            info = path.stat()
            if path.suffix in _HASHED:
                digest.update(path.read_bytes())
            else:
                digest.update(f"{info.st_size}:{info.st_mtime_ns}".encode())
        except OSError:
            digest.update(b"missing")
    return digest.hexdigest()


def program(name: str) -> list[Any]:
    """The program ``name`` found on ``PATH``: its resolved path, size and modification
    time ([name, None] when absent)."""
    found = shutil.which(name)
    if found is None:
        return [name, None]
    real = Path(found).resolve()
    try:
        info = real.stat()
    except OSError:
        return [name, str(real), None]
    return [name, str(real), info.st_size, info.st_mtime_ns]


def environment(names: Sequence[str]) -> dict[str, str]:
    """The environment variables named in ``names`` that are set (a name ending in ``*``
    stands for every variable that starts with the rest)."""
    prefixes = tuple(n[:-1] for n in names if n.endswith("*"))
    exact = {n for n in names if not n.endswith("*")}
    return {k: v for k, v in sorted(os.environ.items())
            if k in exact or (prefixes and k.startswith(prefixes))}


def cpu() -> list[str]:
    """The machine and its CPU's model and flags (what ``-march=native`` code depends on)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return [platform.machine(), platform.processor()]
    wanted = ("model name", "flags", "Features", "CPU implementer", "CPU part")
    seen: dict[str, str] = {}
    for line in lines:
        name, _, value = line.partition(":")
        if name.strip() in wanted:
            seen.setdefault(name.strip(), value.strip())
    return [platform.machine(), *(f"{k}={v}" for k, v in sorted(seen.items()))]


def source_digest(paths: Iterable[Path]) -> str:
    """A digest of the named source files' contents (a missing one counts as missing)."""
    digest = hashlib.sha256()
    for path in sorted(set(paths)):
        digest.update(f"\0{path.name}\0".encode())
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(b"missing")
    return digest.hexdigest()


def kernel_identity(classes: Sequence[type], options: Any, probed: Any, distributions:
                    Sequence[str], programs: Sequence[str], env: Sequence[str]) -> dict[str, Any]:
    """What besides the case can change an adapter's compiled code, as plain data (the
    kernel cache's key, ``TargetAdapter.kernel_identity``): the adapter's classes and the
    contents of their modules and of every module of this suite, the target's options, its
    probe's versions and device, the named distributions' files, programs and environment
    variables, and the CPU."""
    import inspect

    suite = Path(__file__).resolve().parents[1]
    modules: set[Path] = set(suite.rglob("*.py"))
    for cls in classes:
        with contextlib.suppress(TypeError, OSError):
            modules.add(Path(inspect.getfile(cls)).resolve())
    return {
        "classes": [f"{c.__module__}.{c.__qualname__}" for c in classes],
        "sources": source_digest(modules),
        "options": {str(k): None if v is None else str(v) for k, v in dict(options).items()},
        "probe": probed,
        "distributions": {n: distribution_files(n) for n in distributions},
        "programs": [program(n) for n in programs],
        "environment": environment(env),
        "cpu": cpu(),
    }
