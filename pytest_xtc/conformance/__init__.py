"""The built-in conformance suite: ``catalog.yaml`` expanded by ``families.py``."""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from pytest_xtc.conformance import audit, coverage, model
from pytest_xtc.conformance.families import FAMILIES
from pytest_xtc.core.cases import twins
from pytest_xtc.core.cases.case import Case, Schedule
from pytest_xtc.core.cases.unique_keys import load_yaml

CATALOG = Path(__file__).with_name("catalog.yaml")
#: What a family of the catalog may hold (a key misspelt would drop its cases silently).
FAMILY_KEYS = ("schedules", "shapes", "shapes_dtype", "cover", "cover_schedules", "exact",
               "special", "large", "wide", "loops", "twins", "once", "huge", "model_shape")
SUITE_MODULE = Path(__file__).with_name("test_conformance.py")


def _build(family: str, params: Any, dtype: str):  # type: ignore[no-untyped-def]
    build = FAMILIES[family]
    if isinstance(params, dict):
        return build(**params, dtype=dtype)
    return build(*params, dtype=dtype)


@cache
def builtin_cases() -> tuple[Case, ...]:
    """Every built-in case, in a stable order (xdist workers must agree on it)."""
    catalog = load_yaml(CATALOG.read_text(), str(CATALOG))
    cases: list[Case] = []
    for family, spec in catalog["families"].items():
        check_family_keys(family, spec)
        schedules = [Schedule.from_data(n, steps) for n, steps in spec["schedules"].items()]
        extra = [Schedule.from_data(n, steps)
                 for n, steps in (spec.get("cover_schedules") or {}).items()]
        covered = _covered(family, spec, {s.name: s for s in [*schedules, *extra]})
        cases += _picked(family, spec, schedules, catalog["dtypes"])
        picked = {c.id for c in cases}
        cases += [c for c in covered if c.id not in picked]  # a pair the hand-picked hold
        exact_schedules = schedules[:2]
        for params in spec.get("exact", ()):
            graph, shape = _build(family, params, "float32")
            cases += [Case(family, "float32", shape, s, graph, "exact") for s in exact_schedules]
        for dtype in catalog["dtypes"]:
            for params in spec.get("special", ()):
                graph, shape = _build(family, params, dtype)
                cases += [Case(family, dtype, shape, s, graph, "special") for s in exact_schedules]
        large = spec.get("large") or {}
        chosen = [s for s in schedules if s.name in set(large.get("schedules", ()))]
        for dtype in catalog["dtypes"]:
            for params in large.get("shapes", ()):
                graph, shape = _build(family, params, dtype)
                cases += [Case(family, dtype, shape, s, graph) for s in chosen]
        cases += _wide(family, spec, [*schedules, *extra], catalog["dtypes"],
                       {c.id for c in cases})
        for params in spec.get("loops", ()):  # one loop past 2^16 each: first dtype, none
            graph, shape = _build(family, params, catalog["dtypes"][0])
            cases.append(Case(family, catalog["dtypes"][0], shape, schedules[0], graph))
        for pair in spec.get("twins", ()):  # both on the first two schedules, first dtype
            for params in pair:
                graph, shape = _build(family, params, catalog["dtypes"][0])
                cases += [Case(family, catalog["dtypes"][0], shape, s, graph)
                          for s in schedules[:2]]
        cases += _once(family, spec, schedules[0], catalog["dtypes"])
        cases += _modelled(family, spec, [*schedules, *extra], catalog["dtypes"])
    return tuple(twins.pair(cases, also=twins.LEFT_OUT[1:]))


def _once(family: str, spec: Any, schedule: Schedule, dtypes: list[str]) -> list[Case]:
    """``once`` (values the cover leaves out: each in one case, the first dtype) and
    ``huge`` (past 2^24 elements: the dtype turning) with the first schedule."""
    cases = []
    for at, params in enumerate([*spec.get("once", ()), *spec.get("huge", ())]):
        dtype = dtypes[0] if at < len(spec.get("once", ())) else dtypes[at % len(dtypes)]
        graph, shape = _build(family, params, dtype)
        cases.append(Case(family, dtype, shape, schedule, graph))
    return cases


def _modelled(family: str, spec: Any, schedules: list[Schedule], dtypes: list[str]) -> list[Case]:
    """The model's schedules the family's own leave out (model.missing_schedules), each
    once on its ``model_shape``, in the first dtype."""
    op = model.op_of(family)
    if op is None or "model_shape" not in spec:
        return []
    have = set().union(*(model.applied(op, s.steps) for s in schedules if s.node is None))
    made = model.missing_schedules(op, have)
    cases = []
    for name, steps in made.items():
        graph, shape = _build(family, spec["model_shape"], dtypes[0])
        cases.append(Case(family, dtypes[0], shape, Schedule.from_data(name, steps), graph))
    return cases


def check_family_keys(family: str, spec: Any) -> None:
    """Refuse a catalog family holding a key :data:`FAMILY_KEYS` does not name."""
    unknown = sorted(set(spec) - set(FAMILY_KEYS))
    if unknown:
        raise ValueError(f"{CATALOG}: family {family}: unknown key {unknown[0]!r}; a family "
                         f"holds {', '.join(FAMILY_KEYS)}")


def _picked(family: str, spec: Any, schedules: list[Schedule],
            dtypes: list[str]) -> list[Case]:
    """The hand-picked shapes, each with every schedule in every dtype; with ``shapes_dtype:
    turning``, in one dtype: the first for the first two schedules (those the exact and
    special cases run in every dtype), else turning with the shape and the schedule, so
    that each shape and each later schedule still meets every dtype (and the all-pairs
    cover crosses dtype with every parameter), at half the cases."""
    how = spec.get("shapes_dtype", "every")
    if how not in ("every", "turning"):
        raise ValueError(f"{family}: shapes_dtype {how!r} is not 'every' or 'turning'")
    cases = []
    for at, params in enumerate(spec.get("shapes", ())):
        built = {dtype: _build(family, params, dtype) for dtype in dtypes}
        for n, sched in enumerate(schedules):
            chosen = (dtypes if how == "every" else
                      [dtypes[0] if n < 2 else dtypes[(at + n) % len(dtypes)]])
            cases += [Case(family, d, built[d][1], sched, built[d][0]) for d in chosen]
    return cases


def _wide(family: str, spec: Any, schedules: list[Schedule], dtypes: list[str],
          known: set[str]) -> list[Case]:
    """The family's ``wide`` shapes (operands and outputs past 2^16 elements): each meets
    every schedule, and every dtype (the dtype turns with the schedule and the shape)."""
    wide = spec.get("wide") or []
    cases: list[Case] = []
    rounds = max(len(schedules), len(dtypes)) if wide else 0
    for n in range(rounds):
        for at, params in enumerate(wide):
            dtype = dtypes[(n + at) % len(dtypes)]
            graph, shape = _build(family, params, dtype)
            case = Case(family, dtype, shape, schedules[n % len(schedules)], graph)
            if case.id not in known:
                known.add(case.id)
                cases.append(case)
    return cases


def _covered(family: str, spec: Any, schedules: dict[str, Schedule]) -> list[Case]:
    """A family's all-pairs cases (its ``cover`` section), one per row."""
    if "cover" not in spec:
        return []
    rows, _, _ = coverage.cover_rows(spec["cover"], model.cover_dimensions(family))
    cases = []
    for row in rows:
        params = coverage.build_arguments(spec["cover"], row)
        if row["schedule"] not in schedules:
            raise ValueError(f"{family}: cover names schedule {row['schedule']!r}, "
                             f"not among {', '.join(schedules)}")
        graph, shape = _build(family, params, row["dtype"])
        cases.append(Case(family, row["dtype"], shape, schedules[row["schedule"]], graph,
                          row.get("values", "random"), align=row.get("align", "aligned")))
    return cases


def coverage_table() -> dict[str, coverage.Coverage]:
    """What each family's cases cover, for the families with a ``cover`` section."""
    catalog = load_yaml(CATALOG.read_text(), str(CATALOG))
    found = {}
    for family, spec in catalog["families"].items():
        if "cover" in spec:
            rows, values, rules = coverage.cover_rows(spec["cover"],
                                                      model.cover_dimensions(family))
            loops = tuple(_build(family, p, catalog["dtypes"][0])[1] for p in spec.get("loops", ()))
            found[family] = replace(coverage.measure(family, rows, values, rules), loops=loops)
    return found


def model_taken() -> audit.Taken:
    """What the built-in catalog takes of the model (conformance/model.py)."""
    catalog = load_yaml(CATALOG.read_text(), str(CATALOG))
    covers = {f: c.values for f, c in coverage_table().items()}
    return audit.taken(builtin_cases(), catalog, covers)
