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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_xtc.report.bundle import (
    FILES,
    KIND,
    SCHEMA,
    UNFINISHED,
    BundleError,
    check_destination,
    finish,
)
from pytest_xtc.report.verdicts import assemble
from pytest_xtc.report.verify import load_verified


def _merge_target(name: str, parts: list[tuple[Path, Mapping[str, Any], int]]) -> dict[str, Any]:
    """One target's entry from the bundles that hold it (path, entry, run offset)."""
    first_path, first, _ = parts[0]
    derived = ("results", "counts", "verdicts", "waived")
    merged = {k: v for k, v in first.items() if k not in derived}
    merged["runs"] = [i + offset for _, e, offset in parts for i in e["runs"]]
    if len(parts) == 1:
        return merged
    indices: list[int] = []
    count = int((first.get("shards") or {}).get("count") or 0)
    for path, entry, _ in parts:
        if entry["case_set"]["sha256"] != first["case_set"]["sha256"]:
            raise BundleError(
                f"case sets of {name} differ between {first_path} and {path}; "
                "merge only runs of the same suite and case files"
            )
        if dict(entry.get("versions") or {}) != dict(first.get("versions") or {}):
            raise BundleError(f"{name} ran with different versions in {first_path} and {path}")
        if entry.get("capabilities") != first.get("capabilities"):
            raise BundleError(
                f"{name} declared different capabilities in {first_path} and {path}"
            )
        shards = entry.get("shards")
        if not shards or not count or shards["count"] != count:
            raise BundleError(
                f"{name} is in {first_path} and {path} but they are not shards "
                "of one run (run each shard with the same --xtc-shard=I/N count)"
            )
        overlap = set(indices) & set(shards["indices"])
        if overlap:
            raise BundleError(f"shard {sorted(overlap)} of {name} is given twice ({path})")
        indices += shards["indices"]
    full = sorted(indices) == list(range(1, count + 1))
    merged["shards"] = None if full else {"count": count, "indices": sorted(indices)}
    return merged


Loaded = tuple[Path, dict[str, Any], list[dict[str, Any]]]

#: Run settings that must be equal in every bundle merged.
SAME_SETTINGS = ("seed", "strict", "ignore_expectations", "cases", "adapter_options",
                 "suite_version", "certifying")


def _settings_difference(
    runs: Sequence[Mapping[str, Any]], first_path: Path, path: Path, new: Sequence[Any]
) -> None:
    """Refuse runs whose settings differ, naming the first difference."""
    if not runs:
        return
    base = runs[0].get("settings") or {}
    for run in new:
        settings = run.get("settings") or {}
        for key in SAME_SETTINGS:
            if settings.get(key) != base.get(key):
                raise BundleError(
                    f"run settings differ: {key} is {base.get(key)!r} in {first_path}, "
                    f"{settings.get(key)!r} in {path}; merge only runs made the same way "
                    "(a certification run never mixes with a development run)"
                )


def merge_reports(bundles: Sequence[Loaded]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The merged report and records; raises BundleError on any mismatch."""
    first_path, first, _ = bundles[0]
    by_target: dict[str, list[tuple[Path, Mapping[str, Any], int]]] = {}
    runs: list[Any] = []
    seen: dict[tuple[str, str], Path] = {}
    records: list[dict[str, Any]] = []
    for path, report, recs in bundles:
        if report["suite"]["version"] != first["suite"]["version"]:
            raise BundleError(
                f"suite versions differ: {report['suite']['version']} in {path}, "
                f"{first['suite']['version']} in {first_path}; merge only "
                "bundles of one suite version"
            )
        if report.get("waivers") != first.get("waivers"):
            raise BundleError(f"waivers differ between {first_path} and {path}")
        _settings_difference([*runs, *report["runs"]], first_path, path, report["runs"])
        for target, entry in report["targets"].items():
            by_target.setdefault(target, []).append((path, entry, len(runs)))
        for record in recs:
            key = (record["target"], record["case"])
            if key in seen:
                raise BundleError(
                    f"case {key[0]}-{key[1]} is in both {seen[key]} and {path}; "
                    "merge each shard once"
                )
            seen[key] = path
            records.append(record)
        runs += report["runs"]
    targets = {t: _merge_target(t, parts) for t, parts in sorted(by_target.items())}
    merged = {
        "schema": SCHEMA,
        "kind": KIND,
        "suite": first["suite"],
        "waivers": first["waivers"],
        "runs": runs,
        "targets": targets,
        "merged_from": [str(p) for p, _, _ in bundles],
    }
    return assemble(merged, records), records


def merge(out: Path, sources: Sequence[Path]) -> dict[str, Any]:
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
