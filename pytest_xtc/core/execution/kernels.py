"""The kernel cache's part in running a case (docs/caches.md, "Kernels"). No pytest.

The cache itself (a sealed store of artifact directories, :class:`KernelStore`) is handed
in by the session (``Settings.kernels``); it is read and written here, on the session's
side, never in the worker that runs the case's code: before the work, the case's key is
looked up and a verified copy of the entry placed in the case's work folder (the worker
then builds the adapter's artifact from those files: :func:`reusing`); after it, the files
a fresh compile left there are checked against the digests the worker took right after
the compile, and stored.

The key is a SHA-256 over the adapter's :meth:`~TargetAdapter.kernel_identity` (its code,
options, probe, toolchain files, programs, environment, CPU) and every field of the case
but those that only its run reads (:data:`RUN_ONLY`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pytest_xtc.core.adapter import TargetAdapter
    from pytest_xtc.core.cases.case import Case

FORMAT = 1
#: The case's fields that only its run and its checks read, never its compile: input
#: values, error rule, operand alignment, where it came from, tags, its twin.
RUN_ONLY = frozenset({"values", "c", "exact_rule", "align", "source", "tags", "twin"})
REUSE, KEEP = "reuse", "keep"  # WorkRequest.kernel: files placed; compile and send digests
#: A kept refusal (``CompileRejected``): the entry's only file, the failure it reported
REFUSAL = ".pytest-xtc-compile-refused.json"


class KernelStore(Protocol):
    """Where kept kernels live (``core/adapters/kernel_cache.py``)."""

    refresh: bool  # compile everything and rewrite the entries

    def place(self, key: str, workdir: Path) -> tuple[bool, str]:
        """Copy entry ``key``'s files into ``workdir`` when its seal and every file's
        digest hold: (placed, a note saying why a bad entry was not)."""

    def store(self, key: str, workdir: Path, files: Mapping[str, str]) -> str:
        """Keep ``files`` (relative path -> SHA-256) of ``workdir`` under ``key``; a note
        when they were not kept."""


@dataclass
class Lookup:
    key: str
    hit: bool
    note: str = ""
    refused: dict[str, str] | None = None  # a kept refusal: {"failure": ..., "kind": ...}


_identities: dict[int, tuple[Any, Any]] = {}
_reusing = [False]


def key(identity: Any, case: Case) -> str:
    """The entry's key for ``case`` compiled by an adapter of ``identity``."""
    fields = {f.name: plain(getattr(case, f.name)) for f in dataclasses.fields(case)
              if f.name not in RUN_ONLY}
    data = {"format": FORMAT, "adapter": identity, "case": fields}
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def plain(value: Any) -> Any:
    """``value`` as JSON data that tells apart what differs (types kept where JSON would
    merge them: a tuple and a list, a set)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {"mapping": {json.dumps(plain(k), sort_keys=True): plain(v)
                            for k, v in value.items()}}
    if isinstance(value, (list, tuple)):
        return {type(value).__name__: [plain(v) for v in value]}
    if isinstance(value, (set, frozenset)):
        return {"set": sorted(json.dumps(plain(v), sort_keys=True) for v in value)}
    return {type(value).__name__: repr(value)}


def identity(adapter: TargetAdapter) -> Any:
    """The adapter's kernel identity, asked once per adapter; None: not cached (an
    adapter that does not opt in, or whose answer fails)."""
    kept = _identities.get(id(adapter))
    if kept is None or kept[0] is not adapter:
        try:
            answer = adapter.kernel_identity()
            answer = None if answer is None else json.loads(json.dumps(answer))
        except Exception:
            answer = None
        kept = _identities[id(adapter)] = (adapter, answer)
    return kept[1]


def before(adapter: TargetAdapter, case: Case, workdir: Path,
           store: KernelStore | None) -> Lookup | None:
    """Look ``case`` up before its work; its files placed in ``workdir`` on a hit. None
    when no cache is used for it."""
    if store is None:
        return None
    found = identity(adapter)
    if found is None:
        return None
    lookup = Lookup(key(found, case), False)
    if not store.refresh:
        workdir.mkdir(parents=True, exist_ok=True)
        lookup.hit, lookup.note = store.place(lookup.key, workdir)
        if lookup.hit and (workdir / REFUSAL).is_file():
            try:  # sealed and digested as it was placed
                record = json.loads((workdir / REFUSAL).read_text())
                lookup.refused = {"failure": str(record["failure"]), "kind": str(record["kind"])}
            except (ValueError, KeyError, TypeError):
                lookup.hit, lookup.note = False, "kernel cache: a kept refusal unreadable"
    return lookup


def mode(lookup: Lookup | None) -> str:
    """What the worker is asked (``WorkRequest.kernel``)."""
    return "" if lookup is None else REUSE if lookup.hit else KEEP


def after(store: KernelStore | None, lookup: Lookup | None, workdir: Path,
          files: Mapping[str, str] | None, notes: list[str],
          refused: Mapping[str, str] | None = None) -> None:
    """Keep the ``files`` a fresh compile left in ``workdir`` (the worker's digests, taken
    right after it: ``Work.kernel_files``), or the compiler's ``refused`` (its failure and
    kind: :data:`REFUSAL` alone is kept); add to ``notes`` what went wrong."""
    if lookup is None or store is None:
        return
    if lookup.note:
        notes.append(lookup.note)
    if not lookup.hit and refused and not files:
        data = json.dumps(dict(refused), sort_keys=True).encode()
        (workdir / REFUSAL).write_bytes(data)
        files = {REFUSAL: hashlib.sha256(data).hexdigest()}
    if not lookup.hit and files:
        note = store.store(lookup.key, workdir, files)
        if note:
            notes.append(note)


def manifest(workdir: Path) -> dict[str, str] | None:
    """Every file under ``workdir`` (relative path -> SHA-256); None when something there
    is not a plain file or folder (nothing is then kept)."""
    found: dict[str, str] = {}
    for folder, dirs, files in os.walk(workdir):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            if path.is_symlink() or not (path.is_dir() or path.is_file()):
                return None
        for name in files:
            path = Path(folder) / name
            found[path.relative_to(workdir).as_posix()] = hashlib.sha256(
                path.read_bytes()).hexdigest()
    return found or None


@contextlib.contextmanager
def reusing(on: bool) -> Iterator[None]:
    """While the block runs (the adapter's compile, in the worker), :func:`reused` says
    whether the work folder holds the files of this very compile, placed from the cache."""
    _reusing[0] = on
    try:
        yield
    finally:
        _reusing[0] = False


def reused() -> bool:
    """Whether the compile running now may take its files from the work folder instead of
    making them (an adapter's compile that does not ask compiles afresh: also right)."""
    return _reusing[0]
