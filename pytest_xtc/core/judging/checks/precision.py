"""The statistical precision check: the rounding errors of a random-input contraction's
calls, pooled, against honest summation in the case's dtype (judging/precision.py). Runs
only on results the other checks found right."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_xtc.core.judging import precision
from pytest_xtc.core.judging.checks.base import Finding, Seen


class Precision:
    name = "precision"

    def run(self, seen: Seen) -> Finding | None:
        case = seen.case
        if case.values != "random" or case.exact or seen.problems:
            return None
        distinct = {id(call.given[0]) if call.given else 0: call for call in seen.calls}
        found = []  # each input set once (the timed call repeats the first call's inputs)
        for call in distinct.values():
            ref = seen.reference(call)
            found += [
                precision.terms(case.dtype, got, expected, sample.magnitude, sample.k)
                for got, expected, sample in zip(call.outputs, ref.values, ref.samples,
                                                 strict=True)
                if sample is not None
            ]
        if not found:
            return None
        total = precision.pool(found)[case.dtype]
        problem = total.problem()
        return Finding([problem] if problem else [], total.to_dict())

    def lines(self, target: str, facts: Sequence[Mapping[str, Any]]) -> list[str]:
        pooled = precision.pool(precision.Terms.from_dict(dict(f)) for f in facts)
        return [
            f"{target}: effective mantissa bits, {dtype}: {t.bits:.1f} over {t.n} elements"
            for dtype, t in sorted(pooled.items())
        ]


CHECK = Precision()
