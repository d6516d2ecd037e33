"""Writing an execution pack: one folder per case, then the manifest. No pytest, no XTC.

A case's folder (``cases/KEY/``) holds its kernel library and its call protocol
(``call.json``: the kernel's kind and entry, operand names, shapes and placements, the
inputs' recipe and digests, the calls with their timing and time limits); ``case.json``
is its line of the manifest (also a case that failed to compile: its failure, judged as
such). Runtime libraries go once to ``libs/`` under their SHA-256; large ones are
xz-compressed. Workers of one session (xdist) write cases side by side; :func:`finish`
(once, at the end) copies the device runner in and writes ``manifest.json``, which lists
every file's SHA-256.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from pytest_xtc.core.cases.identity import test_id
from pytest_xtc.core.pack import device_runner as runner
from pytest_xtc.core.pack.device_inputs import input_digest

CASES, LIBS, RUNNER = "cases", "libs", "runner"
COMPRESS_OVER = 8 << 20  # runtime libraries larger than this travel xz-compressed
Json = dict[str, Any]


class PackError(ValueError):
    """A pack that cannot be written or read as asked; the message says what to do."""


class Exported(Protocol):
    """A compiled case as the runner calls it (core.adapter.ExportedKernel)."""

    @property
    def kind(self) -> str: ...
    @property
    def library(self) -> Path: ...
    @property
    def entry(self) -> str: ...
    @property
    def runtime(self) -> tuple[Path, ...]: ...
    @property
    def timer(self) -> int | None: ...
    @property
    def placements(self) -> tuple[str, ...]: ...
    @property
    def guarded(self) -> bool: ...


def case_key(target: str, case_id: str) -> str:
    """A folder name for ``case_id`` on ``target``: readable, unique by a digest."""
    name = test_id(target, case_id)
    digest = hashlib.sha256(name.encode()).hexdigest()[:12]
    return f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)[:80]}-{digest}"


def start(pack: Path) -> None:
    """Make ``pack`` an empty folder for a new pack; refuse one that holds files."""
    if pack.exists() and (not pack.is_dir() or any(pack.iterdir())):
        raise PackError(f"--xtc-pack={pack}: exists and is not an empty folder "
                        "(remove it, or name another)")
    pack.mkdir(parents=True, exist_ok=True)


def _replace(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole (a temporary beside it, renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "wb") as stream:
        stream.write(data)
    os.chmod(tmp, 0o644)  # mkstemp's 0600 would keep the pack from others who carry it
    os.replace(tmp, path)


_written: dict[tuple[Path, Path, int, int], str] = {}  # (pack, source, size, mtime): name


def _library(pack: Path, source: Path) -> str:
    """``source`` in ``libs/`` (compressed when large), named by its digest; its path
    relative to the pack. Workers writing the same library write the same bytes; one
    process reads and hashes each library once per pack."""
    stat = source.stat()
    seen = (pack, source, stat.st_size, stat.st_mtime_ns)
    if seen in _written:
        return _written[seen]
    data = source.read_bytes()
    name = f"{hashlib.sha256(data).hexdigest()[:16]}-{source.name}"
    if len(data) > COMPRESS_OVER:
        name += ".xz"
    target = pack / LIBS / name
    if not target.is_file():
        _replace(target, lzma.compress(data, preset=6) if name.endswith(".xz") else data)
    _written[seen] = f"{LIBS}/{name}"
    return _written[seen]


#: input kinds the device runner remakes from a seed (device_inputs.make_inputs)
REMADE = ("random", "exact")


def write_case(
    pack: Path,
    case_id: str,
    target: str,
    inputs: Sequence[tuple[str, np.ndarray]],
    more_sets: Sequence[Sequence[np.ndarray]],
    recipe: Mapping[str, Any],
    outputs: Sequence[tuple[str, tuple[int, ...], str]],
    timings: Sequence[Mapping[str, object]],
    limits: Sequence[float],
    exported: Exported | None,
    record: Mapping[str, Any],
) -> None:
    """One case into the pack: ``record`` (its compile time, or its failure) and, for an
    exported kernel, its files and call protocol. ``timings`` and ``limits`` are the
    calls' timing parameters and time limits (untimed calls, then the timed one). The
    input sets travel as their ``recipe`` (the input kind and each set's seed: the runner
    remakes them) and their digests; those the runner cannot remake (special values,
    placed by the graph's structure) travel as ``.npy`` files."""
    key = case_key(target, case_id)
    folder = pack / CASES / key
    if folder.exists():
        raise PackError(f"{case_id}: packed twice (one pack holds each case once)")
    folder.mkdir(parents=True)
    line: Json = {"id": case_id, "target": target, "packed": exported is not None, **record}
    if exported is not None:
        sets = [[a for _, a in inputs], *[list(s) for s in more_sets]]
        digests = [input_digest(s) for s in sets]
        shutil.copyfile(exported.library, folder / exported.library.name)
        calls = [{"set": n, "timing": dict(timings[n])} for n in range(len(sets))]
        calls.append({"set": 0, "timing": dict(timings[-1])})
        files: list[list[str]] | None = None
        if recipe.get("values") not in REMADE:
            files = [[f"set{n}-in{i}.npy" for i in range(len(s))] for n, s in enumerate(sets)]
            for names, arrays in zip(files, sets, strict=True):
                for name, array in zip(names, arrays, strict=True):
                    np.save(folder / name, array, allow_pickle=False)
        call = {
            "kind": exported.kind, "library": exported.library.name, "entry": exported.entry,
            "runtime": [_library(pack, p) for p in exported.runtime], "timer": exported.timer,
            "placements": list(exported.placements), "guarded": exported.guarded,
            "inputs": [{"name": n, "shape": list(a.shape), "dtype": a.dtype.name}
                       for n, a in inputs],
            "outputs": [{"name": n, "shape": list(s), "dtype": d} for n, s, d in outputs],
            "recipe": {**recipe, "numpy": np.__version__}, "inputs_sha256": digests,
            "input_files": files,
            "calls": calls, "limits_s": list(limits),
        }
        data = json.dumps(call, indent=1).encode()
        (folder / "call.json").write_bytes(data)
        line.update(call_sha256=hashlib.sha256(data).hexdigest(), limits_s=list(limits),
                    inputs_sha256=digests)
    _replace(folder / "case.json", json.dumps(line).encode())


def finish(pack: Path, settings: Mapping[str, Any]) -> Path:
    """The runner copied in and the manifest written (last, whole): the pack is ready."""
    here = Path(runner.__file__).resolve().parent
    for module in sorted(here.glob("device_*.py")):
        _replace(pack / RUNNER / module.name, module.read_bytes())
    cases: Json = {}
    for line in sorted((pack / CASES).glob("*/case.json")):
        cases[line.parent.name] = runner.load_json(line)
    files = {
        str(p.relative_to(pack)): runner.sha256(p)
        for folder in (CASES, LIBS, RUNNER)
        for p in sorted((pack / folder).rglob("*"))
        if p.is_file() and p.name != "case.json" and "__pycache__" not in p.parts
    }
    manifest = {"format": runner.FORMAT, "runner_version": runner.RUNNER_VERSION,
                "settings": dict(settings), "cases": cases, "files": files}
    _replace(pack / runner.MANIFEST, json.dumps(manifest, indent=1).encode())
    return pack / runner.MANIFEST
