"""Why a verdict is not conformant: a code (:class:`ReasonCode`) plus the text people read.
No pytest.

The code is what the tool compares (cli, summary, verdicts); the text is what the bundle
stores. report.json keeps the text only, as the released version wrote it, so reading a
bundle gives each text its code back by the one pattern that code's text follows
(:func:`parse`); a text no pattern knows is refused.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass


class ReasonCode(enum.Enum):
    """Every reason a profile verdict can give, with the pattern its text follows."""

    NO_REQUIRED_CASE = r"no required case"
    RUN_FILTERED = r"filtered run \(.*\): a filtered run cannot be conformant"
    RUN_INTERRUPTED = r"run interrupted \(.*\)"
    PARTIAL_SHARD = r"partial bundle: shard .* only; merge every shard .*"
    MISSING = r"\d+ required cases have no result: .*"
    DUPLICATED = r"\d+ cases have more than one result: .*"
    SKIPPED = r"\d+ required cases skipped \(a skip is not a pass\), e\.g\. .*"
    FAILED = r"\d+ cases failed.*, e\.g\. .*"
    UNKNOWN_STATUS = r"\d+ results have an unknown status: .*"
    NONE_PASSED = r"no required case passed \(.*\): nothing was shown to work"
    CAPABILITIES_UNKNOWN = r"the target's capabilities are unknown \(.*\)"
    CAPABILITIES_SHORT = r"declares .*; \S+ needs at least .*"

    @property
    def run_level(self) -> bool:
        """A problem of the runs behind a target, repeated in each of its profiles."""
        return self in RUN_LEVEL


#: The codes of :func:`pytest_xtc.report.rules.verdicts.run_problems`.
RUN_LEVEL = frozenset({ReasonCode.RUN_FILTERED, ReasonCode.RUN_INTERRUPTED,
                       ReasonCode.PARTIAL_SHARD})
_PATTERNS = [(code, re.compile(code.value, re.DOTALL)) for code in ReasonCode]


class ReasonError(ValueError):
    """A reason text that follows no known pattern."""


@dataclass(frozen=True)
class Reason:
    """One reason: its code, and its text as report.json stores it (``parse(text)`` gives
    this code back: a test holds every text the verdicts write to it)."""

    code: ReasonCode
    text: str


def parse(text: str) -> Reason:
    """The reason a stored text states; raises ReasonError when no code's pattern fits."""
    for code, pattern in _PATTERNS:
        if pattern.fullmatch(text):
            return Reason(code, text)
    raise ReasonError(f"unknown reason {text[:80]!r}")
