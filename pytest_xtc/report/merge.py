"""Merging bundles of shards or machines into one bundle, all or nothing. No pytest.

Only runs made the same way merge: their settings (:data:`SAME_SETTINGS`: base seed,
strictness, expected-failure files, added case files, adapter options, suite version and
whether the run certifies) must be equal, so a certification shard never joins a
development shard. Every input must verify first.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from pytest_xtc.report.bundle import (
    FILES,
    KIND,
    SCHEMA,
    UNFINISHED,
    BundleError,
    check_destination,
    finish,
)
from pytest_xtc.report.parts.model import Report, Run, Shards, Target
from pytest_xtc.report.parts.records import CaseRecord
from pytest_xtc.report.rules.verdicts import DERIVED, assemble_report
from pytest_xtc.report.verify import load_verified

Part = tuple[Path, Target, int]  # where a target's entry came from, it, its run offset


def _shards(name: str, parts: list[Part]) -> Shards | None:
    """The shards of ``name`` the bundles hold together (None: every one)."""
    first_path, first, _ = parts[0]
    indices: list[int] = []
    count = first.shards.count if first.shards else 0
    for path, entry, _ in parts:
        if entry.case_set.sha256 != first.case_set.sha256:
            raise BundleError(
                f"case sets of {name} differ between {first_path} and {path}; "
                "merge only runs of the same suite and case files"
            )
        if dict(entry.versions or {}) != dict(first.versions or {}):
            raise BundleError(f"{name} ran with different versions in {first_path} and {path}")
        if entry.capabilities != first.capabilities:
            raise BundleError(
                f"{name} declared different capabilities in {first_path} and {path}"
            )
        shards = entry.shards
        if not shards or not count or shards.count != count:
            raise BundleError(
                f"{name} is in {first_path} and {path} but they are not shards "
                "of one run (run each shard with the same --xtc-shard=I/N count)"
            )
        overlap = set(indices) & set(shards.indices)
        if overlap:
            raise BundleError(f"shard {sorted(overlap)} of {name} is given twice ({path})")
        indices += shards.indices
    full = sorted(indices) == list(range(1, count + 1))
    return None if full else Shards(count=count, indices=tuple(sorted(indices)))


def _merge_target(name: str, parts: list[Part]) -> Target:
    """One target's entry from the bundles that hold it, its derived parts left out."""
    first = parts[0][1]
    kept = (frozenset(Target.KEYS) if first.present is None else first.present) - set(DERIVED)
    runs = tuple(i + offset for _, e, offset in parts for i in e.runs)
    merged = replace(first, runs=runs, present=kept)
    if len(parts) == 1:
        return merged
    return replace(merged, shards=_shards(name, parts))


Loaded = tuple[Path, Report, list[CaseRecord]]

#: Run settings that must be equal in every bundle merged.
SAME_SETTINGS = ("seed", "strict", "ignore_expectations", "cases", "adapter_options",
                 "suite_version", "certifying")


def _settings_difference(
    runs: Sequence[Run], first_path: Path, path: Path, new: Sequence[Run]
) -> None:
    """Refuse runs whose settings differ, naming the first difference."""
    if not runs:
        return
    base = runs[0].settings
    for run in new:
        for key in SAME_SETTINGS:
            mine, theirs = getattr(base, key), getattr(run.settings, key)
            if mine != theirs:
                raise BundleError(
                    f"run settings differ: {key} is {_shown(mine)!r} in {first_path}, "
                    f"{_shown(theirs)!r} in {path}; merge only runs made the same way "
                    "(a certification run never mixes with a development run)"
                )


def _shown(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


def _records(bundles: Sequence[Loaded]) -> list[CaseRecord]:
    """Every bundle's records; a case in two bundles is refused."""
    seen: dict[tuple[str, str], Path] = {}
    records = []
    for path, _, recs in bundles:
        for record in recs:
            key = (record.target, record.case)
            if key in seen:
                raise BundleError(
                    f"case {record.key} is in both {seen[key]} and {path}; merge each shard once"
                )
            seen[key] = path
            records.append(record)
    return records


def merge_reports(bundles: Sequence[Loaded]) -> tuple[Report, list[CaseRecord]]:
    """The merged report and records; raises BundleError on any mismatch."""
    first_path, first, _ = bundles[0]
    by_target: dict[str, list[Part]] = {}
    runs: list[Run] = []
    for path, report, _ in bundles:
        if report.suite.version != first.suite.version:
            raise BundleError(
                f"suite versions differ: {report.suite.version} in {path}, "
                f"{first.suite.version} in {first_path}; merge only "
                "bundles of one suite version"
            )
        if report.waivers != first.waivers:
            raise BundleError(f"waivers differ between {first_path} and {path}")
        _settings_difference([*runs, *report.runs], first_path, path, report.runs)
        for target, entry in report.targets.items():
            by_target.setdefault(target, []).append((path, entry, len(runs)))
        runs += report.runs
    records = _records(bundles)
    merged = Report(
        schema=SCHEMA, kind=KIND, suite=first.suite, waivers=first.waivers, runs=tuple(runs),
        targets={t: _merge_target(t, parts) for t, parts in sorted(by_target.items())},
        merged_from=tuple(str(p) for p, _, _ in bundles), present=frozenset({"merged_from"}),
    )
    return assemble_report(merged, records), records


def merge(out: Path, sources: Sequence[Path]) -> Report:
    """Merge the bundles at ``sources`` into a new bundle at ``out`` (all or nothing)."""
    if not sources:
        raise BundleError("nothing to merge: name at least one bundle directory")
    check_destination(out)
    resolved = {p.resolve() for p in sources}
    if out.resolve() in resolved:
        raise BundleError(f"{out} is also an input; write the merged bundle elsewhere")
    if len(resolved) != len(sources):
        raise BundleError("a bundle is named twice; merge each bundle once")
    bundles = [(p, *load_verified(p)) for p in sources]
    report, records = merge_reports(bundles)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        finish(staging, report, records)
        _swap(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return report


def _swap(staging: Path, out: Path) -> None:
    """Put the bundle in ``staging`` at ``out``, replacing a previous bundle there."""
    if not out.exists():
        staging.rename(out)
        return
    for name in (*FILES, UNFINISHED):
        (out / name).unlink(missing_ok=True)
    for name in FILES:
        if (staging / name).is_file():
            os.replace(staging / name, out / name)
