"""Result bundles on disk: write them, read them back. No pytest.

A bundle is a directory of six files (five when no performance was recorded: no
``perf.svg``):

``results.jsonl``
    One JSON object per finished case (:class:`~pytest_xtc.report.parts.records.CaseRecord`),
    written whole as each case ends, so a killed run keeps what finished (synced to disk
    within a second: :class:`~pytest_xtc.report.files.atomic.LineAppender`).
``report.json``
    The report (:class:`~pytest_xtc.report.parts.model.Report`: suite, runs, targets with
    their verdicts per profile, totals, whether it certifies).

Reading a bundle goes through :mod:`pytest_xtc.report.files.untrusted` (names confined to the
bundle, no links, sizes and JSON nesting capped), then the schema (:mod:`.schema`: an
unknown or missing key is refused, naming the file and the key).
``summary.md``
    The same for people (CI job summaries).
``perf.svg``, ``report.html``
    The performance chart and the page (:data:`~pytest_xtc.report.render.formats.FORMATS`).
``MANIFEST.sha256``
    ``sha256sum`` lines over the others; written last.

Every file but results.jsonl is written whole or not at all (:mod:`.atomic`); a bundle
being written holds an ``.xtc-unfinished`` mark until its manifest is written. A
destination is refused unless it is empty, new, or a bundle this tool wrote (positively
identified: :func:`foreign`), which is then replaced.
"""

import json
import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_xtc.report.files import atomic
from pytest_xtc.report.files import untrusted as limits
from pytest_xtc.report.parts.model import Report, read_report
from pytest_xtc.report.parts.records import (
    RESULTS,
    CaseRecord,
    clean,
    dumps_line,
    read_record,
    sha256_file,
)
from pytest_xtc.report.parts.schema import SchemaError
from pytest_xtc.report.render import summary
from pytest_xtc.report.render.formats import FORMATS

SCHEMA = 2
KIND = "xtc-conformance-bundle"
REPORT, MANIFEST = "report.json", "MANIFEST.sha256"
SUMMARY = summary.NAME
#: The files every bundle holds, and every file a bundle may hold.
CONTENT = (RESULTS, REPORT, *(f.name for f in FORMATS if f.required))
FILES = (RESULTS, REPORT, *(f.name for f in FORMATS), MANIFEST)
#: Sub-directories a bundle may hold: its shrunk failures (``xtc-conformance shrink``).
SUBDIRS = ("shrunk",)
#: Written first, removed last: a directory holding it is a bundle this tool began.
UNFINISHED = ".xtc-unfinished"
UNFINISHED_TEXT = (
    "pytest-xtc began a bundle here and did not finish it (the run stopped or could not "
    "write); rerun with --xtc-report naming this directory to replace it\n"
)


class BundleError(Exception):
    """A bundle that cannot be used; the message is one line naming the problem (and the
    bundle, when ``path`` is given; ``problem`` is the message without it)."""

    def __init__(self, problem: str, path: Path | None = None) -> None:
        super().__init__(f"{path}: {problem}" if path is not None else problem)
        self.problem = problem


class WriteError(Exception):
    """Writing a bundle file failed (a full disk, a lost mount...): ``path`` names the file,
    ``error`` is the OSError; the file itself was left as it was (written whole or not)."""

    def __init__(self, path: Path, error: OSError) -> None:
        super().__init__(f"writing {path} failed: {error.strerror or error}")
        self.path, self.error = path, error


def _ours(path: Path, name: str) -> bool:
    """True when ``name`` in ``path`` is an entry this tool writes in a bundle."""
    if stat.S_ISLNK(os.lstat(path / name).st_mode):
        return False
    if name in SUBDIRS:
        return (path / name).is_dir()
    written = name in FILES or name == UNFINISHED
    return (written or _temp(name)) and (path / name).is_file()


def _temp(name: str) -> bool:
    """A temporary file of this tool's (a run killed while writing it leaves it)."""
    return any(atomic.is_temp(name, f) for f in (*FILES, UNFINISHED))


def foreign(path: Path) -> str | None:
    """Why directory ``path`` holds something this tool did not write, or None when it is
    empty, a bundle this tool finished (report.json of a bundle, MANIFEST listing exactly
    the files there) or one it began and did not finish (its UNFINISHED mark)."""
    names = sorted(os.listdir(path))
    strange = [n for n in names if not _ours(path, n)]
    if strange:
        more = f" and {len(strange) - 3} more" if len(strange) > 3 else ""
        return f"{', '.join(map(repr, strange[:3]))}{more} not written by pytest-xtc"
    files = [n for n in names if n in FILES]
    if not files or UNFINISHED in names:
        return None
    try:
        report = limits.loads(limits.read_text(path, REPORT), REPORT)
        listed = _read_manifest(path)
    except (OSError, ValueError, BundleError):
        report, listed = None, {}
    identified = isinstance(report, dict) and report.get("kind") == KIND and "schema" in report
    if identified and sorted([*listed, MANIFEST]) == files:
        return None
    return f"{', '.join(files)} without the {REPORT} and {MANIFEST} of a bundle listing them"


def check_destination(path: Path) -> None:
    """Refuse a destination that holds something other than a bundle of this tool."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise BundleError(f"{path} exists and is not a directory; choose a new directory")
    try:
        problem = foreign(path) if path.is_dir() else None
    except OSError as exc:
        raise BundleError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if problem is not None:
        raise BundleError(
            f"{path} is not empty and holds no XTC conformance bundle ({problem}); choose "
            "an empty or new directory, or move those files away (a bundle is replaced)"
        )


def prepare(path: Path) -> None:
    """Make ``path`` ready for a new bundle: mark it unfinished, remove a previous one."""
    check_destination(path)
    path.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path / UNFINISHED, UNFINISHED_TEXT)
    for name in os.listdir(path):
        if name in FILES or _temp(name):
            (path / name).unlink(missing_ok=True)


def _write(path: Path, text: str) -> None:
    try:
        atomic.write_text(path, text)
    except OSError as exc:
        raise WriteError(path, exc) from None


def finish(
    path: Path,
    report: Report | Mapping[str, Any],
    records: Sequence[CaseRecord | Mapping[str, Any]] | None = None,
) -> None:
    """Write report.json (and results.jsonl when given), each format, then the manifest,
    each file whole; raises WriteError naming the file that could not be written."""
    if records is not None:
        _write(path / RESULTS, "".join(dumps_line(r) if isinstance(r, CaseRecord) else
                                       json.dumps(clean(r), sort_keys=True, allow_nan=False) + "\n"
                                       for r in records))
    data = report.to_dict() if isinstance(report, Report) else report
    _write(path / REPORT, json.dumps(clean(data), indent=1, sort_keys=True) + "\n")
    if records is None:
        records = [limits.loads(line, RESULTS, n) for n, line in limits.lines(path, RESULTS)]
    typed = report if isinstance(report, Report) else read_report(clean(data), f"{REPORT}:")
    cases = [r if isinstance(r, CaseRecord) else read_record(clean(r), f"{RESULTS}:")
             for r in records]
    names = [RESULTS, REPORT]
    for form in FORMATS:
        text = form.render(typed, cases)
        (path / form.name).unlink(missing_ok=True)
        if text is not None:
            _write(path / form.name, text)
            names.append(form.name)
    try:
        sums = "".join(f"{sha256_file(path / n)}  {n}\n" for n in names)
    except OSError as exc:
        raise WriteError(path / MANIFEST, exc) from None
    _write(path / MANIFEST, sums)
    (path / UNFINISHED).unlink(missing_ok=True)


def failure_text(failure: WriteError, written: int, total: int, rerun: str) -> str:
    """One line: which file of the bundle could not be written and why, what the bundle
    kept (``written`` of ``total`` results), and how to write it again (``rerun``)."""
    path = failure.path.parent
    of = "" if written == total else f" of {total}"
    kept = [f"{RESULTS} ({written}{of} result{'' if total == 1 else 's'})"] if written else []
    kept += [n for n in FILES if n != RESULTS and (path / n).is_file()]
    lost = [n for n in (*CONTENT, MANIFEST) if n not in kept and (n != RESULTS or not written)]
    return (
        f"{failure}; kept: {', '.join(kept) or 'nothing'}; not written: {', '.join(lost)} "
        f"(the bundle is incomplete); rerun with {rerun} once the cause is fixed "
        "(the unfinished bundle is replaced)"
    )


def _read_manifest(path: Path) -> dict[str, str]:
    manifest: dict[str, str] = {}
    for n, line in limits.lines(path, MANIFEST):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            raise BundleError(f"{MANIFEST}: line {n} is not 'sha256  file'")
        limits.check_name(name)
        if name in manifest:
            raise BundleError(f"{MANIFEST}: line {n} lists {name} twice")
        manifest[name] = digest
    return manifest


def read(path: Path) -> tuple[Report, list[CaseRecord], list[str]]:
    """The report, the records and the integrity problems (checksums) of a bundle.
    Raises BundleError (naming ``path``) when it cannot be read at all, breaks one of
    the reading limits (:mod:`pytest_xtc.report.files.untrusted`) or the schema."""
    try:
        return _load(path)
    except SchemaError as exc:
        raise BundleError(str(exc), path) from None
    except BundleError as exc:
        raise BundleError(exc.problem, path) from None
    except limits.LimitError as exc:
        raise BundleError(f"refused: {exc}", path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BundleError(f"cannot read: {exc}", path) from None


def _load(path: Path) -> tuple[Report, list[CaseRecord], list[str]]:
    if not path.is_dir():
        raise BundleError("not a directory: a bundle is the folder a run's --xtc-report "
                          "wrote; name that folder" if os.path.lexists(path)
                          else "no such bundle directory")
    if not (limits.exists(path, MANIFEST) or limits.exists(path, RESULTS)):
        raise BundleError(f"not an XTC conformance bundle (no {MANIFEST}, no {RESULTS})")
    if not limits.exists(path, MANIFEST):
        raise BundleError(
            f"incomplete bundle, {MANIFEST} missing (the run ended "
            "before writing it: killed?); rerun it"
        )
    if os.path.lexists(path / UNFINISHED):
        raise BundleError(f"unfinished bundle ({UNFINISHED} is still there: the run ended "
                          "while writing it, killed?); rerun it to replace it")
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
            record = limits.loads(line, RESULTS, n)
        except ValueError as exc:
            if isinstance(exc, limits.LimitError):
                raise
            raise BundleError(
                f"{RESULTS}: line {n} is not JSON (truncated or damaged); rerun"
            ) from None
        if not isinstance(record, dict) or not {"target", "case", "status"} <= set(record):
            raise BundleError(f"{RESULTS}: line {n} is not a case result")
        records.append(read_record(record, f"{RESULTS}: line {n}:"))
    return read_report(report, f"{REPORT}:"), records, problems


def read_text(path: Path, name: str) -> str:
    """A bundle file's text, within the reading limits."""
    return limits.read_text(path, name)
