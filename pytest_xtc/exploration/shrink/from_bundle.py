"""Shrinking a report bundle's failures (``xtc-conformance shrink BUNDLE``). No pytest."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pytest_xtc.core.cases.case import Case
from pytest_xtc.core.execution.settings import Settings
from pytest_xtc.core.outcome import Outcome, Status
from pytest_xtc.exploration import explore, fuzz
from pytest_xtc.exploration.shrink.search import Budget, Result, shrink
from pytest_xtc.report import bundle
from pytest_xtc.report.parts.records import CaseRecord
from pytest_xtc.report.replay import Replay, ReplayError


def shrink_bundle(
    bundle_dir: Path,
    out_dir: Path,
    cases: Iterable[Case] | None = None,
    budget: Budget | None = None,
    settings: Settings | None = None,
) -> list[Result]:
    """Shrink every failed case of a report bundle. Each case is rebuilt from its record
    as :mod:`pytest_xtc.report.replay` does (the suite, the run's case files, ``cases``;
    an explored or fuzz one regenerated from its id) and shrunk on its target with the run's base
    seed and adapter options. A case that cannot be rebuilt gets a Result saying why."""
    report, records, _ = bundle.read(Path(bundle_dir))
    replay = Replay(report, cases or (), rebuild=lambda case_id, known, seed: (
        explore.rebuild(case_id, known, seed) or fuzz.rebuild(case_id)))
    return [_shrink_record(replay, record, Path(out_dir), budget or Budget(), settings)
            for record in records if record.status == Status.FAILED.value]


def _shrink_record(replay: Replay, record: CaseRecord, out_dir: Path, budget: Budget,
                   settings: Settings | None) -> Result:
    case_id, target = record.case, record.target
    try:
        outcome = Outcome.from_dict(record.to_dict())
        case = replay.case(target, case_id)
        adapter = replay.adapter(target)
    except (ReplayError, ValueError) as exc:
        return Result(case_id, target, None, False, "", notes=[str(exc)])
    return shrink(adapter, case, outcome, out_dir, replay.settings(target, settings), budget,
                  replay.option_flags(target))
