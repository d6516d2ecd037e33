"""One status word per case, the same in every view of a run. No pytest.

The terminal's table, report.json's counts, summary.md, the page, the job summary and
JUnit (``xtc_verdict``) all say of a case what :func:`case_status` says: the runner's
status (what the target did), except that a failure the suite waives is *waived* and a
failure the target's expected-failure file lists is *xfailed* (the waiver first: the
suite's waiver file is what certification reads; a case is never counted as both).
"""

from __future__ import annotations

from collections.abc import Mapping

from pytest_xtc.report.parts.records import CaseRecord

#: Every word, in the order the views list them.
STATUSES = ("passed", "compiled", "failed", "error", "invalid", "xfailed", "waived",
            "not-supported", "skipped")
#: The words that are a failure of the run (shown red, listed in job summaries).
FAILING = ("failed", "error", "invalid")


def status_word(status: str, pytest_outcome: str | None, waived: bool) -> str:
    """The word for a case of runner ``status`` that pytest reported as ``pytest_outcome``
    (``xfailed`` for an expected failure), ``waived`` by a suite waiver or not."""
    if status == "failed" and waived:
        return "waived"
    if status == "failed" and pytest_outcome == "xfailed":
        return "xfailed"
    return status


def case_status(record: CaseRecord, waived: Mapping[str, str]) -> str:
    """The word for ``record`` of a target whose waived cases are ``waived`` (case id ->
    waiver id, report.json's ``waived``)."""
    return status_word(record.status, record.pytest_outcome, record.case in waived)
