"""Failure minimisation: the smallest case that still fails the same way. No pytest.

A failing case is reduced by a deterministic greedy loop (:mod:`.search`), in the manner
of Hypothesis's shrinker and of delta debugging: it tries, in a fixed order
(:mod:`.candidates`), to drop graph nodes, to drop schedule steps with the loops they
made (:mod:`.steps`), to halve or decrement input dimensions (every shape re-derived
through the op registry; invalid graphs are never tried), and to bring tile and unroll
factors down toward 1 and 2 (clamped to their dimension). Each candidate is written as a
user case file (:mod:`.casefile`), loaded back as any ``--xtc-cases`` file would be, and
run through :func:`~pytest_xtc.core.execution.runner.run_case` on the same adapter with
the same settings (seed included): a candidate is kept when it fails *the same way*, that
is in the same stage with the same :class:`Kind` (:mod:`.kinds`: the failure kind the
runner recorded: wrong results, an exception's type, a crash signal, a timeout). The loop
stops when no candidate is kept, or at its budget of attempts or seconds. The result is
the last kept case file, and the command that reruns it. A bundle's failures are rebuilt
through :mod:`pytest_xtc.report.replay` (:mod:`.from_bundle`).
"""

from pytest_xtc.exploration.shrink.candidates import candidates, node_candidates, shape_candidates
from pytest_xtc.exploration.shrink.casefile import (
    SCHEDULE_NAME,
    State,
    case_file_data,
    describe,
    graph_name,
    rerun_command,
    write_case_file,
)
from pytest_xtc.exploration.shrink.from_bundle import shrink_bundle
from pytest_xtc.exploration.shrink.kinds import Kind, failure_kind, kind_from_legacy_message
from pytest_xtc.exploration.shrink.search import (
    DEFAULT_ATTEMPTS,
    DEFAULT_SECONDS,
    Budget,
    Result,
    RunFn,
    shrink,
)
from pytest_xtc.exploration.shrink.steps import clamp_factors, drop_step, factor_candidates

__all__ = [
    "DEFAULT_ATTEMPTS", "DEFAULT_SECONDS", "SCHEDULE_NAME", "Budget", "Kind", "Result",
    "RunFn", "State", "candidates", "case_file_data", "clamp_factors", "describe",
    "drop_step", "factor_candidates", "failure_kind", "graph_name", "kind_from_legacy_message",
    "node_candidates", "rerun_command", "shape_candidates", "shrink", "shrink_bundle",
    "write_case_file",
]
