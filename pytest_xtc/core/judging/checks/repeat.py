"""``--xtc-repeat-check``: the first call run again on the same inputs. A target declaring
itself deterministic (the default) must give the same bits (a nondeterministic parallel
reduction fails it); one declaring ``deterministic = False`` (any summation order, from
run to run) must give, on the repeat run too, results within every output's bound (the
differing elements are counted, not failed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_xtc.core.judging import checking
from pytest_xtc.core.judging.checks.base import Finding, Seen


class Repeat:
    name = "repeat"

    def run(self, seen: Seen) -> Finding | None:
        if seen.second is None or not seen.calls:
            return None
        first = seen.calls[0]
        if seen.deterministic:
            return Finding(checking.unstable_outputs(seen.out_names, first.outputs,
                                                     seen.second), {})
        differing = sum(checking.differing(a, b)
                        for a, b in zip(first.outputs, seen.second, strict=True))
        found = checking.compare(seen.out_names, seen.second, seen.reference(first))
        problems = [f"repeat run (deterministic = False: compared within the bound): "
                    f"{m.describe()}" for m in found.mismatches]
        return Finding(problems, {"differing": differing, "within_bound": not problems})

    def lines(self, target: str, facts: Sequence[Mapping[str, Any]]) -> list[str]:
        if not facts:
            return []
        varying = [f for f in facts if "differing" in f]
        line = f"{target}: repeat check on {len(facts)} runs"
        if varying:
            changed = sum(bool(f.get("differing")) for f in varying)
            line += (f" ({len(varying)} compared within the bound, deterministic = False: "
                     f"{changed} gave other bits)")
        return [line]


CHECK = Repeat()
