"""Result records as plain JSON, written durably: one line per finished case."""

from __future__ import annotations

import enum
import hashlib
import json
import math
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

RESULTS = "results.jsonl"
CHUNK = 1 << 20


def clean(value: Any) -> Any:
    """Plain JSON data: non-finite floats become strings, tuples lists, enums and numpy
    scalars their values, anything else its str()."""
    if value is None or type(value) in (str, bool, int):
        return value
    if isinstance(value, enum.Enum):
        return clean(value.value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        return clean(value.item())
    return str(value)


def dumps_line(record: Mapping[str, Any]) -> str:
    return json.dumps(clean(record), sort_keys=True, allow_nan=False) + "\n"


class ResultsWriter:
    """Appends one line per finished case to ``results.jsonl``, durably."""

    def __init__(self, path: Path) -> None:
        self._file = (path / RESULTS).open("w", encoding="utf-8")

    def write(self, record: Mapping[str, Any]) -> None:
        self._file.write(dumps_line(record))
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()


def atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's 0600 is for secrets; a bundle is for sharing
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def sha256_file(path: Path) -> str:
    """The file's SHA-256, read in chunks (a bundle file may be large)."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def record_key(record: Mapping[str, Any]) -> str:
    return json.dumps(record, sort_keys=True)
