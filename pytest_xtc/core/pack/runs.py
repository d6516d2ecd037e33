"""One results folder from several runs of a pack's runner (a pack run in several device
calls, each with ``--only`` the cases the ones before did not run). No pytest, no XTC.

Each run is checked as the judge checks one (:class:`~pytest_xtc.core.pack.results.PackResults`:
this pack, its own runner version and files), each case's result against the digest its
run recorded; runs that ran one case twice are refused (which result would count is not
for a merge to choose). The merged ``run.json`` names every run it came from.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from pytest_xtc.core.pack import device_runner as runner
from pytest_xtc.core.pack.results import PackResults
from pytest_xtc.core.pack.writer import PackError

Json = dict[str, Any]


def merge_runs(pack: Path, runs: list[Path], into: Path) -> Json:
    """The results of ``runs`` (folders the runner wrote for ``pack``) as one, in ``into``
    (new or empty); the merged run record."""
    if into.exists() and (not into.is_dir() or any(into.iterdir())):
        raise PackError(f"{into}: exists and is not an empty folder (give a new one)")
    checked = [PackResults(pack, run) for run in runs]
    owner: dict[str, Path] = {}  # case key -> the results folder that ran it
    digests: dict[str, str] = {}
    for results in checked:
        for key, digest in results.run["cases"].items():
            if key in owner:
                raise PackError(f"{key}: run by both {owner[key]} and {results.results} "
                                "(merge runs of disjoint cases)")
            path = results.results / key / runner.RESULT
            if not path.is_file() or runner.sha256(path) != digest:
                raise PackError(f"{path}: not the result its run recorded (edited or truncated)")
            owner[key], digests[key] = results.results, digest
    first = checked[0].run
    packed = [k for k, c in checked[0].manifest["cases"].items() if c.get("packed")]
    into.parent.mkdir(parents=True, exist_ok=True)
    # written beside ``into``, renamed into place once whole: a copy failing midway (a full
    # disk) leaves no half-filled results folder that a judge could read
    partial = into.with_name(f".{into.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)  # a merge killed before (its pid reused)
    partial.mkdir()
    try:
        merged = _write(partial, owner, digests, checked, first, packed)
        if into.exists():
            into.rmdir()  # empty (checked above)
        partial.rename(into)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return merged


def _write(folder: Path, owner: dict[str, Path], digests: dict[str, str],
           checked: list[PackResults], first: Json, packed: list[str]) -> Json:
    """The merged results and run record, written into ``folder``."""
    for key, source in owner.items():
        shutil.copytree(source / key, folder / key)
    merged: Json = {
        "format": runner.FORMAT, "runner_version": first["runner_version"],
        "pack_id": first["pack_id"], "runner_sha256": first["runner_sha256"],
        "cases": digests,
        "not_run": [k for k in packed if k not in owner],
        "seconds": sum(float(r.run.get("seconds", 0.0)) for r in checked),
        "jobs": max(int(r.run.get("jobs", 1)) for r in checked),
        "python": first.get("python"), "numpy": first.get("numpy"),
        "merged_from": [{"results": str(r.results), "cases": len(r.run["cases"]),
                         "seconds": r.run.get("seconds"), "python": r.run.get("python"),
                         "numpy": r.run.get("numpy")} for r in checked],
    }
    (folder / runner.RUN).write_text(json.dumps(merged, indent=1))
    return merged
