"""What the built-in catalog takes of the model (conformance/model.py): each family's
cover axes and their values' case counts, the values its other cases take, its largest
operand, and each op's scheduler primitives by loop and operand. ``model.audit`` turns
them into what is left out; ``xtc-conformance coverage`` and the tests read them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_xtc.conformance import model
from pytest_xtc.core.cases import graphs
from pytest_xtc.core.cases.case import Case


@dataclass
class Taken:
    """What a catalog takes of the model (the arguments of :func:`model.audit`)."""

    covers: dict[str, dict[str, dict[Any, int]]] = field(default_factory=dict)
    taken: dict[str, dict[str, set[Any]]] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    scheduled: dict[str, set[str]] = field(default_factory=dict)

    def problems(self) -> list[str]:
        return model.audit(self.covers, self.taken, self.sizes, self.scheduled)


def scheduled_by(case: Case) -> dict[str, set[str]]:
    """Each op of ``case``'s graph with the ``primitive:target`` pairs its schedule
    applies to that op's node (the last node where a segment names none)."""
    by_name = {n.name: n.op.name for n in graphs.nodes(case.graph)}
    last = list(by_name)[-1] if by_name else None
    found: dict[str, set[str]] = {}
    for node, steps in case.schedule.segments:
        op = by_name.get(node or last or "")
        if op is not None:
            found.setdefault(op, set()).update(model.applied(op, steps))
    return found


def largest(case: Case) -> int:
    """The element count of ``case``'s largest operand (inputs, results)."""
    return max(math.prod(o.shape) for o in graphs.operands(case.graph).values())


def taken(cases: Sequence[Case], catalog: dict[str, Any],
          covers: dict[str, dict[str, dict[Any, int]]]) -> Taken:
    """What ``cases`` (the catalog's) take of the model; ``covers``: each family's cover
    axes with their values' case counts; ``catalog``: the catalog's data (each family's
    ``once`` parameters name the forms they take: ``{threshold: nan}``)."""
    found = Taken(covers={f: dict(c) for f, c in covers.items()})
    for family, spec in catalog["families"].items():
        dims = model.cover_dimensions(family)
        for params in spec.get("once") or ():
            for key, value in (params.items() if isinstance(params, dict) else ()):
                name = key if key.endswith("_form") else f"{key}_form"
                if name in dims:
                    found.taken.setdefault(family, {}).setdefault(name, set()).add(value)
    for case in cases:
        found.sizes[case.op] = max(found.sizes.get(case.op, 0), largest(case))
        for op, applied in scheduled_by(case).items():
            found.scheduled.setdefault(op, set()).update(applied)
    return found
