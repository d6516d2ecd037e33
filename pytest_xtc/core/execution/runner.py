"""Running one case on one target: probe, capabilities, compile, run, check. No pytest.

The target's own work (compile, placement check, run) happens in a forked child when
isolation is on (the default where ``fork`` exists): a crash or a hang there fails one
case, with its cause, and the session goes on. An :class:`~pytest_xtc.core.execution.remote.
IsolatedAdapter` (what the registry gives) does it in a worker its host process forks.
Checking happens in the parent. Every case's operands are weighed against a memory budget
before any is made.
"""

from __future__ import annotations

import contextlib
import hashlib
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from pytest_xtc.core.adapter import TargetAdapter, Tier
from pytest_xtc.core.cases import graphs, values
from pytest_xtc.core.cases.case import Case, case_bytes
from pytest_xtc.core.cases.selectors import Traits
from pytest_xtc.core.execution import isolation, perf, remote
from pytest_xtc.core.execution.settings import Settings
from pytest_xtc.core.execution.work import (
    Work,
    WorkRequest,
    describe_failure,
    device_lock,
    target_work,
)
from pytest_xtc.core.judging import checking, precision, reference
from pytest_xtc.core.limits import (
    check_limit,
    worker_memory_limit,
)
from pytest_xtc.core.outcome import Failure, FailureKind, Outcome, Phase, Status

__all__ = ["Settings", "device_lock", "run_case"]

DEVICE_WAIT_S = 3600.0  # longest wait for a device another worker holds
CALLS = 2  # kernel calls per case, each on fresh inputs: state carried between calls shows


_workers: dict[int, isolation.Worker] = {}


def _worker(adapter: TargetAdapter, workdir: Path) -> isolation.Worker:
    """The forked worker of an adapter built in this process; the first call prepares the
    adapter here, so that every child it forks starts warm."""
    if id(adapter) not in _workers:
        with contextlib.suppress(Exception):  # the cases meet the same problem and report it
            adapter.prepare(workdir.parent / f"prepare-{adapter.name}")
        _workers[id(adapter)] = isolation.Worker(
            partial(target_work, adapter, in_worker=True), worker_memory_limit(adapter)
        )
    return _workers[id(adapter)]


def _limits(adapter: TargetAdapter, settings: Settings) -> dict[str, float]:
    """Each phase's time limit: the adapter's, overridden by the settings'. Raises
    ValueError (naming the limit) for one that is not finite and positive."""
    compile_limit, run_limit = adapter.time_limits()
    limits = {
        Phase.COMPILE.value: check_limit("time_limits() compile limit", compile_limit),
        Phase.RUN.value: check_limit("time_limits() run limit", run_limit),
        Phase.WAIT_DEVICE.value: DEVICE_WAIT_S,
    }
    limits.update(settings.limits)
    return limits


def run_case(
    adapter: TargetAdapter, case: Case, workdir: Path, settings: Settings | None = None
) -> Outcome:
    """Everything about one case on one target, as an :class:`Outcome`. Never raises for
    what a target does wrong: that is the outcome."""
    settings = settings or Settings()
    probe = adapter.status()
    outcome = Outcome(case.id, adapter.name, Status.SKIPPED, Phase.PROBE, tier=probe.tier.value)
    outcome.traits = Traits.of(case).to_dict()
    if probe.tier is Tier.UNAVAILABLE:
        outcome.message = f"{adapter.name}: {probe.reason}"
        return outcome
    if case.schedule.refused:  # XTC's own strategy could not make this schedule
        return _end(outcome, Status.NOT_SUPPORTED, Phase.CAPABILITIES, case.schedule.refused)
    try:
        missing = adapter.capabilities().missing(case)
    except Exception as exc:
        return _end(
            outcome,
            Status.FAILED,
            Phase.CAPABILITIES,
            f"capabilities() raised {describe_failure(exc)}",
            _raised(exc),
        )
    if missing:
        return _end(outcome, Status.NOT_SUPPORTED, Phase.CAPABILITIES, f"{adapter.name}: {missing}")
    needed = case_bytes(case)
    if needed > settings.max_case_bytes:
        message = (
            f"{case.id} needs about {needed / 2**20:,.0f} MiB for its operands and reference, "
            f"over the budget of {settings.max_case_bytes / 2**20:,.0f} MiB "
            "(--xtc-max-case-bytes)"
        )
        return _end(outcome, Status.SKIPPED, Phase.CAPABILITIES, message)
    try:
        limits = _limits(adapter, settings)
    except Exception as exc:
        return _end(outcome, Status.FAILED, Phase.COMPILE, f"time limits: {describe_failure(exc)}",
                    _raised(exc))

    execute = probe.tier is Tier.EXECUTE
    input_sets: list[list[np.ndarray]] = [[]]
    outputs: list[np.ndarray] = []
    if execute:
        outcome.seed = case.seed(settings.base_seed)
        input_sets = [
            case.make_inputs(case.seed(settings.base_seed, n)) for n in range(CALLS)
        ]
        outputs = [values.unwritten(o.shape, o.dtype) for o in graphs.outputs(case.graph)]
    inputs = input_sets[0]
    request = WorkRequest(case, workdir, inputs, outputs, execute, settings, input_sets[1:])
    try:
        if isinstance(adapter, remote.IsolatedAdapter):
            done: Work = adapter.work(request, limits, Phase.COMPILE.value)
        elif settings.isolate and isolation.available():
            done = _worker(adapter, workdir).call(request, limits, Phase.COMPILE.value)
        else:
            done = target_work(adapter, request, lambda phase: None)
    except isolation.ChildFailure as exc:
        phase = exc.phase if exc.phase in {p.value for p in Phase} else Phase.COMPILE.value
        status = Status.ERROR if phase in (Phase.COMPILE, Phase.WAIT_DEVICE) else Status.FAILED
        return _end(outcome, status, phase, str(exc), exc.kind or _raised(exc))
    outcome.compile_s, outcome.run_s, outcome.times = done.compile_s, done.run_s, done.times
    if done.failure:
        status = Status.ERROR if done.infrastructure else Status.FAILED
        return _end(outcome, status, done.phase, done.failure, done.kind)
    if not execute:
        return _end(outcome, Status.PASSED, done.phase, "")
    outcome = _check(outcome, case, input_sets, done)
    if outcome.status is Status.PASSED and settings.perf:
        outcome.perf = _perf(adapter, case, inputs, outcome.times, settings)
    return outcome


def _perf(
    adapter: TargetAdapter,
    case: Case,
    inputs: list[np.ndarray],
    times: list[float],
    settings: Settings,
) -> dict[str, Any]:
    """The case's performance record; a failure to make it is noted, never a verdict."""
    try:
        with_peak = settings.peak and perf.flop_count(case.graph)
        peak = perf.device_peak(adapter, case.dtype) if with_peak else None
        with np.errstate(all="ignore"):  # special values: numpy's own NaN and overflow
            return perf.record(case.graph, inputs, times, settings.timing, peak)
    except Exception as exc:
        return {"error": describe_failure(exc)}


def _check(
    outcome: Outcome, case: Case, pristine: list[list[np.ndarray]], done: Work
) -> Outcome:
    """Every call's results by the reference's rules, the guard bands, the repeat check,
    then the statistical precision check over the calls' random contraction outputs."""
    seed = outcome.seed
    in_names = [o.name for o in graphs.inputs(case.graph)]
    out_names = [o.name for o in graphs.outputs(case.graph)]
    outcome.guarded, outcome.calls = done.guarded, len(done.calls)
    if done.calls:
        outcome.output_digest = output_digest(out_names, list(done.calls[0].outputs))
    problems: list[str] = []
    found: list[precision.Terms] = []
    for n, (given, call) in enumerate(zip(pristine, done.calls, strict=True)):
        said = checking.changed_inputs(in_names, given, call.inputs) + call.guard
        ref = reference.evaluate(
            case.graph, given, exact=case.exact, c=case.c, ieee=case.values == "special"
        )
        comparison = checking.compare(out_names, call.outputs, ref)
        if n == 0:
            outcome.worst_ratio = comparison.worst_ratio
        said += [m.describe() for m in comparison.mismatches]
        if n:
            said = [f"call {n + 1} of {len(done.calls)} (fresh inputs): {line}"
                    for line in said]
        problems += said
        if case.values == "random" and not case.exact and comparison.ok:
            found += [
                precision.terms(case.dtype, got, expected, sample.magnitude, sample.k)
                for got, expected, sample in zip(call.outputs, ref.values, ref.samples,
                                                 strict=True)
                if sample is not None
            ]
    if done.second is not None:
        problems += checking.unstable_outputs(out_names, done.outputs, done.second)
    if found and not problems:
        total = precision.pool(found)[case.dtype]
        outcome.precision = total.to_dict()
        problem = total.problem()
        if problem:
            problems.append(problem)
    if problems:
        return _end(
            outcome,
            Status.FAILED,
            Phase.CHECK,
            f"wrong results (seed {seed}): " + "; ".join(problems),
            FailureKind(Failure.WRONG_RESULTS),
        )
    return _end(outcome, Status.PASSED, Phase.CHECK, "")


def output_digest(names: list[str], outputs: list[np.ndarray]) -> str:
    """SHA-256 over each output's name, dtype, shape and bytes: what a rerun compares."""
    digest = hashlib.sha256()
    for name, array in zip(names, outputs, strict=True):
        head = f"{name}\0{array.dtype}\0{array.shape!r}\0"
        digest.update(head.encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def _end(outcome: Outcome, status: Status, phase: str, message: str,
         kind: FailureKind | None = None) -> Outcome:
    outcome.status, outcome.phase, outcome.message = status, Phase(phase), message
    outcome.kind = kind
    return outcome


def _raised(exc: BaseException) -> FailureKind:
    return FailureKind(Failure.EXCEPTION, type(exc).__name__)
