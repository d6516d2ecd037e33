"""XTC's host runtime, built once per machine instead of once per process. No pytest.

XTC compiles its host runtime (a few C files and a link, ``-march=native``) with ``cc`` the
first time a process runs a kernel: about 1.4 s on a 2-core machine, paid by the adapter
host of every session and of every xdist worker, before the first case can run.
:func:`install` wraps XTC's build so that a library built once is kept in the suite's cache
directory (``declcache.cache_file``) and copied into place afterwards. The key holds
everything the build reads: XTC's version, the contents of the module that builds it and of
the runtime's C sources, the compilers found on ``PATH`` (resolved path, size and
modification time), the environment variables that steer them, whether XTC finds libpfm
(XTC's own test, 40 ms), the platform and the CPU (model and flags, as ``-march=native``
reads them). Each entry records the library's HMAC under this user's sealing key
(:mod:`cache_seal`), a key kept outside the cache directory: a library that does not match
(cut short, or replaced together with its record by anyone without the key) is never
loaded: it is built again and replaced. Only the host runtime is kept: XTC's GPU runtime
links MLIR and CUDA libraries whose identity this key does not hold, so it is built as XTC
builds it.
``PYTEST_XTC_CACHE=off`` switches this off with the suite's other caches; an XTC whose
build function is not the one this was written for is left as it is.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from pytest_xtc.core.adapters import cache_seal, declcache
from pytest_xtc.core.cases.textfile import UnreadableFile, read_bytes
from pytest_xtc.core.cases.unique_keys import loads_json
from pytest_xtc.core.versions import cpu, installed

DIRECTORY = "xtc-runtime"
_BUILD_PARAMETERS = ["out_dll", "tdir", "runtime_type"]
_COMPILERS = ("cc", "c++")
_COMPILER_ENVIRONMENT = ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "LIBRARY_PATH",
                         "COMPILER_PATH", "GCC_EXEC_PREFIX")
_PFM_PROBE = "#include <perfmon/pfmlib.h>\nint main() { return 0; }\n"
_MARK = "_pytest_xtc_cached"


def _digest(*paths: Path) -> str:
    sha = hashlib.sha256()
    for path in paths:
        sha.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return sha.hexdigest()


def _compiler(name: str) -> list[Any]:
    found = shutil.which(name)
    if found is None:
        return [name, None]
    real = Path(found).resolve()
    info = real.stat()
    return [name, str(real), info.st_size, info.st_mtime_ns]


def key(runtime: ModuleType) -> str:
    """The cache key of XTC's host runtime as ``runtime`` (``xtc.runtimes.host.runtime``)
    would build it on this machine now."""
    from xtc.utils.tools import check_compile

    module = Path(inspect.getfile(runtime))
    sources = module.parents[2] / "csrcs" / "runtimes" / "host"
    fields = [
        installed("xtc-tools"), sys.platform, bool(getattr(runtime, "RUNTIME_DEBUG", False)),
        _digest(module, *sorted(p for p in sources.iterdir() if p.is_file())),
        [_compiler(name) for name in _COMPILERS],
        {name: os.environ.get(name) for name in _COMPILER_ENVIRONMENT},
        bool(check_compile(_PFM_PROBE, libs="pfm")), cpu(),
    ]
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


_MAX_LIBRARY_BYTES = 256 << 20


def _fetch(library: Path, out: str) -> bool:
    """Copy the kept ``library`` to ``out`` if this user's suite kept it, whole (its
    recorded HMAC under the sealing key)."""
    try:
        record = read_bytes(library.with_suffix(".json"), 4096)
        recorded = loads_json(record.decode(), str(library))["hmac"]
        data = read_bytes(library, _MAX_LIBRARY_BYTES)
    except (UnreadableFile, ValueError, KeyError, TypeError):
        return False
    if not isinstance(recorded, str) or not cache_seal.tag_matches(data, recorded):
        return False
    Path(out).write_bytes(data)
    return True


def _keep(built: str, library: Path) -> None:
    """Keep the library just built; errors ignored (the cache is an optimisation)."""
    try:
        data = Path(built).read_bytes()
        sealed = cache_seal.tag(data)
        if sealed is None:
            return
        library.parent.mkdir(parents=True, exist_ok=True)
        declcache.replace_whole(library, data)
        record = {"hmac": sealed}
        declcache.replace_whole(library.with_suffix(".json"), json.dumps(record).encode())
    except OSError:
        pass


def cached(build: Callable[..., None], runtime: ModuleType) -> Callable[..., None]:
    """``build`` (XTC's ``_compile_runtime``) looking in the cache first."""

    def build_or_fetch(out_dll: str, tdir: str, runtime_type: Any) -> None:
        folder = declcache.cache_file(DIRECTORY)
        if folder is None or runtime_type is not runtime.RuntimeType.HOST:
            build(out_dll, tdir, runtime_type)
            return
        library = folder / f"host-{key(runtime)}.so"
        if _fetch(library, out_dll):
            return
        build(out_dll, tdir, runtime_type)
        _keep(out_dll, library)

    setattr(build_or_fetch, _MARK, True)
    return build_or_fetch


def install() -> bool:
    """Make XTC's host runtime build go through the cache; False where XTC's build function
    is not the one this was written for (then it is left as it is)."""
    from xtc.runtimes.host import runtime

    build = getattr(runtime, "_compile_runtime", None)
    if build is None:
        return False
    if getattr(build, _MARK, False):
        return True
    if list(inspect.signature(build).parameters) != _BUILD_PARAMETERS:
        return False
    runtime._compile_runtime = cached(build, runtime)
    return True
