"""A shrinking candidate, and the user case file that holds it. No pytest."""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pytest_xtc.core.cases import graphs
from pytest_xtc.core.cases.case import Case, Schedule, load_case_file
from pytest_xtc.core.cases.graphs import GraphDict
from pytest_xtc.core.cases.schedule import plain

SCHEDULE_NAME = "shrunk"


@dataclass(frozen=True)
class State:
    """A candidate: a graph and a schedule, with the case's dtype and values."""

    graph: GraphDict
    schedule: Schedule

    def size(self) -> tuple[int, int, int, int]:
        """What shrinking lowers, most important first: nodes, steps, elements, factors."""
        elements = sum(math.prod(o.shape) for o in graphs.inputs(self.graph))
        factors = sum(_factor_total(args) for _, args in self.schedule.steps)
        return (len(self.graph["nodes"]), len(self.schedule.steps), elements, factors)


def describe(state: State) -> str:
    shapes = ", ".join("x".join(map(str, o.shape)) for o in graphs.inputs(state.graph))
    nodes, steps = len(state.graph["nodes"]), len(state.schedule.steps)
    described = " and a descript description" if state.schedule.descript is not None else ""
    return (f"inputs {shapes} ({nodes} node{'s' * (nodes != 1)}) with {steps} "
            f"step{'s' * (steps != 1)}{described}")


def _factor_total(args: Sequence[Any]) -> int:
    return sum(v for a in args if isinstance(a, Mapping) for v in a.values()
               if isinstance(v, int) and not isinstance(v, bool))


def graph_name(case: Case) -> str:
    """The shrunk case's graph name: never a built-in family's."""
    return re.sub(r"[^A-Za-z0-9_]", "_", case.op) + "_shrunk"


def case_file_data(state: State, case: Case, name: str) -> dict[str, Any]:
    """A user case file (the ``--xtc-cases`` format) holding one case."""
    data: dict[str, Any] = {"name": name}
    data.update({k: plain(state.graph[k]) for k in ("inputs", "nodes", "outputs")})
    data["schedules"] = {SCHEDULE_NAME: plain(state.schedule.to_data()) or []}
    data["dtypes"] = [case.dtype]
    data["values"] = [case.values]
    if case.exact_rule:
        data["error_rule"] = "exact"
    elif case.c != Case.c:
        data["error_rule"] = {"c": case.c}
    return data


def write_case_file(path: Path, state: State, case: Case, name: str, header: str = "") -> Case:
    """Write the case file, then load it back as ``--xtc-cases`` would: that case."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(case_file_data(state, case, name), sort_keys=False, width=100)
    comment = "".join(f"# {line}\n" for line in header.splitlines())
    path.write_text(comment + text)
    (loaded,) = load_case_file(path)
    return loaded




def rerun_command(target: str, file: Path, test_id: str, base_seed: int,
                  extra_args: Sequence[str] = ()) -> str:
    """The one line that reruns the shrunk case alone (``--xtc-case``: an exact match)."""
    return shlex.join(["pytest", f"--xtc-target={target}", f"--xtc-seed={base_seed}",
                       f"--xtc-cases={file}", f"--xtc-case={test_id}", *extra_args,
                       "-p", "no:cacheprovider"])
