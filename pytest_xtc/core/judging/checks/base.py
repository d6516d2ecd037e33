"""What a per-case check is (:class:`Check`), what it reads (:class:`Seen`) and what it
says (:class:`Finding`). No pytest."""

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
    deterministic: bool = True  # the target's declaration (TargetAdapter.deterministic)
    problems: list[str] = field(default_factory=list)
    #: Each input set's reference by :func:`reference_key`: computed on first use, or
    #: ahead by the runner while the target works (:func:`references`).
    references: dict[int, Reference] = field(default_factory=dict)

    @property
    def in_names(self) -> list[str]:
        return [o.name for o in graphs.inputs(self.case.graph)]

    @property
    def out_names(self) -> list[str]:
        return [o.name for o in graphs.outputs(self.case.graph)]

    def reference(self, call: Call) -> Reference:
        """The reference of ``call``'s inputs (shared by calls given the same arrays)."""
        key = reference_key(call.given)
        if key not in self.references:
            self.references[key] = evaluate(self.case, call.given)
        return self.references[key]


def reference_key(given: Sequence[np.ndarray]) -> int:
    """Which input set ``given`` is: the calls given the very same arrays share it."""
    return id(given[0]) if given else 0


def evaluate(case: Case, given: Sequence[np.ndarray]) -> Reference:
    """The float64 reference of ``case`` on the inputs ``given``, with its bounds."""
    return reference.evaluate(case.graph, given, exact=case.exact, c=case.c,
                              ieee=case.values == "special")


def references(case: Case, input_sets: Sequence[Sequence[np.ndarray]]) -> dict[int, Reference]:
    """Every input set's reference, for :attr:`Seen.references`; one that raises is left
    out (the check computes it again and the error shows there)."""
    found: dict[int, Reference] = {}
    for given in input_sets:
        try:
            found[reference_key(given)] = evaluate(case, given)
        except Exception:
            continue
    return found


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
