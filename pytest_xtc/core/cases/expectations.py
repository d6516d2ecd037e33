"""Expected failures of a target, as data: ``targets/<adapter module>.expectations.yaml``.

Each entry names the cases it covers by a selector (``selectors.py``): ``pattern``
(fnmatch over the case id, e.g. ``relu-float64-*``) and/or properties: ``ops``,
``dtypes``, ``placements``, ``primitives`` and ``xtc`` (a version specifier over
xtc-tools). Properties recognise a known upstream bug in every case that has them, a user
case named anything included, and only on the XTC versions that have it. Then ``phase``
(``compile``, ``placement`` or ``run``; a wrong result counts as ``run``), ``reason`` and
``url``. ``executed: true`` limits an entry to runs that execute the kernels (a bug
seen only on a device), ``executed: false`` to compile-only runs; without it an entry
applies to both. Any other key is refused. They serve CI: a certification run ignores
them. Strict: a case that matches and passes (or, on a compile-only tier, compiles and
passes its artifact check) fails, saying to remove the entry.

Files are read as UTF-8 YAML without anchors or aliases; every problem is one line naming
the file (and the line).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from pytest_xtc.core.cases.case import Case
from pytest_xtc.core.cases.selectors import KEYS as SELECTOR_KEYS
from pytest_xtc.core.cases.selectors import Selector, SelectorError, Traits, xtc_version
from pytest_xtc.core.cases.textfile import UnreadableFile, one_line, read_text
from pytest_xtc.core.cases.unique_keys import (
    DuplicateKey,
    compose,
    yaml_duplicate,
    yaml_events,
)
from pytest_xtc.core.outcome import STAGES as PHASES

ENTRY_KEYS = (*SELECTOR_KEYS, "executed", "phase", "reason", "url")
MAX_FILE_BYTES = 1 << 20
INSTALLED = "installed"  # find()'s default: the xtc-tools version installed here


class ExpectationFileError(ValueError):
    """A malformed expectation file; the message names the file and the line."""


@dataclass(frozen=True)
class Expectation:
    selector: Selector
    phase: str
    reason: str
    url: str
    line: int = 0
    #: True: runs that execute the kernels only; False: compile-only runs only; None: both.
    executed: bool | None = None

    def __post_init__(self) -> None:
        if isinstance(self.selector, str):  # a bare case id pattern
            object.__setattr__(self, "selector", Selector(pattern=self.selector))

    @property
    def pattern(self) -> str:
        """How the entry names its cases, for messages: its pattern, or its properties."""
        return self.selector.pattern or self.selector.describe()

    def applies(self, executed: bool | None) -> bool:
        """Whether the entry applies to a run that executed the kernels (``executed``
        True), only compiled them (False), or either (None: not known)."""
        return executed is None or self.executed is None or self.executed == executed

    def matches(self, case: Case | Traits | str, xtc: str | None = INSTALLED,
                executed: bool | None = None) -> bool:
        """True when the entry covers ``case`` (a Case, its Traits, or a bare case id,
        which only a pattern-only entry can match) on XTC version ``xtc``, in a run that
        ``executed`` the kernels or not (None: either)."""
        if not self.applies(executed):
            return False
        version = xtc_version() if xtc == INSTALLED else xtc
        if isinstance(case, str):
            if set(self.selector.to_dict()) - {"pattern", "xtc"}:
                return False
            case = Traits(case, frozenset(), "", "host", frozenset())
        traits = case if isinstance(case, Traits) else Traits.of(case)
        return self.selector.matches(traits, version)

    def to_dict(self) -> dict[str, Any]:
        tier = {} if self.executed is None else {"executed": self.executed}
        return {**self.selector.to_dict(), **tier, "phase": self.phase,
                "reason": self.reason, "url": self.url}


def _text(path: Path) -> str:
    try:
        return read_text(path, MAX_FILE_BYTES)
    except UnreadableFile as exc:
        raise ExpectationFileError(f"{path}: {exc}") from None


def _compose(path: Path, text: str) -> yaml.Node | None:
    """The YAML tree, refusing anchors and aliases (a few lines expand to gigabytes) and
    nesting past unique_keys.MAX_DEPTH."""
    try:
        for event in yaml_events(text):
            anchor = getattr(event, "anchor", None)
            if isinstance(event, yaml.AliasEvent) or anchor is not None:
                raise ExpectationFileError(
                    f"{path}:{event.start_mark.line + 1}: YAML anchors and aliases "
                    f"(&{anchor}, *{anchor}) are not allowed; write the entries out"
                )
        root = compose(text)  # its nesting checked by the events above
        if root is not None:
            yaml_duplicate(root, str(path))
        return root
    except DuplicateKey as exc:
        raise ExpectationFileError(str(exc)) from None
    except yaml.YAMLError as exc:
        raise ExpectationFileError(f"{path}: not valid YAML: {one_line(exc)}") from None


@cache
def load(path: Path) -> tuple[Expectation, ...]:
    """The entries of one file (read once per process)."""
    root = _compose(path, _text(path))
    if root is None:
        return ()
    if not isinstance(root, yaml.SequenceNode):
        raise ExpectationFileError(f"{path}:{root.start_mark.line + 1}: expected a list of entries")
    entries = []
    for node in root.value:
        line = node.start_mark.line + 1
        try:
            data = yaml.safe_load(yaml.serialize(node))
        except yaml.YAMLError as exc:
            raise ExpectationFileError(f"{path}:{line}: {one_line(exc)}") from None
        entries.append(_entry(data, f"{path}:{line}", line))
    return tuple(entries)


def _entry(data: Any, where: str, line: int) -> Expectation:
    if not isinstance(data, dict):
        raise ExpectationFileError(f"{where}: an entry is a mapping")
    unknown = sorted(str(k) for k in set(data) - set(ENTRY_KEYS))
    if unknown:
        raise ExpectationFileError(
            f"{where}: unknown key {', '.join(unknown)} (known: {', '.join(ENTRY_KEYS)})"
        )
    missing = {"phase", "reason", "url"} - set(data)
    if missing:
        raise ExpectationFileError(f"{where}: entry lacks {', '.join(sorted(missing))}")
    if data["phase"] not in PHASES:
        raise ExpectationFileError(
            f"{where}: phase must be one of {', '.join(PHASES)}, not {data['phase']!r}"
        )
    executed = data.get("executed")
    if executed is not None and not isinstance(executed, bool):
        raise ExpectationFileError(f"{where}: executed must be true (runs that execute the "
                                   f"kernels only) or false (compile-only runs only), "
                                   f"not {executed!r}")
    try:
        selector = Selector.from_data(data, where)
    except SelectorError as exc:
        raise ExpectationFileError(str(exc)) from None
    return Expectation(selector, data["phase"], str(data["reason"]), str(data["url"]), line,
                       executed)


def entry(pattern: str, phase: str, reason: str, url: str) -> Expectation:
    """An entry naming one case id (what ``--xtc-update-expectations`` proposes)."""
    return Expectation(Selector(pattern=pattern), phase, reason, url)


def find(
    entries: Sequence[Expectation], case: Case | Traits | str, xtc: str | None = INSTALLED,
    executed: bool | None = None,
) -> Expectation | None:
    """The first entry covering ``case`` on XTC version ``xtc`` (default: installed) in a
    run that ``executed`` the kernels or only compiled them (None: either)."""
    version = xtc_version() if xtc == INSTALLED else xtc
    if not isinstance(case, (str, Traits)) and entries:
        case = Traits.of(case)  # read once, not once an entry
    return next((e for e in entries if e.matches(case, version, executed)), None)


def dumps(entries: Sequence[Expectation]) -> str:
    """Entries in this file format, the way ``load`` reads them."""
    data = [e.to_dict() for e in entries]
    return yaml.safe_dump(data, sort_keys=False, width=100) if data else "[]\n"
