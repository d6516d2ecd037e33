"""Systematic coverage of each op's parameters: an all-pairs (covering array) generator.

A family's ``cover`` section in ``catalog.yaml`` names the values that matter for each
parameter (the schedule and the dtype are parameters too) and rules between parameters;
the generator picks rows (one case each) until every pair of values of every two
parameters that the rules allow appears in some row. Greedy and seeded (AETG-style): a
row starts from a pair not yet covered and each further parameter takes the value that
covers the most new pairs, the best of a few candidates kept. Deterministic: the same
catalog gives the same cases on every xdist worker.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from pytest_xtc.core.adapters import declcache
from pytest_xtc.core.cases.schedule import plain

Row = dict[str, Any]
Pair = tuple[tuple[str, Any], tuple[str, Any]]
CANDIDATES = 12  # rows tried per row kept
#: Parameters of every row that are not the family's arguments: the schedule, the dtype,
#: where the runner puts the operands (``align``: core/execution/guard.py) and the inputs'
#: distribution (``values``).
RUNNER_PARAMETERS = ("schedule", "dtype", "align", "values")
_RULE = re.compile(r"^\s*(\w+)\s*(<=|>=|<|>|==|!=)\s*(\w+)(?:\s*//\s*(\d+))?\s*$")
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "<=": lambda a, b: a <= b, ">=": lambda a, b: a >= b, "<": lambda a, b: a < b,
    ">": lambda a, b: a > b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
}


@dataclass(frozen=True)
class Rule:
    """``left OP right [// divisor]`` between two parameters, e.g. ``pad <= r // 2``."""

    text: str
    left: str
    op: str
    right: str
    divisor: int = 1

    @classmethod
    def parse(cls, text: str, names: Sequence[str]) -> Rule:
        match = _RULE.match(text)
        if not match or match[1] not in names or match[3] not in names:
            raise ValueError(f"coverage rule {text!r}: write NAME OP NAME [// N] with "
                             f"parameters among {', '.join(names)}")
        return cls(text, match[1], match[2], match[3], int(match[4] or 1))

    def allows(self, row: Mapping[str, Any]) -> bool:
        """False only when both parameters are set and break the rule."""
        if self.left not in row or self.right not in row:
            return True
        return _OPS[self.op](row[self.left], row[self.right] // self.divisor)


def _key(names: Sequence[str], a: tuple[str, Any], b: tuple[str, Any]) -> Pair:
    return (a, b) if names.index(a[0]) < names.index(b[0]) else (b, a)


def _completes(row: Row, values: Mapping[str, Sequence[Any]], rules: Sequence[Rule]) -> bool:
    """Some full row allowed by the rules extends ``row`` (depth-first search over the
    parameters some rule names: any value of the others is allowed)."""
    if not all(r.allows(row) for r in rules):
        return False
    named = {n for r in rules for n in (r.left, r.right)}
    rest = [n for n in values if n not in row and n in named]
    if not rest:
        return True
    name = rest[0]
    return any(
        _completes({**row, name: v}, values, rules)
        for v in values[name]
        if all(r.allows({**row, name: v}) for r in rules)
    )


def feasible_pairs(values: Mapping[str, Sequence[Any]], rules: Sequence[Rule]) -> set[Pair]:
    """Every pair of values of two parameters that some row allowed by the rules holds."""
    names = list(values)
    return {
        ((a, va), (b, vb))
        for a, b in itertools.combinations(names, 2)
        for va in values[a]
        for vb in values[b]
        if _completes({a: va, b: vb}, values, rules)
    }


def pairs_in(row: Mapping[str, Any], names: Sequence[str]) -> set[Pair]:
    return {_key(names, (a, row[a]), (b, row[b])) for a, b in itertools.combinations(names, 2)}


def _grow(start: Pair, values: Mapping[str, Sequence[Any]], rules: Sequence[Rule],
          todo: set[Pair], rng: random.Random) -> Row | None:
    names = list(values)
    row: Row = dict(start)
    rest = [n for n in names if n not in row]
    rng.shuffle(rest)
    for name in rest:
        options = [v for v in values[name] if all(r.allows({**row, name: v}) for r in rules)]
        if not options:
            return None
        gain = {v: sum(_key(names, (name, v), (o, row[o])) in todo for o in row) for v in options}
        top = max(gain.values())
        row[name] = rng.choice([v for v in options if gain[v] == top])
    return {n: row[n] for n in names}


def all_pairs(values: Mapping[str, Sequence[Any]], rules: Sequence[Rule], seed: int = 0,
              include: Sequence[Row] = ()) -> list[Row]:
    """Rows covering every feasible pair of parameter values, starting with ``include``.
    Raises ValueError naming a pair no row satisfying the rules can hold."""
    names = list(values)
    todo = feasible_pairs(values, rules)
    rng = random.Random(seed)
    rows: list[Row] = [dict(row) for row in include]
    for kept in rows:
        todo -= pairs_in(kept, names)
    while todo:
        ordered = sorted(todo, key=repr)
        best: Row | None = None
        best_gain = 0
        for attempt in range(CANDIDATES):
            start = ordered[0] if attempt == 0 else rng.choice(ordered)
            grown = _grow(start, values, rules, todo, rng)
            gain = len(pairs_in(grown, names) & todo) if grown else 0
            if grown and gain > best_gain:
                best, best_gain = grown, gain
        if best is None:
            raise ValueError(f"coverage: no row allowed by the rules holds {ordered[0]}")
        rows.append(best)
        todo -= pairs_in(best, names)
    return rows


@dataclass
class Coverage:
    """What a family's cases cover: each value's case count, each pair of parameters'
    covered and feasible pairs."""

    family: str
    cases: int
    values: dict[str, dict[Any, int]]
    pairs: dict[tuple[str, str], tuple[int, int]]
    #: the shapes of the family's ``loops`` cases: one loop of the nest past 2^16 each
    loops: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        return all(n for counts in self.values.values() for n in counts.values()) and all(
            got == want for got, want in self.pairs.values())

    def to_dict(self) -> dict[str, Any]:
        covered = sum(g for g, _ in self.pairs.values())
        return {"cases": self.cases, "complete": self.complete,
                "values": {p: {str(v): n for v, n in c.items()} for p, c in self.values.items()},
                "pairs_covered": covered, "pairs_feasible": sum(w for _, w in self.pairs.values()),
                "loops_past_16_bits": list(self.loops)}

    def lines(self) -> list[str]:
        covered, feasible = (sum(x[i] for x in self.pairs.values()) for i in (0, 1))
        head = (f"{self.family}: {self.cases} cases; pairs covered {covered} of {feasible} "
                f"allowed by the rules ({'complete' if self.complete else 'INCOMPLETE'})")
        found = [head]
        for name, counts in self.values.items():
            shown = " ".join(f"{v}:{n}" for v, n in counts.items())
            found.append(f"  {name:<9} {shown}")
        found.append("  pairs of values covered / allowed, per two parameters:")
        for name in self.values:
            mine = [f"{b} {g}/{w}" for (a, b), (g, w) in self.pairs.items() if a == name]
            if mine:
                found.append(f"  {name:<9} x " + ", ".join(mine))
        if self.loops:
            found.append("  one loop past 2^16 iterations per case: " + " ".join(self.loops))
        return found


def measure(family: str, rows: Sequence[Row], values: Mapping[str, Sequence[Any]],
            rules: Sequence[Rule]) -> Coverage:
    """The coverage of ``rows`` (each a dict of every parameter) over ``values``."""
    names = list(values)
    counts = {n: Counter(row[n] for row in rows) for n in names}
    seen = set().union(*(pairs_in(row, names) for row in rows)) if rows else set()
    wanted = feasible_pairs(values, rules)
    pairs = {}
    for a, b in itertools.combinations(names, 2):
        mine = {p for p in wanted if p[0][0] == a and p[1][0] == b}
        pairs[(a, b)] = (len(mine & seen), len(mine))
    return Coverage(family, len(rows), {n: {v: counts[n][v] for v in values[n]} for n in names},
                    pairs)


def _hashable(value: Any) -> Any:
    """A value as the generator keeps it: lists (an axes permutation) as tuples."""
    return tuple(_hashable(x) for x in value) if isinstance(value, list) else value


def build_arguments(spec: Mapping[str, Any], row: Row) -> dict[str, Any]:
    """The family's arguments for ``row``: its parameters but the schedule, the dtype and
    the operand alignment (the runner's), or,
    when the section has a ``build`` template (``{shape: [i, j]}``), the template with
    each parameter's name replaced by the row's value. Raises ValueError for a string in
    the template that names no parameter."""
    template = spec.get("build")
    if template is None:
        return {k: plain(v) for k, v in row.items() if k not in RUNNER_PARAMETERS}

    def fill(part: Any) -> Any:
        if isinstance(part, str):
            if part not in row:
                raise ValueError(f"coverage: build names {part!r}, not a parameter "
                                 f"({', '.join(row)})")
            return plain(row[part])
        if isinstance(part, list):
            return [fill(x) for x in part]
        if isinstance(part, Mapping):
            return {k: fill(v) for k, v in part.items()}
        return part

    if not isinstance(template, Mapping):
        raise ValueError("coverage: build maps the family's arguments to templates "
                         "({shape: [i, j]})")
    return {str(k): fill(v) for k, v in template.items()}


def cover_rows(spec: Mapping[str, Any], model: Mapping[str, Sequence[Any]] | None = None,
               ) -> tuple[list[Row], dict[str, list[Any]], list[Rule]]:
    """A family's ``cover`` section: its rows (``same`` parameters copied in), values and
    rules. ``model``: dimensions added to the section's own (conformance/model.py), an
    included row taking the first value of each it does not give. Raises ValueError for a
    section it does not understand."""
    unknown = set(spec) - {"values", "rules", "same", "seed", "include", "build"}
    if unknown or not isinstance(spec.get("values"), Mapping):
        raise ValueError(f"coverage: a cover section takes values, rules, same, seed, "
                         f"include, build (got {sorted(spec)})")
    values = {str(k): [_hashable(x) for x in v] for k, v in spec["values"].items()}
    added = {k: [_hashable(x) for x in v] for k, v in (model or {}).items() if k not in values}
    values |= added
    rules = [Rule.parse(r, list(values)) for r in spec.get("rules", ())]
    first = {k: values[k][0] for k in (model or {})}
    include = [{**first, **{k: _hashable(v) for k, v in row.items()}}
               for row in spec.get("include", ())]
    for row in include:
        if set(row) != set(values) or any(row[k] not in values[k] for k in values):
            raise ValueError(f"coverage: included row {row} must give every parameter one "
                             "of its values")
    rows = remembered_rows(values, rules, int(spec.get("seed", 0)), include)
    for copy, source in (spec.get("same") or {}).items():
        for row in rows:
            row[copy] = row[source]
    return rows, values, rules


CACHE_NAME = "allpairs-v1.json"


def remembered_rows(values: Mapping[str, Sequence[Any]], rules: Sequence[Rule], seed: int,
                    include: Sequence[Row]) -> list[Row]:
    """``all_pairs``'s rows, kept across sessions (declcache) under a key holding its
    arguments and this module's source: every start that builds the catalog would else
    pay the search again (about 0.6 s). A kept entry is used only when its rows still
    keep the rules, start with ``include`` and cover every feasible pair (a damaged or
    edited cache cannot drop a case); else the rows are computed afresh."""
    fields = [values, [r.text for r in rules], seed, include,
              hashlib.sha256(Path(__file__).read_bytes()).hexdigest()]
    try:
        key = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()
    except (TypeError, ValueError):  # values JSON cannot hold: not kept
        return all_pairs(values, rules, seed, include)
    kept = declcache.load(CACHE_NAME).get(key)
    if isinstance(kept, list):  # JSON gave lists back for the tuples
        kept = [{k: _hashable(v) for k, v in row.items()} if isinstance(row, dict) else row
                for row in kept]
    if _sound(kept, values, rules, include):
        return [dict(row) for row in kept]
    rows = all_pairs(values, rules, seed, include)
    declcache.store({key: rows}, CACHE_NAME)
    return rows


def _sound(kept: Any, values: Mapping[str, Sequence[Any]], rules: Sequence[Rule],
           include: Sequence[Row]) -> TypeGuard[list[Row]]:
    if not isinstance(kept, list) or not all(
        isinstance(row, dict) and set(row) == set(values)
        and all(row[n] in values[n] for n in values) for row in kept
    ):
        return False
    if any(not r.allows(row) for r in rules for row in kept):
        return False
    if kept[: len(include)] != [dict(row) for row in include]:
        return False
    names = list(values)
    seen = set().union(*(pairs_in(row, names) for row in kept)) if kept else set()
    # every feasible pair covered: each pair the rows leave out is infeasible (searched
    # for the few left out only, not for all of them)
    return not any(
        _completes({a: va, b: vb}, values, rules)
        for a, b in itertools.combinations(names, 2)
        for va in values[a]
        for vb in values[b]
        if ((a, va), (b, vb)) not in seen
    )
