"""Result bundles on disk: write them, read them back. No pytest.

A bundle is a directory of four files (and ``perf.svg`` when performance was recorded):

``results.jsonl``
    One JSON object per finished case, written and fsync'd as each case ends, so a killed
    run keeps what finished: the runner's Outcome fields (case, target, status, phase,
    message, tier, seed, worst_ratio, compile_s, run_s, times, and any later field such
    as ``perf``) plus nodeid, pytest_outcome and duration.
``report.json``
    ``schema``, ``kind``, ``suite`` (name, version), ``case_set`` (sha256 and count over
    every ``<target>\\t<case id>``), ``waivers`` (the suite's, echoed), ``profiles``,
    ``runs`` (each: command, system, settings with ``certifying``, filters, shard, exit
    status), ``targets`` (each: tier, reason, versions, device, placements, declared
    capabilities, adapter distribution and options, the runs it came from, its case set
    with the profile and traits of every case, shards, counts, verdicts, waived, results),
    ``totals``, ``waivers_used``, ``certifies`` and ``not_certifying``.

Reading a bundle goes through :mod:`pytest_xtc.report.limits` (names confined to the
bundle, no links, sizes and JSON nesting capped).
``summary.md``
    The same for people (CI job summaries).
``MANIFEST.sha256``
    ``sha256sum`` lines over the three others; written last.
"""

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_xtc.report import limits, summary
from pytest_xtc.report.formats import FORMATS
from pytest_xtc.report.records import RESULTS, atomic_write, clean, dumps_line, sha256_file

SCHEMA = 2
KIND = "xtc-conformance-bundle"
REPORT, MANIFEST = "report.json", "MANIFEST.sha256"
SUMMARY = summary.NAME
#: The files every bundle holds, and every file a bundle may hold.
CONTENT = (RESULTS, REPORT, *(f.name for f in FORMATS if f.required))
FILES = (RESULTS, REPORT, *(f.name for f in FORMATS), MANIFEST)


class BundleError(Exception):
    """A bundle that cannot be used; the message is one line naming the problem (and the
    bundle, when ``path`` is given; ``problem`` is the message without it)."""

    def __init__(self, problem: str, path: Path | None = None) -> None:
        super().__init__(f"{path}: {problem}" if path is not None else problem)
        self.problem = problem


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
    for name in FILES:
        (path / name).unlink(missing_ok=True)


def finish(
    path: Path, report: dict[str, Any], records: Sequence[Mapping[str, Any]] | None = None
) -> None:
    """Write report.json (and results.jsonl when given), each format, then the manifest."""
    if records is not None:
        atomic_write(path / RESULTS, "".join(dumps_line(r) for r in records))
    atomic_write(path / REPORT, json.dumps(clean(report), indent=1, sort_keys=True) + "\n")
    if records is None:
        records = [json.loads(line) for line in (path / RESULTS).read_text().splitlines()]
    names = [RESULTS, REPORT]
    for form in FORMATS:
        text = form.render(report, records)
        (path / form.name).unlink(missing_ok=True)
        if text is not None:
            atomic_write(path / form.name, text)
            names.append(form.name)
    atomic_write(path / MANIFEST, "".join(f"{sha256_file(path / n)}  {n}\n" for n in names))


def _read_manifest(path: Path) -> dict[str, str]:
    manifest: dict[str, str] = {}
    for n, line in limits.lines(path, MANIFEST):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            raise BundleError(f"{MANIFEST}: line {n} is not 'sha256  file'")
        limits.check_name(name)
        manifest[name] = digest
    return manifest


def load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    """The report, the records and the integrity problems (checksums) of a bundle.
    Raises BundleError (naming ``path``) when it cannot be read at all, or breaks one of
    the reading limits (:mod:`pytest_xtc.report.limits`)."""
    try:
        return _load(path)
    except BundleError as exc:
        raise BundleError(exc.problem, path) from None
    except limits.LimitError as exc:
        raise BundleError(f"refused: {exc}", path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BundleError(f"cannot read: {exc}", path) from None


def _load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    if not path.is_dir():
        raise BundleError("no such bundle directory")
    if not (limits.exists(path, MANIFEST) or limits.exists(path, RESULTS)):
        raise BundleError(f"not an XTC conformance bundle (no {MANIFEST}, no {RESULTS})")
    if not limits.exists(path, MANIFEST):
        raise BundleError(
            f"incomplete bundle, {MANIFEST} missing (the run ended "
            "before writing it: killed?); rerun it"
        )
    problems = []
    manifest = _read_manifest(path)
    for form in FORMATS:
        if limits.exists(path, form.name) and form.name not in manifest:
            problems.append(f"{MANIFEST} does not list {form.name}")
    for name in (*CONTENT, *(n for n in manifest if n not in CONTENT)):
        if name not in manifest:
            problems.append(f"{MANIFEST} does not list {name}")
        elif not limits.exists(path, name):
            raise BundleError(f"{name} missing; the bundle is incomplete")
        elif limits.sha256(path, name) != manifest[name]:
            problems.append(f"{name}: checksum mismatch (changed after the run was written)")
    try:
        report = limits.loads(limits.read_text(path, REPORT), REPORT)
    except ValueError as exc:
        if isinstance(exc, limits.LimitError):
            raise
        raise BundleError(f"{REPORT}: not JSON ({exc}); the bundle is damaged") from None
    if not isinstance(report, dict) or report.get("kind") != KIND:
        raise BundleError(f"{REPORT}: not an XTC conformance report")
    if report.get("schema") != SCHEMA:
        raise BundleError(
            f"{REPORT}: schema {report.get('schema')!r}, this tool "
            f"reads schema {SCHEMA}; use the pytest-xtc version that wrote it"
        )
    records = []
    for n, line in limits.lines(path, RESULTS):
        try:
            record = limits.loads(line, f"{RESULTS}: line {n}")
        except ValueError as exc:
            if isinstance(exc, limits.LimitError):
                raise
            raise BundleError(
                f"{RESULTS}: line {n} is not JSON (truncated or damaged); rerun"
            ) from None
        if not isinstance(record, dict) or not {"target", "case", "status"} <= set(record):
            raise BundleError(f"{RESULTS}: line {n} is not a case result")
        records.append(record)
    return report, records, problems


def read_text(path: Path, name: str) -> str:
    """A bundle file's text, within the reading limits."""
    return limits.read_text(path, name)
