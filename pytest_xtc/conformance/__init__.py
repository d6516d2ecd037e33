"""The built-in conformance suite: ``catalog.yaml`` expanded by ``families.py``."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from pytest_xtc.conformance import coverage
from pytest_xtc.conformance.families import FAMILIES
from pytest_xtc.core.cases.case import Case, Schedule
from pytest_xtc.core.cases.unique_keys import load_yaml

CATALOG = Path(__file__).with_name("catalog.yaml")
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
        schedules = [Schedule.from_data(n, steps) for n, steps in spec["schedules"].items()]
        covered = _covered(family, spec, {s.name: s for s in schedules})
        for dtype in catalog["dtypes"]:
            for params in spec.get("shapes", ()):
                graph, shape = _build(family, params, dtype)
                cases += [Case(family, dtype, shape, sched, graph) for sched in schedules]
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
    return tuple(cases)


def _covered(family: str, spec: Any, schedules: dict[str, Schedule]) -> list[Case]:
    """A family's all-pairs cases (its ``cover`` section), one per row."""
    if "cover" not in spec:
        return []
    rows, _, _ = coverage.cover_rows(spec["cover"])
    cases = []
    for row in rows:
        params = coverage.build_arguments(spec["cover"], row)
        if row["schedule"] not in schedules:
            raise ValueError(f"{family}: cover names schedule {row['schedule']!r}, "
                             f"not among {', '.join(schedules)}")
        graph, shape = _build(family, params, row["dtype"])
        cases.append(Case(family, row["dtype"], shape, schedules[row["schedule"]], graph))
    return cases


def coverage_table() -> dict[str, coverage.Coverage]:
    """What each family's cases cover, for the families with a ``cover`` section."""
    catalog = load_yaml(CATALOG.read_text(), str(CATALOG))
    found = {}
    for family, spec in catalog["families"].items():
        if "cover" in spec:
            rows, values, rules = coverage.cover_rows(spec["cover"])
            found[family] = coverage.measure(family, rows, values, rules)
    return found
