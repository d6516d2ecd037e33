"""Running one case on one target: probe, capabilities, compile, run, check. No pytest."""

from __future__ import annotations

import enum
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pytest_xtc import checking, graphs, placement, reference
from pytest_xtc.adapter import TargetAdapter, Tier
from pytest_xtc.cases import Case


class Status(str, enum.Enum):
    PASSED = "passed"
    FAILED = "failed"  # wrong results, or a compile or run failure: not conformant
    SKIPPED = "skipped"  # this machine cannot run the target (probe says why)
    NOT_SUPPORTED = "not-supported"  # the adapter declares the capability absent


@dataclass
class Outcome:
    case: str
    target: str
    status: Status
    phase: str  # probe, capabilities, compile, placement, check-artifact, run, check
    message: str = ""
    tier: str = ""
    seed: int | None = None
    worst_ratio: float | None = None
    compile_s: float = 0.0
    run_s: float = 0.0
    times: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.value
        return data


def _failure(exc: BaseException) -> str:
    """The exception and where it was raised, in a few lines."""
    frames = traceback.extract_tb(exc.__traceback__)[-3:]
    where = "; ".join(f"{Path(f.filename).name}:{f.lineno} in {f.name}" for f in frames)
    return f"{type(exc).__name__}: {exc}" + (f" [{where}]" if where else "")


def run_case(adapter: TargetAdapter, case: Case, workdir: Path, base_seed: int = 0) -> Outcome:
    """Everything about one case on one target, as an :class:`Outcome`. Never raises for
    what a target does wrong: that is the outcome."""
    probe = adapter.status()
    outcome = Outcome(case.id, adapter.name, Status.SKIPPED, "probe", tier=probe.tier.value)
    if probe.tier is Tier.UNAVAILABLE:
        outcome.message = f"{adapter.name}: {probe.reason}"
        return outcome
    try:
        missing = adapter.capabilities().missing(case)
    except Exception as exc:
        return _failed(outcome, "capabilities", f"capabilities() raised {_failure(exc)}")
    if missing:
        outcome.status, outcome.phase = Status.NOT_SUPPORTED, "capabilities"
        outcome.message = f"{adapter.name}: {missing}"
        return outcome

    start = time.perf_counter()
    try:
        artifact = adapter.compile(case, workdir)
    except Exception as exc:
        return _failed(outcome, "compile", f"compilation failed: {_failure(exc)}")
    finally:
        outcome.compile_s = time.perf_counter() - start

    if case.placement is not None:
        try:
            placement.check(case, artifact.directory)
        except Exception as exc:
            return _failed(outcome, "placement", f"placement check failed: {_failure(exc)}")

    if probe.tier is Tier.COMPILE_ONLY:
        try:
            adapter.check_artifact(case, artifact)
        except Exception as exc:
            return _failed(outcome, "check-artifact", f"artifact check failed: {_failure(exc)}")
        outcome.status, outcome.phase = Status.PASSED, "check-artifact"
        return outcome

    seed = outcome.seed = case.seed(base_seed)
    inputs = case.make_inputs(seed)
    pristine = [a.copy() for a in inputs]
    out_specs = graphs.outputs(case.graph)
    outputs = [np.full(o.shape, np.nan, dtype=o.dtype) for o in out_specs]
    start = time.perf_counter()
    try:
        result = adapter.run(artifact, inputs, outputs)
    except Exception as exc:
        return _failed(outcome, "run", f"run failed (seed {seed}): {_failure(exc)}")
    finally:
        outcome.run_s = time.perf_counter() - start
    outcome.times = result.times

    outcome.phase = "check"
    in_names = [o.name for o in graphs.inputs(case.graph)]
    problems = checking.changed_inputs(in_names, pristine, inputs)
    ref = reference.evaluate(case.graph, pristine, exact=case.exact, c=case.c)
    comparison = checking.compare([o.name for o in out_specs], outputs, ref)
    outcome.worst_ratio = comparison.worst_ratio
    problems += [m.describe() for m in comparison.mismatches]
    if problems:
        return _failed(outcome, "check", f"wrong results (seed {seed}): " + "; ".join(problems))
    outcome.status = Status.PASSED
    return outcome


def _failed(outcome: Outcome, phase: str, message: str) -> Outcome:
    outcome.status, outcome.phase, outcome.message = Status.FAILED, phase, message
    return outcome
