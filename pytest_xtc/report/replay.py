"""Replaying a bundle's case: the one place that rebuilds a case from its result record
and reruns it on this machine. No pytest.

A record names its target and case id. The bundle's run of that target gives the base
seed, the adapter options and the user case files (``--xtc-cases`` of its command line,
read again from the run's directory). The case is found by its id among the suite's
cases for the placements the target declared, those files' cases and any the caller
adds; failing that, the caller's ``rebuild`` may make it (exploration regenerates an
explored sample from its id). The target's adapter comes from the registry with the
recorded options. ``xtc-conformance verify --rerun`` (:mod:`pytest_xtc.report.audit`) and
``xtc-conformance shrink`` (:mod:`pytest_xtc.exploration.shrink`) replay through here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pytest_xtc.core.adapter import ONCE, TargetAdapter
from pytest_xtc.core.adapters import registry
from pytest_xtc.core.cases.case import Case, load_case_paths
from pytest_xtc.core.cases.identity import test_id
from pytest_xtc.core.execution.runner import run_case
from pytest_xtc.core.execution.settings import Settings
from pytest_xtc.core.outcome import Outcome
from pytest_xtc.report.parts.model import Report, Run
from pytest_xtc.report.parts.records import CaseRecord
from pytest_xtc.report.suitecheck import capabilities_of, suite_cases

#: Makes a case the suite and the case files do not hold: (case id, the cases known, the
#: run's base seed) -> the case, or None.
Rebuild = Callable[[str, Sequence[Case], int], Case | None]


class ReplayError(Exception):
    """Why a record cannot be replayed here, in one line."""


def safe_name(name: str) -> str:
    """``name`` as a file name: anything but letters, digits, ``_.-`` becomes ``_``."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def option_flags(options: Mapping[str, object]) -> list[str]:
    """Adapter options as the plugin's command-line flags (``--xtc-KEY=VALUE``)."""
    return [f"--xtc-{k}={v}" for k, v in options.items() if v is not None]


@dataclass(frozen=True)
class RecordedRun:
    """What a bundle's run recorded that a replay needs."""

    seed: int
    options: dict[str, str | None]
    case_files: tuple[Path, ...]

    @classmethod
    def of(cls, run: Run | None) -> RecordedRun:
        if run is None:
            return cls(0, {}, ())
        args = [str(a) for a in run.command.args] if run.command else []
        where = Path(run.command.dir if run.command else ".")
        files = [a.split("=", 1)[1] for a in args if a.startswith("--xtc-cases=")]
        files += [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--xtc-cases"]
        options = {str(k): None if v is None else str(v)
                   for k, v in (run.settings.adapter_options or {}).items()}
        return cls(int(run.settings.seed or 0), options,
                   tuple(where / f for f in files))


class Replay:
    """A bundle's cases rebuilt, and rerun, on this machine; adapters and cases are
    loaded once per target."""

    def __init__(self, report: Report, cases: Iterable[Case] = (),
                 rebuild: Rebuild | None = None) -> None:
        self.report = report
        self.extra = list(cases)
        self.rebuild = rebuild
        self._adapters: dict[str, TargetAdapter | ReplayError] = {}
        self._cases: dict[str, list[Case]] = {}

    def run_of(self, target: str) -> RecordedRun:
        """The target's first run in the bundle (the bundle's first, for a target the
        bundle does not list)."""
        runs = self.report.runs
        entry = self.report.targets.get(target)
        index = entry.runs[0] if entry is not None and entry.runs else 0
        return RecordedRun.of(runs[index] if 0 <= index < len(runs) else
                              (runs[0] if runs else None))

    def settings(self, target: str, base: Settings | None = None) -> Settings:
        """``base`` (default settings) with the run's base seed, timed once, no perf."""
        return replace(base or Settings(), base_seed=self.run_of(target).seed, timing=ONCE,
                       perf=False, peak=False)

    def option_flags(self, target: str) -> list[str]:
        return option_flags(self.run_of(target).options)

    def adapter(self, target: str) -> TargetAdapter:
        """The target's adapter with the recorded options; ReplayError when it cannot be
        had here."""
        if target not in self._adapters:
            try:
                (found,) = registry.resolve(target, self.run_of(target).options)
                self._adapters[target] = found
            except registry.SelectionError as exc:
                self._adapters[target] = ReplayError(f"cannot rerun here: {exc}")
        adapter = self._adapters[target]
        if isinstance(adapter, ReplayError):
            raise adapter
        return adapter

    def known(self, target: str) -> list[Case]:
        """The cases a record of ``target`` may name: the suite's for its declared
        placements, the run's case files', the caller's."""
        if target not in self._cases:
            entry = self.report.targets.get(target)
            caps = capabilities_of(entry) if entry is not None else None
            files = self.run_of(target).case_files
            try:
                from_files = load_case_paths(list(files)) if files else []
            except Exception as exc:  # the files moved, or no longer load
                raise ReplayError(f"cannot rerun here: the run's case files: {exc}") from None
            self._cases[target] = [*suite_cases(caps.placements if caps else ()),
                                   *from_files, *self.extra]
        return self._cases[target]

    def case(self, target: str, case_id: str) -> Case:
        """The record's case, rebuilt; ReplayError when it cannot be."""
        known = self.known(target)
        found = next((c for c in known if c.id == case_id), None)
        if found is None and self.rebuild is not None:
            try:
                found = self.rebuild(case_id, known, self.run_of(target).seed)
            except Exception as exc:
                raise ReplayError(f"cannot rebuild the case: {exc}") from None
        if found is None:
            raise ReplayError("cannot rerun here: not a case of this suite or of the "
                              "bundle's case files")
        return found

    def rerun(self, record: CaseRecord, workdir: Path,
              base: Settings | None = None) -> Outcome:
        """The record's case run again on its target, in ``workdir``/<target>-<case>;
        ReplayError when it cannot be."""
        target, case_id = record.target, record.case
        adapter, case = self.adapter(target), self.case(target, case_id)
        folder = workdir / safe_name(test_id(target, case_id))
        return run_case(adapter, case, folder, self.settings(target, base))
