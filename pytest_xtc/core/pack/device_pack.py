"""The pack as the device runner reads it (Python 3 and numpy only; copied into every
pack's ``runner/`` beside ``device_runner.py``): the format's names, the manifest with
every file it lists checked, the compressed runtime libraries unpacked."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

RUNNER_VERSION = "1"
FORMAT = "pytest-xtc-pack/1"
MANIFEST = "manifest.json"
RUN = "run.json"
RESULT = "result.json"
PROGRESS = "progress"
UNPACKED = ".libs"  # in the results folder: the compressed runtime libraries, unpacked
Json = dict[str, Any]


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class PackProblem(Exception):
    """The pack is not whole or not this runner's: exit status 2."""


def _unique(pairs: list[tuple[str, Any]]) -> Json:
    found: Json = {}
    for key, value in pairs:
        if key in found:  # readers differ on which value counts: refuse, never pick
            raise ValueError(f"key {key!r} given twice")
        found[key] = value
    return found


def load_json(path: Path) -> Any:
    """``path``'s JSON, an object naming a key twice refused (``ValueError``)."""
    return json.loads(path.read_text(), object_pairs_hook=_unique)


def read_manifest(pack: Path) -> tuple[Json, str]:
    """The manifest and the pack's id (its SHA-256); every file it lists checked."""
    path = pack / MANIFEST
    if not path.is_file():
        raise PackProblem(f"{path}: no manifest (not an execution pack)")
    try:
        manifest: Json = load_json(path)
    except ValueError as exc:
        raise PackProblem(f"{path}: not a manifest ({exc})") from None
    if manifest.get("format") != FORMAT:
        raise PackProblem(f"{path}: format {manifest.get('format')!r}, expected {FORMAT}")
    for name, digest in manifest["files"].items():
        file = pack / name
        if not file.is_file() or sha256(file) != digest:
            raise PackProblem(f"{file}: missing or not the file the manifest names (sha256)")
    return manifest, sha256(path)


def library(pack: Path, name: str, unpacked: Path) -> Path:
    """Where runtime library ``name`` (relative to the pack) is: an xz-compressed one is
    unpacked once, by the supervisor, into ``unpacked``."""
    return unpacked / Path(name).name[:-3] if name.endswith(".xz") else pack / name


def unpack_libraries(pack: Path, manifest: Json, unpacked: Path) -> None:
    import lzma

    for name in manifest["files"]:
        if name.endswith(".xz"):
            unpacked.mkdir(parents=True, exist_ok=True)
            library(pack, name, unpacked).write_bytes(lzma.decompress((pack / name).read_bytes()))

