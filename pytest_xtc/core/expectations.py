"""Expected failures of a target, as data: ``targets/<adapter module>.expectations.yaml``.

Each entry: ``pattern`` (fnmatch over the case id, e.g. ``relu-float64-*``), ``phase``
(``compile``, ``placement`` or ``run``; a wrong result counts as ``run``), ``reason`` and
``url``. They serve CI: a certification run ignores them. Strict: a case that matches
and passes fails, saying to remove the entry.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from pytest_xtc.core.outcome import STAGES as PHASES


class ExpectationFileError(ValueError):
    """A malformed expectation file; the message names the file and the line."""


@dataclass(frozen=True)
class Expectation:
    pattern: str
    phase: str
    reason: str
    url: str
    line: int = 0

    def matches(self, case_id: str) -> bool:
        return fnmatch.fnmatchcase(case_id, self.pattern)


@cache
def load(path: Path) -> tuple[Expectation, ...]:
    """The entries of one file (read once per process)."""
    try:
        root = yaml.compose(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ExpectationFileError(f"{path}: {exc}") from exc
    if root is None:
        return ()
    if not isinstance(root, yaml.SequenceNode):
        raise ExpectationFileError(f"{path}:{root.start_mark.line + 1}: expected a list of entries")
    entries = []
    for node in root.value:
        line = node.start_mark.line + 1
        data = yaml.safe_load(yaml.serialize(node))
        if not isinstance(data, dict):
            raise ExpectationFileError(f"{path}:{line}: an entry is a mapping")
        missing = {"pattern", "phase", "reason", "url"} - set(data)
        if missing:
            raise ExpectationFileError(f"{path}:{line}: entry lacks {', '.join(sorted(missing))}")
        if data["phase"] not in PHASES:
            raise ExpectationFileError(
                f"{path}:{line}: phase must be one of {', '.join(PHASES)}, not {data['phase']!r}"
            )
        entries.append(
            Expectation(
                str(data["pattern"]), data["phase"], str(data["reason"]), str(data["url"]), line
            )
        )
    return tuple(entries)


def find(entries: Sequence[Expectation], case_id: str) -> Expectation | None:
    return next((e for e in entries if e.matches(case_id)), None)


def dumps(entries: Sequence[Expectation]) -> str:
    """Entries in this file format, the way ``load`` reads them."""
    data = [
        {"pattern": e.pattern, "phase": e.phase, "reason": e.reason, "url": e.url} for e in entries
    ]
    return yaml.safe_dump(data, sort_keys=False, width=100) if data else "[]\n"
