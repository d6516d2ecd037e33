"""Profiles, waivers and verdicts: is a target conformant? No pytest.

A target is conformant to a profile when every required case of the profile has exactly
one result, and each is passed, not-supported (the adapter declares the capability absent)
or failed but waived by the suite's own waiver file. A skip (the target cannot run here)
is not a pass; neither is an expected failure from a target's expectation file. A
filtered, interrupted or partial (one shard) run is never conformant.
"""

from __future__ import annotations

import fnmatch
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pytest_xtc.core import graphs
from pytest_xtc.core.cases import DEVICE, Case

CORE, DEVICE_MEMORY, EXTENDED = "core", "device-memory", "extended"
PROFILES: dict[str, str] = {
    CORE: "float32, host operands, every op, small and medium shapes",
    DEVICE_MEMORY: "operands in device memory (targets declaring device placement)",
    EXTENDED: "float64, multi-op graphs (matmul+relu, conv2d+relu, mlp), large shapes",
}
CONFORMANT, NOT_CONFORMANT, NOT_APPLICABLE = "conformant", "not conformant", "not applicable"
#: A case whose operands hold more elements than this, all together, is "large".
LARGE_ELEMENTS = 1 << 16
#: Ops that only frame another op (conv2d pads its input) do not make a graph multi-op.
FRAMING_OPS = frozenset({"pad", "pad2d", "unpad"})
STATUSES = ("passed", "failed", "skipped", "not-supported")


def elements(case: Case) -> int:
    operands = [*graphs.inputs(case.graph), *graphs.outputs(case.graph)]
    return sum(math.prod(o.shape) for o in operands)


def profile_of(case: Case) -> str:
    """The one profile a case belongs to: device memory first, then extended, else core."""
    if case.placement and DEVICE in case.placement.values():
        return DEVICE_MEMORY
    multi_op = len(set(case.ops) - FRAMING_OPS) > 1
    if case.dtype != "float32" or multi_op or elements(case) > LARGE_ELEMENTS:
        return EXTENDED
    return CORE


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


@dataclass
class Judgement:
    """One target's counts, verdict per profile, and the waivers that applied."""

    counts: dict[str, int]
    verdicts: dict[str, dict[str, Any]]
    waived: dict[str, str] = field(default_factory=dict)  # case id -> waiver pattern

    def to_dict(self) -> dict[str, Any]:
        return {"counts": self.counts, "verdicts": self.verdicts, "waived": self.waived}


def _examples(ids: Sequence[str], n: int = 3) -> str:
    shown = ", ".join(ids[:n])
    return shown + (f", ... ({len(ids) - n} more)" if len(ids) > n else "")


def _profile_verdict(
    required: Sequence[str], by_case: Mapping[str, list[Mapping[str, Any]]],
    waived: Mapping[str, str], run_problems: Sequence[str],
) -> dict[str, Any]:
    if not required:
        return {"verdict": NOT_APPLICABLE, "required": 0, "reasons": ["no required case"]}
    missing = [c for c in required if c not in by_case]
    duplicated = [c for c in required if len(by_case.get(c, ())) > 1]
    single = {c: by_case[c][0] for c in required if len(by_case.get(c, ())) == 1}
    skipped = [c for c, r in single.items() if r["status"] == "skipped"]
    failed = [c for c, r in single.items() if r["status"] == "failed" and c not in waived]
    odd = [c for c, r in single.items() if r["status"] not in STATUSES]
    reasons = list(run_problems)
    if missing:
        reasons.append(f"{len(missing)} required cases have no result: {_examples(missing)}")
    if duplicated:
        reasons.append(f"{len(duplicated)} cases have more than one result: "
                       f"{_examples(duplicated)}")
    if skipped:
        why = Counter(single[c].get("message", "") for c in skipped).most_common(1)[0][0]
        reasons.append(f"{len(skipped)} required cases skipped (a skip is not a pass), "
                       f"e.g. {skipped[0]}: {why}")
    if failed:
        xfailed = sum(single[c].get("pytest_outcome") == "xfailed" for c in failed)
        note = f" ({xfailed} listed as expected failures, which do not count)" if xfailed else ""
        first = single[failed[0]]
        reasons.append(f"{len(failed)} cases failed{note}, e.g. {failed[0]} "
                       f"[{first.get('phase')}]: {str(first.get('message', ''))[:200]}")
    if odd:
        reasons.append(f"{len(odd)} results have an unknown status: {_examples(odd)}")
    verdict = NOT_CONFORMANT if reasons else CONFORMANT
    return {"verdict": verdict, "required": len(required), "reasons": reasons}


def judge(
    target: str,
    required: Mapping[str, str],
    results: Iterable[Mapping[str, Any]],
    waivers: Sequence[Waiver],
    run_problems: Sequence[str] = (),
) -> Judgement:
    """Counts and verdicts of one target. ``required``: case id -> profile of every case
    this bundle must hold; ``run_problems``: why the run itself cannot certify."""
    by_case: dict[str, list[Mapping[str, Any]]] = {}
    for result in results:
        by_case.setdefault(str(result["case"]), []).append(result)
    waived = {}
    for case_id, found in by_case.items():
        if len(found) == 1 and found[0]["status"] == "failed":
            waiver = next((w for w in waivers if w.matches(target, case_id)), None)
            if waiver is not None:
                waived[case_id] = waiver.pattern
    counts = dict.fromkeys([*STATUSES, "waived", "xfailed", "missing", "duplicate", "extra"], 0)
    for case_id, found in by_case.items():
        for result in found:
            status = "waived" if case_id in waived else str(result["status"])
            counts[status] = counts.get(status, 0) + 1
            counts["xfailed"] += result.get("pytest_outcome") == "xfailed"
        counts["duplicate"] += len(found) - 1
        counts["extra"] += case_id not in required
    counts["missing"] = sum(c not in by_case for c in required)
    verdicts = {
        profile: _profile_verdict(
            [c for c, p in required.items() if p == profile], by_case, waived, run_problems
        )
        for profile in PROFILES
    }
    return Judgement(counts, verdicts, waived)
