"""The reproducibility audit: re-run cases of a bundle on this machine and compare. No pytest.

A result rebuilt consistently (a failure turned into a pass, every figure recomputed, the
checksums rewritten) verifies statically; it does not survive a rerun of that case.
``xtc-conformance verify --rerun N BUNDLE [--seed S]`` picks N of the bundle's results at
random (seeded, the seed printed, so that anyone can repeat the draw), replays each one
here (:mod:`pytest_xtc.report.replay`: its target from the registry with the bundle's
adapter options, its case with the run's base seed), and compares:

- the status (passed, failed, not-supported...), always;
- the input seed the case derived, when the bundle recorded one;
- the digest of the output arrays (``output_digest``, SHA-256 of their bytes) when both
  the bundle and this run have one, the adapter does not declare itself
  non-deterministic (``deterministic = False``), and this machine has the bundle's CPU
  model and architecture. Elsewhere results may differ in their last bits within the
  error bound, and the status alone is compared.

Every difference is one line; a case that cannot be rerun here (target not installed or
unavailable, a case neither the suite nor the run's case files hold) is one too.
"""

from __future__ import annotations

import platform
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_xtc.core.cases.identity import test_id
from pytest_xtc.report.parts.environment import cpu_model
from pytest_xtc.report.parts.model import Report
from pytest_xtc.report.parts.records import CaseRecord
from pytest_xtc.report.replay import Replay, ReplayError


@dataclass
class Audit:
    """What a rerun found: the cases rerun, every mismatch, how many digests compared."""

    seed: int
    chosen: list[tuple[str, str]] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    digests_compared: int = 0


def choose(records: Sequence[CaseRecord], count: int, seed: int) -> list[CaseRecord]:
    """``count`` records drawn at random with ``seed`` (all when there are fewer)."""
    ordered = sorted(records, key=lambda r: (r.target, r.case))
    return random.Random(seed).sample(ordered, min(count, len(ordered)))


def _same_machine(report: Report, target: str) -> bool:
    systems = [run.system or {} for run in report.runs_of(target)]
    return all(
        s.get("cpu") == cpu_model() and s.get("machine") == platform.machine() for s in systems
    )


def audit(
    report: Report,
    records: Sequence[CaseRecord],
    count: int,
    seed: int,
    workdir: Path,
) -> Audit:
    """Rerun ``count`` randomly chosen results of a verified bundle (module docstring)."""
    found = Audit(seed)
    replay = Replay(report)
    for record in choose(records, count, seed):
        target, case_id = record.target, record.case
        found.chosen.append((target, case_id))
        name = test_id(target, case_id)
        try:
            outcome = replay.rerun(record, workdir)
        except ReplayError as exc:
            found.mismatches.append(f"{name}: {exc}")
            continue
        status = outcome.status.value
        if status != record.status:
            why = f" [{outcome.phase}]: {outcome.message[:300]}" if outcome.message else ""
            found.mismatches.append(
                f"{name}: the bundle says {record.status}, the rerun gives {status}{why}"
            )
            continue
        if record.seed is not None and outcome.seed is not None and record.seed != outcome.seed:
            found.mismatches.append(
                f"{name}: the bundle's input seed {record.seed} is not the case's "
                f"({outcome.seed} from base seed {replay.run_of(target).seed})"
            )
        mine, theirs = outcome.output_digest, record.output_digest
        if (mine and theirs and getattr(replay.adapter(target), "deterministic", True)
                and _same_machine(report, target)):
            found.digests_compared += 1
            if mine != theirs:
                found.mismatches.append(
                    f"{name}: output digest differs (bundle {str(theirs)[:16]}..., "
                    f"rerun {str(mine)[:16]}...): not the outputs this target computes"
                )
    return found
