"""The typed report: report.json's parts as frozen dataclasses. No pytest.

report.json holds ``schema`` and ``kind`` (what the file is), the ``suite`` that wrote it,
the suite's ``waivers`` (echoed), the ``runs`` behind it, the ``targets`` it judges and
what :func:`pytest_xtc.report.rules.verdicts.assemble` derives from them (``case_set``,
``profiles``, ``totals``, ``waivers_used``, ``certifies``, ``not_certifying``); a merged
bundle adds ``merged_from``. Each class below is one part, its fields are its keys (see
:mod:`.schema` for how they are read and written).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from pytest_xtc.core.outcome import Word
from pytest_xtc.report.parts.facts import AdapterRecord, CapabilitiesRecord, SuiteSource, System
from pytest_xtc.report.parts.reasons import Reason, ReasonCode, ReasonError, parse
from pytest_xtc.report.parts.records import CaseRecord
from pytest_xtc.report.parts.schema import (
    BOOL,
    INT,
    NUMBER,
    OBJECT,
    STR,
    Keys,
    Part,
    fail,
    list_of,
    map_of,
    optional,
    part,
    plain,
    word,
)


class Verdict(Word):
    CONFORMANT = "conformant"
    CONFORMANT_WITH_WAIVERS = "conformant with waivers"
    NOT_CONFORMANT = "not conformant"
    NOT_APPLICABLE = "not applicable"

    @property
    def holds(self) -> bool:
        """The verdict holds a claim."""
        return self in (Verdict.CONFORMANT, Verdict.CONFORMANT_WITH_WAIVERS)


class Scope(Word):
    """How much of a target's case set the runs behind a bundle meant to cover."""

    FULL = "full"
    SHARD = "shard"  # some shards of a sharded run: merge the others for a verdict
    FILTERED = "filtered"  # -k, -m, node ids, --xtc-cases...: never conformant
    INTERRUPTED = "interrupted"  # Ctrl-C, -x, a crash of the session: never conformant


def reason(value: Any, where: str) -> Reason:
    STR(value, where)
    try:
        return parse(value)
    except ReasonError as exc:
        raise fail(where, str(exc)) from None


STRS = list_of(STR)


@dataclass(frozen=True, kw_only=True)
class Suite(Part):
    name: str  # pytest-xtc
    version: str  # the suite version (pytest_xtc.SUITE_VERSION) that wrote the bundle
    #: per op, the parameter values and pairs the catalog covers (conformance/coverage.py)
    coverage: dict[str, Any] | None = None
    KEYS: ClassVar[Keys] = {"name": STR, "version": STR, "coverage": optional(OBJECT)}


@dataclass(frozen=True, kw_only=True)
class CaseSetHash(Part):
    """Every ``<target>\\t<case id>`` of the bundle, hashed (caseset.case_set_hash)."""

    sha256: str
    count: int
    KEYS: ClassVar[Keys] = {"sha256": STR, "count": INT}


@dataclass(frozen=True, kw_only=True)
class TargetCaseSet(Part):
    """A target's case set: each case's id, profile, op and traits (caseset.case_entry)."""

    sha256: str
    count: int
    cases: tuple[Mapping[str, Any], ...]
    KEYS: ClassVar[Keys] = {"sha256": STR, "count": INT, "cases": list_of(OBJECT)}

    @property
    def ids(self) -> list[str]:
        return [str(c.get("id")) for c in self.cases]


@dataclass(frozen=True, kw_only=True)
class Shards(Part):
    """The shards (1..count) of a sharded run that a bundle holds."""

    count: int
    indices: tuple[int, ...]
    KEYS: ClassVar[Keys] = {"count": INT, "indices": list_of(INT)}


@dataclass(frozen=True, kw_only=True)
class ProfileVerdict(Part):
    """A target's verdict on one profile, with the reasons it is not conformant."""

    verdict: Verdict
    required: int  # how many required cases of the profile the bundle must hold
    reasons: tuple[Reason, ...]
    waived: int | None = None  # failures waived, when the verdict holds with waivers
    KEYS: ClassVar[Keys] = {"verdict": word(Verdict), "required": INT, "reasons": list_of(reason),
            "waived": optional(INT)}

    @property
    def codes(self) -> list[ReasonCode]:
        return [r.code for r in self.reasons]

    @property
    def texts(self) -> list[str]:
        return [r.text for r in self.reasons]


@dataclass(frozen=True, kw_only=True)
class Command(Part):
    argv: tuple[str, ...]  # sys.argv
    args: tuple[str, ...]  # pytest's invocation arguments
    dir: str  # where pytest was invoked
    KEYS: ClassVar[Keys] = {"argv": STRS, "args": STRS, "dir": STR}


@dataclass(frozen=True, kw_only=True)
class Settings(Part):
    """How a run was made; :data:`pytest_xtc.report.merge.SAME_SETTINGS` must agree."""

    seed: int | None
    strict: bool
    ignore_expectations: bool
    cases: tuple[str, ...]  # case files added by --xtc-cases
    suite_version: str | None
    certifying: bool | None = None  # what the run claimed (verify recomputes it)
    targets: Any = None  # the --xtc-target selection
    adapter_options: Mapping[str, str | None] | None = None
    target_versions: Mapping[str, Mapping[str, str]] | None = None
    shard: str | None = None  # --xtc-shard=I/N
    workers: Any = None  # pytest-xdist's -n
    compile_cache: str | None = None  # the kernel cache: on, refresh, off (certifications)
    KEYS: ClassVar[Keys] = {"seed": optional(INT), "strict": BOOL, "ignore_expectations": BOOL,
            "cases": STRS, "suite_version": optional(STR), "certifying": optional(BOOL),
            "targets": plain, "adapter_options": optional(OBJECT),
            "target_versions": optional(OBJECT), "shard": optional(STR), "workers": plain,
            "compile_cache": optional(STR)}


@dataclass(frozen=True, kw_only=True)
class Run(Part):
    """One pytest session behind the bundle."""

    settings: Settings
    filters: tuple[str, ...]  # how the run left out cases, one phrase each
    interrupted: str  # why it stopped early ("" when it did not)
    system: System  # environment.system_info
    command: Command | None = None
    started: str | None = None  # ISO times, UTC
    finished: str | None = None
    duration_s: float | None = None
    suite_source: SuiteSource | None = None  # environment.suite_source
    exit_status: int | None = None
    collected: int | None = None  # node ids pytest collected
    KEYS: ClassVar[Keys] = {"settings": part(Settings), "filters": STRS, "interrupted": STR,
            "system": OBJECT, "command": part(Command), "started": STR, "finished": STR,
            "duration_s": NUMBER, "suite_source": OBJECT, "exit_status": INT,
            "collected": optional(INT)}


@dataclass(frozen=True, kw_only=True)
class Target(Part):
    """One target: what it is and declared, the runs and case set behind it, and (once
    assembled) its results, counts, verdict per profile, waivers applied and scope."""

    tier: str
    reason: str  # why the tier ("" when available)
    versions: Mapping[str, str]  # the toolchain versions it reported
    device: str | None
    placements: tuple[str, ...]
    capabilities: CapabilitiesRecord | None  # ops, dtypes, placements, schedules
    runs: tuple[int, ...]  # indices into the report's runs
    shards: Shards | None
    case_set: TargetCaseSet
    adapter: AdapterRecord | None = None  # distribution, version, entry point, options
    counts: Mapping[str, int] | None = None
    verdicts: Mapping[str, ProfileVerdict] | None = None  # profile -> verdict
    waived: Mapping[str, str] | None = None  # case id -> waiver id
    results: tuple[CaseRecord, ...] | None = None
    scope: Scope | None = None
    KEYS: ClassVar[Keys] = {"tier": STR, "reason": STR, "versions": OBJECT, "device": optional(STR),
            "placements": STRS, "capabilities": optional(OBJECT), "runs": list_of(INT),
            "shards": optional(part(Shards)), "case_set": part(TargetCaseSet),
            "adapter": optional(OBJECT), "counts": map_of(INT),
            "verdicts": map_of(part(ProfileVerdict)), "waived": map_of(STR),
            "results": list_of(part(CaseRecord)), "scope": word(Scope)}

    def verdict(self, profile: str) -> ProfileVerdict:
        if self.verdicts is None or profile not in self.verdicts:
            raise KeyError(f"no {profile} verdict (the report was not assembled)")
        return self.verdicts[profile]


@dataclass(frozen=True, kw_only=True)
class Report(Part):
    """A whole report.json (see the module's docstring)."""

    schema: int
    kind: str
    suite: Suite
    waivers: tuple[Mapping[str, Any], ...]  # the suite's waivers (waivers.Waiver.to_dict)
    runs: tuple[Run, ...]
    targets: Mapping[str, Target]
    case_set: CaseSetHash | None = None
    profiles: Mapping[str, str] | None = None  # profile -> what it covers
    totals: Mapping[str, int] | None = None  # counts over every target
    waivers_used: Mapping[str, int] | None = None  # waiver id -> cases it waived
    certifies: bool | None = None
    not_certifying: tuple[str, ...] | None = None  # "run N: why", one per problem
    merged_from: tuple[str, ...] | None = None  # the bundles a merge read
    KEYS: ClassVar[Keys] = {
            "schema": INT, "kind": STR, "suite": part(Suite), "waivers": list_of(OBJECT),
            "runs": list_of(part(Run)), "targets": map_of(part(Target)),
            "case_set": part(CaseSetHash), "profiles": map_of(STR),
            "totals": map_of(INT), "waivers_used": map_of(INT), "certifies": BOOL,
            "not_certifying": STRS, "merged_from": STRS}

    def runs_of(self, target: str) -> list[Run]:
        return [self.runs[i] for i in self.targets[target].runs]


def read_report(data: Any, where: str = "report.json:") -> Report:
    """The report ``data`` holds; raises schema.SchemaError (one line: file and key)."""
    return Report.from_dict(data, where)

