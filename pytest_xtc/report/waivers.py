"""The suite's waivers: failures it accepts for a certification, owned by the suite."""

from __future__ import annotations

import fnmatch
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml


class WaiverFileError(ValueError):
    """A malformed waiver file; the message names the file and the entry."""


@dataclass(frozen=True)
class Waiver:
    """A failure the suite accepts: ``pattern`` (fnmatch) over ``<target>-<case id>`` or
    over the case id alone, why, and the issue that tracks it."""

    pattern: str
    reason: str
    url: str

    def matches(self, target: str, case_id: str) -> bool:
        return fnmatch.fnmatchcase(f"{target}-{case_id}", self.pattern) or fnmatch.fnmatchcase(
            case_id, self.pattern
        )

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def waivers_from(data: Any, where: str) -> list[Waiver]:
    """Waivers from parsed YAML/JSON data: a list of {pattern, reason, url}."""
    if data is None:
        return []
    if not isinstance(data, list):
        raise WaiverFileError(f"{where}: expected a list of waivers")
    found = []
    for i, entry in enumerate(data, 1):
        if not isinstance(entry, dict) or {"pattern", "reason", "url"} - set(entry):
            raise WaiverFileError(f"{where}: waiver {i} needs pattern, reason and url")
        if not str(entry["url"]).startswith(("http://", "https://")):
            raise WaiverFileError(f"{where}: waiver {i}: url must be an issue URL")
        found.append(Waiver(str(entry["pattern"]), str(entry["reason"]), str(entry["url"])))
    return found


def waivers_file() -> Path:
    """The suite's own waiver file, beside the case catalog."""
    from pytest_xtc.conformance import CATALOG

    return CATALOG.with_name("waivers.yaml")


def load_waivers(path: Path | None = None) -> list[Waiver]:
    path = path or waivers_file()
    try:
        data = yaml.safe_load(path.read_text()) if path.is_file() else None
    except (OSError, yaml.YAMLError) as exc:
        raise WaiverFileError(f"{path}: {exc}") from exc
    return waivers_from(data, str(path))
