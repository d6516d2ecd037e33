"""Result records as plain JSON, written durably: one line per finished case."""

from __future__ import annotations

import enum
import hashlib
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_xtc.report.atomic import LineAppender

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
    """Appends one line per finished case to ``results.jsonl``, each synced; a line the
    disk refuses is cut off again, the writer closed and the OSError raised."""

    def __init__(self, path: Path) -> None:
        self._lines = LineAppender(path / RESULTS)

    @property
    def written(self) -> int:
        """How many results the file holds whole."""
        return self._lines.lines

    def write(self, record: Mapping[str, Any]) -> None:
        self._lines.append(dumps_line(record))

    def close(self) -> None:
        self._lines.close()


def sha256_file(path: Path) -> str:
    """The file's SHA-256, read in chunks (a bundle file may be large)."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def record_key(record: Mapping[str, Any]) -> str:
    return json.dumps(record, sort_keys=True)
