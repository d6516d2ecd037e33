"""Result bundles: write, load, verify and merge them. No pytest.

A bundle is a directory of four files:

``results.jsonl``
    One JSON object per finished case, written and fsync'd as each case ends, so a killed
    run keeps what finished: the runner's Outcome fields (case, target, status, phase,
    message, tier, seed, worst_ratio, compile_s, run_s, times, and any later field such
    as ``perf``) plus nodeid, pytest_outcome and duration.
``report.json``
    ``schema``, ``kind``, ``suite`` (name, version), ``case_set`` (sha256 and count over
    every ``<target>\\t<case id>``), ``waivers`` (the suite's, echoed), ``profiles``,
    ``runs`` (each: command, system, settings, filters, shard, exit status), ``targets``
    (each: tier, reason, versions, device, placements, the runs it came from, its case set
    with the profile of every case, shards, counts, verdicts, waived, results) and
    ``totals``.
``summary.md``
    The same for people (CI job summaries).
``MANIFEST.sha256``
    ``sha256sum`` lines over the three others; written last.
"""

from __future__ import annotations

import copy
import enum
import hashlib
import json
import math
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_xtc.report import chart as plot
from pytest_xtc.report import summary
from pytest_xtc.report.verdicts import PROFILES, judge, waivers_from

SCHEMA = 1
KIND = "xtc-conformance-bundle"
RESULTS, REPORT, SUMMARY, MANIFEST = "results.jsonl", "report.json", "summary.md", "MANIFEST.sha256"
CONTENT = (RESULTS, REPORT, SUMMARY)


class BundleError(Exception):
    """A bundle that cannot be used; the message is one line naming the problem (and the
    bundle, when ``path`` is given; ``problem`` is the message without it)."""

    def __init__(self, problem: str, path: Path | None = None) -> None:
        super().__init__(f"{path}: {problem}" if path is not None else problem)
        self.problem = problem


# -- Writing ----------------------------------------------------------------------------


def is_bundle(path: Path) -> bool:
    return (path / MANIFEST).is_file() or (path / RESULTS).is_file()


def check_destination(path: Path) -> None:
    """Refuse a destination that holds something other than a bundle."""
    if path.exists() and not path.is_dir():
        raise BundleError(f"{path} exists and is not a directory; choose a new directory")
    if path.is_dir() and any(path.iterdir()) and not is_bundle(path):
        raise BundleError(
            f"{path} is not empty and holds no XTC conformance bundle; "
            "choose an empty or new directory (an existing bundle is replaced)"
        )


def prepare(path: Path) -> None:
    """Make ``path`` ready for a new bundle, removing the files of a previous one."""
    check_destination(path)
    path.mkdir(parents=True, exist_ok=True)
    for name in (*CONTENT, plot.PLOT, MANIFEST):
        (path / name).unlink(missing_ok=True)


def clean(value: Any) -> Any:
    """Plain JSON data: non-finite floats become strings, tuples lists, enums and numpy
    scalars their values, anything else its str()."""
    if value is None or type(value) in (str, bool, int):
        return value
    if isinstance(value, enum.Enum):
        return clean(value.value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        return clean(value.item())
    return str(value)


def dumps_line(record: Mapping[str, Any]) -> str:
    return json.dumps(clean(record), sort_keys=True, allow_nan=False) + "\n"


class ResultsWriter:
    """Appends one line per finished case to ``results.jsonl``, durably."""

    def __init__(self, path: Path) -> None:
        self._file = (path / RESULTS).open("w", encoding="utf-8")

    def write(self, record: Mapping[str, Any]) -> None:
        self._file.write(dumps_line(record))
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's 0600 is for secrets; a bundle is for sharing
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def finish(
    path: Path, report: dict[str, Any], records: Sequence[Mapping[str, Any]] | None = None
) -> None:
    """Write report.json, summary.md (and results.jsonl when given), then the manifest."""
    if records is not None:
        _atomic_write(path / RESULTS, "".join(dumps_line(r) for r in records))
    _atomic_write(path / REPORT, json.dumps(clean(report), indent=1, sort_keys=True) + "\n")
    _atomic_write(path / SUMMARY, summary.render(report))
    if records is None:
        records = [json.loads(line) for line in (path / RESULTS).read_text().splitlines()]
    chart = plot.render(records)
    (path / plot.PLOT).unlink(missing_ok=True)
    if chart is not None:
        _atomic_write(path / plot.PLOT, chart)
    names = [*CONTENT, *([plot.PLOT] if chart is not None else [])]
    _atomic_write(path / MANIFEST, "".join(f"{sha256_file(path / n)}  {n}\n" for n in names))


# -- Case sets, shards, verdicts -----------------------------------------------------------


def ids_hash(ids: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()


def case_set_hash(targets: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    keys = [f"{t}\t{c['id']}" for t, e in targets.items() for c in e["case_set"]["cases"]]
    return {"sha256": ids_hash(keys), "count": len(keys)}


def target_case_set(cases: Sequence[tuple[str, str, str]]) -> dict[str, Any]:
    """A target's case set from (case id, profile, op) triples, in suite order."""
    ids = [c[0] for c in cases]
    return {
        "sha256": ids_hash(ids), "count": len(ids),
        "cases": [{"id": i, "profile": p, "op": op} for i, p, op in cases],
    }


def shard_of(key: str, count: int) -> int:
    """The shard (1..count) of a case key ``<target>-<case id>``: stable everywhere."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % count + 1


def required(target: str, entry: Mapping[str, Any]) -> dict[str, str]:
    """Case id -> profile of the cases this bundle must hold for ``target``."""
    shards = entry.get("shards")
    return {
        c["id"]: c["profile"] for c in entry["case_set"]["cases"]
        if not shards or shard_of(f"{target}-{c['id']}", shards["count"]) in shards["indices"]
    }


def run_problems(report: Mapping[str, Any], target: str) -> list[str]:
    """Why the runs behind ``target`` cannot certify it, whatever the results."""
    entry = report["targets"][target]
    problems = []
    for index in entry["runs"]:
        run = report["runs"][index]
        if run.get("filters"):
            problems.append("filtered run (" + "; ".join(run["filters"]) + "): "
                            "a filtered run cannot be conformant")
        if run.get("interrupted"):
            problems.append(f"run interrupted ({run['interrupted']})")
    shards = entry.get("shards")
    if shards:
        have = ", ".join(map(str, shards["indices"]))
        problems.append(f"partial bundle: shard {have} of {shards['count']} only; "
                        "merge every shard (xtc-conformance merge) for a verdict")
    return problems


def _order(entry: Mapping[str, Any]) -> dict[str, int]:
    return {c["id"]: i for i, c in enumerate(entry["case_set"]["cases"])}


def record_key(record: Mapping[str, Any]) -> str:
    return json.dumps(record, sort_keys=True)


def assemble(report: dict[str, Any], records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Fill ``report`` (targets' results, counts, verdicts; totals; case set hash) from
    the records; a record of a target the report does not know is left out."""
    waivers = waivers_from(report.get("waivers"), "report.json waivers")
    mine: dict[str, list[Mapping[str, Any]]] = {t: [] for t in report["targets"]}
    for record in records:
        mine.setdefault(str(record.get("target")), []).append(record)
    totals: Counter[str] = Counter()
    for target, entry in report["targets"].items():
        order = _order(entry)
        results = sorted(mine[target], key=lambda r: (order.get(r["case"], len(order)),
                                                      record_key(r)))
        judgement = judge(target, required(target, entry), results, waivers,
                          run_problems(report, target))
        entry.update(judgement.to_dict(), results=[clean(r) for r in results])
        totals.update(judgement.counts)
    report["totals"] = dict(totals)
    report["case_set"] = case_set_hash(report["targets"])
    report["profiles"] = dict(PROFILES)
    return report


# -- Reading and verifying -------------------------------------------------------------


def _read_manifest(path: Path) -> dict[str, str]:
    manifest: dict[str, str] = {}
    for n, line in enumerate((path / MANIFEST).read_text().splitlines(), 1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            raise BundleError(f"{MANIFEST}: line {n} is not 'sha256  file'")
        manifest[name] = digest
    return manifest


def load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    """The report, the records and the integrity problems (checksums) of a bundle.
    Raises BundleError (naming ``path``) when it cannot be read at all."""
    try:
        return _load(path)
    except BundleError as exc:
        raise BundleError(exc.problem, path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BundleError(f"cannot read: {exc}", path) from None


def _load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    if not path.is_dir():
        raise BundleError("no such bundle directory")
    if not is_bundle(path):
        raise BundleError(f"not an XTC conformance bundle (no {MANIFEST}, no {RESULTS})")
    if not (path / MANIFEST).is_file():
        raise BundleError(f"incomplete bundle, {MANIFEST} missing (the run ended "
                          "before writing it: killed?); rerun it")
    problems = []
    manifest = _read_manifest(path)
    if (path / plot.PLOT).is_file() and plot.PLOT not in manifest:
        problems.append(f"{MANIFEST} does not list {plot.PLOT}")
    for name in (*CONTENT, *(n for n in manifest if n not in CONTENT)):
        if name not in manifest:
            problems.append(f"{MANIFEST} does not list {name}")
        elif not (path / name).is_file():
            raise BundleError(f"{name} missing; the bundle is incomplete")
        elif sha256_file(path / name) != manifest[name]:
            problems.append(f"{name}: checksum mismatch (changed after the run was written)")
    try:
        report = json.loads((path / REPORT).read_text())
    except (OSError, ValueError) as exc:
        raise BundleError(f"{REPORT}: not JSON ({exc}); the bundle is damaged") from None
    if not isinstance(report, dict) or report.get("kind") != KIND:
        raise BundleError(f"{REPORT}: not an XTC conformance report")
    if report.get("schema") != SCHEMA:
        raise BundleError(f"{REPORT}: schema {report.get('schema')!r}, this tool "
                          f"reads schema {SCHEMA}; use the pytest-xtc version that wrote it")
    records = []
    for n, line in enumerate((path / RESULTS).read_text().splitlines(), 1):
        try:
            record = json.loads(line)
        except ValueError:
            raise BundleError(f"{RESULTS}: line {n} is not JSON (truncated or "
                              "damaged); rerun") from None
        if not isinstance(record, dict) or not {"target", "case", "status"} <= set(record):
            raise BundleError(f"{RESULTS}: line {n} is not a case result")
        records.append(record)
    return report, records, problems


def _complete(report: Mapping[str, Any], target: str) -> bool:
    """True when every required case of ``target`` should have a result."""
    entry = report["targets"][target]
    runs = [report["runs"][i] for i in entry["runs"]]
    return not any(r.get("filters") or r.get("interrupted") for r in runs)


def check(report: dict[str, Any], records: list[dict[str, Any]]) -> list[str]:
    """Internal consistency: results vs report, recomputed counts and verdicts,
    completeness against the recorded case set."""
    problems = []
    try:
        fresh = assemble(copy.deepcopy(report), records)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        return [f"{REPORT}: malformed ({type(exc).__name__}: {exc})"]
    for target in sorted({str(r["target"]) for r in records} - set(report["targets"])):
        problems.append(f"{RESULTS}: results for target {target} which the report lacks")
    if fresh["case_set"] != report.get("case_set"):
        problems.append(f"{REPORT}: case set hash does not match the cases it lists")
    if fresh["totals"] != report.get("totals"):
        problems.append(f"{REPORT}: totals differ from the results")
    for target, entry in report["targets"].items():
        new = fresh["targets"][target]
        if entry["case_set"]["sha256"] != ids_hash(c["id"] for c in entry["case_set"]["cases"]):
            problems.append(f"{target}: case set hash does not match its cases")
        if sorted(map(record_key, entry["results"])) != sorted(map(record_key, new["results"])):
            problems.append(f"{target}: results in {REPORT} differ from {RESULTS}")
        for field in ("counts", "verdicts", "waived"):
            if entry.get(field) != new[field]:
                problems.append(f"{target}: {field} in {REPORT} differ from those recomputed "
                                f"from {RESULTS}")
        counts = new["counts"]
        if counts["extra"]:
            problems.append(f"{target}: {counts['extra']} results for cases outside its case "
                            "set (or its shard)")
        if counts["duplicate"]:
            problems.append(f"{target}: {counts['duplicate']} duplicated case results")
        if counts["missing"] and _complete(report, target):
            problems.append(f"{target}: {counts['missing']} required cases have no result "
                            "although the run was neither filtered nor interrupted")
    return problems


def verify(path: Path) -> list[str]:
    """Every problem of the bundle at ``path``, one line each; empty when it is sound."""
    try:
        report, records, problems = load(path)
    except BundleError as exc:
        return [exc.problem]
    problems += check(report, records)
    if not problems and (path / SUMMARY).read_text() != summary.render(report):
        problems.append(f"{SUMMARY} does not match {REPORT}")
    return problems


def load_verified(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    problems = verify(path)
    if problems:
        raise BundleError(f"{path}: does not verify: {problems[0]} "
                          f"(see xtc-conformance verify {path})")
    report, records, _ = load(path)
    return report, records


# -- Merging ---------------------------------------------------------------------------


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
            raise BundleError(f"case sets of {name} differ between {first_path} and {path}; "
                              "merge only runs of the same suite and case files")
        if dict(entry.get("versions") or {}) != dict(first.get("versions") or {}):
            raise BundleError(f"{name} ran with different versions in {first_path} and {path}")
        shards = entry.get("shards")
        if not shards or not count or shards["count"] != count:
            raise BundleError(f"{name} is in {first_path} and {path} but they are not shards "
                              "of one run (run each shard with the same --xtc-shard=I/N count)")
        overlap = set(indices) & set(shards["indices"])
        if overlap:
            raise BundleError(f"shard {sorted(overlap)} of {name} is given twice ({path})")
        indices += shards["indices"]
    full = sorted(indices) == list(range(1, count + 1))
    merged["shards"] = None if full else {"count": count, "indices": sorted(indices)}
    return merged


Loaded = tuple[Path, dict[str, Any], list[dict[str, Any]]]


def merge_reports(bundles: Sequence[Loaded]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The merged report and records; raises BundleError on any mismatch."""
    first_path, first, _ = bundles[0]
    by_target: dict[str, list[tuple[Path, Mapping[str, Any], int]]] = {}
    runs: list[Any] = []
    seen: dict[tuple[str, str], Path] = {}
    records: list[dict[str, Any]] = []
    for path, report, recs in bundles:
        if report["suite"]["version"] != first["suite"]["version"]:
            raise BundleError(f"suite versions differ: {report['suite']['version']} in {path}, "
                              f"{first['suite']['version']} in {first_path}; merge only "
                              "bundles of one suite version")
        if report.get("waivers") != first.get("waivers"):
            raise BundleError(f"waivers differ between {first_path} and {path}")
        seeds = {r["settings"].get("seed") for r in [*runs, *report["runs"]]}
        if len(seeds) > 1:
            raise BundleError(f"base seeds differ ({sorted(map(str, seeds))}) in {path}; "
                              "rerun with the same --xtc-seed")
        for target, entry in report["targets"].items():
            by_target.setdefault(target, []).append((path, entry, len(runs)))
        for record in recs:
            key = (record["target"], record["case"])
            if key in seen:
                raise BundleError(f"case {key[0]}-{key[1]} is in both {seen[key]} and {path}; "
                                  "merge each shard once")
            seen[key] = path
            records.append(record)
        runs += report["runs"]
    targets = {t: _merge_target(t, parts) for t, parts in sorted(by_target.items())}
    merged = {
        "schema": SCHEMA, "kind": KIND, "suite": first["suite"], "waivers": first["waivers"],
        "runs": runs, "targets": targets, "merged_from": [str(p) for p, _, _ in bundles],
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
    for name in (*CONTENT, plot.PLOT, MANIFEST):
        (out / name).unlink(missing_ok=True)
    for name in (*CONTENT, plot.PLOT, MANIFEST):
        if (staging / name).is_file():
            os.replace(staging / name, out / name)
