"""The suite's waivers: failures it accepts for a certification, owned by the suite.

Vulkan-style: a waiver names the upstream issue that tracks the bug (``url``), the XTC
versions that have it (``xtc``, a version specifier) and the cases it covers by what they
are (a :class:`~pytest_xtc.core.cases.selectors.Selector`: ``ops``, ``dtypes``, ``placements``,
``primitives``, ``attributes`` (``op.attr`` given other than its default), ``pattern`` over
the case id), optionally the ``targets`` (fnmatch over
target names) and the ``phase`` it fails in (``compile``, ``placement`` or ``run``). A
waiver covers a failed case only, never a skip or a missing result. No pytest.

In ``conformance/waivers.yaml``::

    - id: f64-relu-f32-zero             # a short name, unique in the file
      ops: [relu]
      dtypes: [float64]
      phase: compile
      xtc: "<=0.3.2"
      reason: XTC emits an f32 zero in float64 relu (linalg.yield type mismatch)
      url: https://github.com/xtc-tools/xtc/issues
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pytest_xtc.core.cases.selectors import Selector, SelectorError, Traits
from pytest_xtc.core.cases.textfile import UnreadableFile, one_line, read_text
from pytest_xtc.core.cases.unique_keys import DuplicateKey, load_yaml
from pytest_xtc.core.outcome import STAGES, Phase

KEYS = ("id", "targets", "phase", "reason", "url")
CASE_KEYS = ("pattern", "ops", "dtypes", "placements", "primitives", "attributes")


class WaiverFileError(ValueError):
    """A malformed waiver file; the message names the file and the entry."""


@dataclass(frozen=True)
class Waiver:
    """A failure the suite accepts: the cases (``selector``), optionally the targets and
    the phase, why, and the upstream issue."""

    id: str
    selector: Selector
    reason: str
    url: str
    targets: tuple[str, ...] | None = None
    phase: str | None = None

    def matches(
        self, target: str, traits: Traits, xtc_version: str | None, phase: str | None = None
    ) -> bool:
        """True when this waiver covers a failure of ``traits`` on ``target`` with this XTC
        version, in ``phase`` (a runner phase; None skips the phase test)."""
        if self.targets is not None and not any(
            fnmatch.fnmatchcase(target, t) for t in self.targets
        ):
            return False
        if self.phase is not None and phase is not None and _stage(phase) != self.phase:
            return False
        return self.selector.matches(traits, xtc_version)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, **self.selector.to_dict()}
        if self.targets is not None:
            data["targets"] = list(self.targets)
        if self.phase is not None:
            data["phase"] = self.phase
        data.update(reason=self.reason, url=self.url)
        return data


def _stage(phase: str) -> str | None:
    try:
        return Phase(phase).stage
    except ValueError:  # pytest-setup and such: no stage, no waiver by phase
        return None


def waiver_from(entry: Mapping[str, Any], where: str) -> Waiver:
    for key in ("id", "reason", "url"):
        if not isinstance(entry.get(key), str) or not entry[key]:
            raise WaiverFileError(f"{where}: needs id, reason and url (strings)")
    if not entry["url"].startswith(("http://", "https://")):
        raise WaiverFileError(f"{where}: url must be an issue URL")
    unknown = sorted(set(entry) - {*KEYS, *CASE_KEYS, "xtc"})
    if unknown:
        raise WaiverFileError(f"{where}: unknown keys {', '.join(unknown)}")
    if not any(k in entry for k in CASE_KEYS):
        raise WaiverFileError(f"{where}: names no case: give a pattern or properties "
                              f"({', '.join(CASE_KEYS)}); a waiver never covers everything")
    try:
        selector = Selector.from_data(entry, where)
    except SelectorError as exc:
        raise WaiverFileError(str(exc)) from None
    if selector.xtc is None:
        raise WaiverFileError(f"{where}: xtc: name the XTC versions that have the bug "
                              "(a version specifier such as '<=0.3.2')")
    phase = entry.get("phase")
    if phase is not None and phase not in STAGES:
        raise WaiverFileError(f"{where}: phase must be one of {', '.join(STAGES)}")
    targets = entry.get("targets")
    if targets is not None:
        targets = [targets] if isinstance(targets, str) else targets
        if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
            raise WaiverFileError(f"{where}: targets must be a name or a list of names")
        targets = tuple(targets)
    return Waiver(entry["id"], selector, entry["reason"], entry["url"], targets, phase)


MAX_FILE_BYTES = 1 << 20


def waivers_from(data: Any, where: str) -> list[Waiver]:
    """Waivers from parsed YAML/JSON data: a list of entries (module docstring)."""
    if data is None:
        return []
    if not isinstance(data, list):
        raise WaiverFileError(f"{where}: expected a list of waivers")
    found: list[Waiver] = []
    for i, entry in enumerate(data, 1):
        if not isinstance(entry, dict):
            raise WaiverFileError(f"{where}: waiver {i} is not a mapping")
        waiver = waiver_from(entry, f"{where}: waiver {i}")
        if any(w.id == waiver.id for w in found):
            raise WaiverFileError(f"{where}: waiver {i}: id {waiver.id!r} is used twice")
        found.append(waiver)
    return found


def waivers_file() -> Path:
    """The suite's own waiver file, beside the case catalog."""
    from pytest_xtc.conformance import CATALOG

    return CATALOG.with_name("waivers.yaml")


def load_waivers(path: Path | None = None) -> list[Waiver]:
    path = path or waivers_file()
    if not os.path.lexists(path):
        return []
    try:
        data = load_yaml(read_text(path, MAX_FILE_BYTES), str(path))
    except DuplicateKey as exc:
        raise WaiverFileError(str(exc)) from None
    except (UnreadableFile, yaml.YAMLError) as exc:
        raise WaiverFileError(f"{path}: {one_line(exc)}") from None
    return waivers_from(data, str(path))
