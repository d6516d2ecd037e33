"""The per-case checks: one object each, in one list (:data:`CHECKS`). No pytest.

A check reads what a case's kernel calls left (:class:`Seen`) and says what is wrong
(:class:`Finding`: failure lines, and the facts it records on the outcome under its
name); :meth:`Check.lines` says what the report and the terminal show of those facts,
per target. The runner runs the list in order, the report and the terminal read it.
Adding a check is one module with one object and one line in :data:`CHECKS`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from pytest_xtc.core.cases import graphs
from pytest_xtc.core.cases.case import Case
from pytest_xtc.core.judging import reference
from pytest_xtc.core.judging.reference import Reference


@dataclass
class Call:
    """One kernel call as the checks see it: the inputs it was given, what it left of them,
    its outputs, the writes out of bounds its guard bands saw, and how to name it."""

    given: list[np.ndarray]
    left: list[np.ndarray]
    outputs: list[np.ndarray]
    guard: list[str] = field(default_factory=list)
    label: str = ""  # "" for the first call; else e.g. "call 3 of 3 (timed)"
    timed: bool = False


@dataclass
class Seen:
    """Everything a case's calls left, with each call's reference (computed once per input
    set), and the failure lines found by the checks run before."""

    case: Case
    calls: list[Call]
    guarded: bool = False  # operands lay inside guard bands
    second: list[np.ndarray] | None = None  # outputs of the repeat-check run of call 1
    problems: list[str] = field(default_factory=list)
    _references: dict[int, Reference] = field(default_factory=dict)

    @property
    def in_names(self) -> list[str]:
        return [o.name for o in graphs.inputs(self.case.graph)]

    @property
    def out_names(self) -> list[str]:
        return [o.name for o in graphs.outputs(self.case.graph)]

    def reference(self, call: Call) -> Reference:
        """The reference of ``call``'s inputs (shared by calls given the same arrays)."""
        key = id(call.given[0]) if call.given else 0
        if key not in self._references:
            case = self.case
            self._references[key] = reference.evaluate(
                case.graph, call.given, exact=case.exact, c=case.c,
                ieee=case.values == "special",
            )
        return self._references[key]


@dataclass
class Finding:
    """What a check found: failure lines (none: nothing wrong) and the facts it records."""

    problems: list[str] = field(default_factory=list)
    facts: dict[str, Any] | None = None


class Check(Protocol):
    """One per-case check."""

    name: str  # the key of its facts in an outcome's ``checks``

    def run(self, seen: Seen) -> Finding | None:
        """What is wrong with the case's results, and what was seen (None: not applicable)."""
        ...

    def lines(self, target: str, facts: Sequence[Mapping[str, Any]]) -> list[str]:
        """What the report and the terminal show: a target's facts, one per case that ran."""
        ...


def _checks() -> list[Check]:
    from pytest_xtc.core.judging.checks import bounds, precision, repeat, results

    return [results.CHECK, bounds.CHECK, repeat.CHECK, precision.CHECK]


#: Every per-case check, in the order they run (precision reads the others' problems).
CHECKS: list[Check] = _checks()


def judge(seen: Seen) -> dict[str, Any]:
    """Run every check on ``seen``; the failure lines gather in ``seen.problems``, and the
    checks' facts come back by check name."""
    facts: dict[str, Any] = {}
    for check in CHECKS:
        found = check.run(seen)
        if found is None:
            continue
        seen.problems += found.problems
        if found.facts is not None:
            facts[check.name] = found.facts
    return facts


def summary_lines(target: str, records: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every check's lines for one target, from its records' ``checks`` facts."""
    found: list[str] = []
    for check in CHECKS:
        facts = [
            r["checks"][check.name]
            for r in records
            if isinstance(r.get("checks"), Mapping) and check.name in r["checks"]
        ]
        found += check.lines(target, facts)
    return found
