"""Result records: one :class:`CaseRecord` per finished case, one JSON line each in
``results.jsonl``, written durably."""

from __future__ import annotations

import enum
import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pytest_xtc.core.cases.identity import test_id
from pytest_xtc.report.files.atomic import LineAppender
from pytest_xtc.report.parts.schema import (
    BOOL,
    INT,
    NUMBER,
    OBJECT,
    STR,
    Keys,
    Part,
    list_of,
    optional,
)

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


@dataclass(frozen=True, kw_only=True)
class CaseRecord(Part):
    """One finished case, as a line of results.jsonl: the runner's Outcome
    (:class:`pytest_xtc.core.outcome.Outcome`) plus what pytest saw of it. A case that
    ended without an Outcome (a setup error, a timeout) has target, case, status, phase,
    message and the pytest fields only. Seconds and ratios that were not finite are stored
    as strings."""

    target: str
    case: str  # the case id
    status: str  # a core.outcome.Status value; verdicts flag any other as unknown
    phase: str | None = None  # a core.outcome.Phase value, or pytest-<when>
    message: str | None = None
    tier: str | None = None  # the target's tier when it ran
    seed: int | None = None
    worst_ratio: float | str | None = None  # largest error / tolerance of the outputs
    compile_s: float | str | None = None
    run_s: float | str | None = None
    transfer_s: float | str | None = None  # moving operands to a worker and back
    times: tuple[float | str, ...] | None = None  # each kernel call's seconds
    output_digest: str | None = None  # SHA-256 of the first call's outputs (reruns)
    perf: Mapping[str, Any] | None = None  # a passed case's performance record (perf.py)
    guarded: bool | None = None  # writes out of bounds checked by guard bands
    calls: int | None = None  # kernel calls checked
    precision: Mapping[str, Any] | None = None  # precision.Terms.to_dict
    traits: Mapping[str, Any] | None = None  # selectors.Traits.to_dict
    checks: Mapping[str, Any] | None = None  # each per-case check's facts, by check name
    kind: Mapping[str, Any] | None = None  # how it failed (core.outcome.FailureKind.to_dict)
    kernel_cached: bool | None = None  # its kernel came from the kernel cache (None: not used)
    nodeid: str | None = None  # pytest's node id
    pytest_outcome: str | None = None  # passed, failed, skipped, xfailed, error
    duration: float | str | None = None  # pytest's seconds, setup and call

    KEYS: ClassVar[Keys] = {
        "target": STR, "case": STR, "status": STR, "phase": optional(STR),
        "message": optional(STR), "tier": optional(STR), "seed": optional(INT),
        "worst_ratio": optional(NUMBER), "compile_s": optional(NUMBER),
        "run_s": optional(NUMBER), "transfer_s": optional(NUMBER),
        "times": optional(list_of(NUMBER)),
        "output_digest": optional(STR), "perf": optional(OBJECT),
        "guarded": optional(BOOL), "calls": optional(INT),
        "precision": optional(OBJECT), "traits": optional(OBJECT),
        "checks": optional(OBJECT), "kind": optional(OBJECT), "nodeid": optional(STR),
        "kernel_cached": optional(BOOL),
        "pytest_outcome": optional(STR),
        "duration": optional(NUMBER),
    }

    @property
    def key(self) -> str:
        """``<target>-<case id>``, the case key of shards and messages."""
        return test_id(self.target, self.case)


def read_record(data: Any, where: str) -> CaseRecord:
    """A results.jsonl line's record; raises schema.SchemaError naming ``where``."""
    return CaseRecord.from_dict(data, where)


def dumps_line(record: CaseRecord) -> str:
    return json.dumps(clean(record.to_dict()), sort_keys=True, allow_nan=False) + "\n"


class ResultsWriter:
    """Appends one line per finished case to ``results.jsonl``, each synced; a line the
    disk refuses is cut off again, the writer closed and the OSError raised."""

    def __init__(self, path: Path) -> None:
        self._lines = LineAppender(path / RESULTS)

    @property
    def written(self) -> int:
        """How many results the file holds whole."""
        return self._lines.lines

    def write(self, record: CaseRecord) -> None:
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


def record_key(record: CaseRecord) -> str:
    return json.dumps(record.to_dict(), sort_keys=True)

