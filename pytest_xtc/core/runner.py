"""Running one case on one target: probe, capabilities, compile, run, check. No pytest.

The target's own work (compile, placement check, run) happens in a forked child when
isolation is on (the default where ``fork`` exists): a crash or a hang there fails one
case, with its cause, and the session goes on. An :class:`~pytest_xtc.core.remote.
IsolatedAdapter` (what the registry gives) does it in a worker its host process forks.
Checking happens in the parent. Every case's operands are weighed against a memory budget
before any is made.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import time
import traceback
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from pytest_xtc.core import checking, graphs, isolation, perf, placement, reference, remote
from pytest_xtc.core.adapter import ONCE, InfrastructureError, TargetAdapter, Tier, Timing
from pytest_xtc.core.cases import Case, case_bytes
from pytest_xtc.core.limits import (
    DEFAULT_MAX_CASE_BYTES,
    check_budget,
    check_limit,
    worker_memory_limit,
)
from pytest_xtc.core.outcome import Outcome, Phase, Status

LOCK_DIR_ENV = "XTC_LOCK_DIR"
DEVICE_WAIT_S = 3600.0  # longest wait for a device another worker holds


@dataclass
class Settings:
    """How cases run; the same for every case of a session."""

    base_seed: int = 0
    isolate: bool = True
    timing: Timing = ONCE
    repeat_check: bool = False  # run twice, flag results that differ bit for bit
    limits: dict[str, float] = field(default_factory=dict)  # overrides: compile, run
    perf: bool = True  # record the performance of passed cases (kernel times from ``timing``)
    peak: bool = False  # also the fraction of the device's peak (costs a measurement)
    max_case_bytes: int = DEFAULT_MAX_CASE_BYTES  # a case needing more is skipped, saying so

    def __post_init__(self) -> None:
        """Refuse limits that are not finite and positive (ValueError naming the option)."""
        for phase, value in self.limits.items():
            self.limits[phase] = check_limit(f"--xtc-{phase}-timeout", value)
        check_budget("--xtc-max-case-bytes", self.max_case_bytes)


@dataclass
class _Work:
    """What the target's side of a case sends back to the checking side."""

    phase: Phase = Phase.COMPILE
    failure: str = ""
    infrastructure: bool = False
    compile_s: float = 0.0
    run_s: float = 0.0
    times: list[float] = field(default_factory=list)
    inputs: list[np.ndarray] = field(default_factory=list)
    outputs: list[np.ndarray] = field(default_factory=list)
    second: list[np.ndarray] | None = None  # outputs of the repeat-check run


def _failure(exc: BaseException) -> str:
    """The exception and where it was raised, in a few lines."""
    if not isinstance(exc, Exception):  # SystemExit, KeyboardInterrupt...
        return f"{type(exc).__name__}: {exc}"
    frames = traceback.extract_tb(exc.__traceback__)[-3:]
    where = "; ".join(f"{Path(f.filename).name}:{f.lineno} in {f.name}" for f in frames)
    return f"{type(exc).__name__}: {exc}" + (f" [{where}]" if where else "")


def _is_infrastructure(exc: BaseException, phase: str) -> bool:
    """A toolchain that is missing a file or cannot start, or an adapter's own say-so."""
    return isinstance(exc, InfrastructureError) or (
        phase == Phase.COMPILE and isinstance(exc, OSError)
    )


def device_lock(key: str | None) -> AbstractContextManager[Any]:
    """A cross-process lock for one physical device (``filelock``); none for ``None``."""
    if key is None:
        return nullcontext()
    from filelock import FileLock

    folder = Path(os.environ.get(LOCK_DIR_ENV) or Path(tempfile.gettempdir()) / "pytest-xtc-locks")
    folder.mkdir(parents=True, exist_ok=True)
    return FileLock(str(folder / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', key)}.lock"))


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
    if probe.tier is Tier.UNAVAILABLE:
        outcome.message = f"{adapter.name}: {probe.reason}"
        return outcome
    try:
        missing = adapter.capabilities().missing(case)
    except Exception as exc:
        return _end(
            outcome, Status.FAILED, Phase.CAPABILITIES, f"capabilities() raised {_failure(exc)}"
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
        return _end(outcome, Status.FAILED, Phase.COMPILE, f"time limits: {_failure(exc)}")

    execute = probe.tier is Tier.EXECUTE
    inputs: list[np.ndarray] = []
    outputs: list[np.ndarray] = []
    if execute:
        outcome.seed = case.seed(settings.base_seed)
        inputs = case.make_inputs(outcome.seed)
        outputs = [np.full(o.shape, np.nan, o.dtype) for o in graphs.outputs(case.graph)]
    request = _Request(case, workdir, inputs, outputs, execute, settings)
    try:
        if isinstance(adapter, remote.IsolatedAdapter):
            done: _Work = adapter.work(request, limits, Phase.COMPILE.value)
        elif settings.isolate and isolation.available():
            done = _worker(adapter, workdir).call(request, limits, Phase.COMPILE.value)
        else:
            done = target_work(adapter, request, lambda phase: None)
    except isolation.ChildFailure as exc:
        phase = exc.phase if exc.phase in {p.value for p in Phase} else Phase.COMPILE.value
        status = Status.ERROR if phase in (Phase.COMPILE, Phase.WAIT_DEVICE) else Status.FAILED
        return _end(outcome, status, phase, str(exc))
    outcome.compile_s, outcome.run_s, outcome.times = done.compile_s, done.run_s, done.times
    if done.failure:
        status = Status.ERROR if done.infrastructure else Status.FAILED
        return _end(outcome, status, done.phase, done.failure)
    if not execute:
        return _end(outcome, Status.PASSED, done.phase, "")
    outcome = _check(outcome, case, inputs, done)
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
        return perf.record(case.graph, inputs, times, settings.timing, peak)
    except Exception as exc:
        return {"error": _failure(exc)}


@dataclass
class _Request:
    """One case's target work, as sent to the worker."""

    case: Case
    workdir: Path
    inputs: list[np.ndarray]
    outputs: list[np.ndarray]
    execute: bool
    settings: Settings


def target_work(
    adapter: TargetAdapter,
    request: _Request,
    report: Callable[[str], None],
    in_worker: bool = False,
) -> _Work:
    """The target's side of a case, run in a worker (or in process without isolation).
    Whatever the adapter raises fails the case with its cause named, ``SystemExit`` and
    ``KeyboardInterrupt`` included (in process, a KeyboardInterrupt is the user's: it
    propagates)."""
    case, workdir, inputs, outputs = request.case, request.workdir, request.inputs, request.outputs
    execute, settings = request.execute, request.settings
    done = _Work()
    phase = Phase.COMPILE
    try:
        start = time.perf_counter()
        artifact = adapter.compile(case, workdir)
        done.compile_s = time.perf_counter() - start
        if case.placement is not None:
            phase = Phase.PLACEMENT
            placement.check(case, artifact.directory)
        if not execute:
            phase = Phase.CHECK_ARTIFACT
            adapter.check_artifact(case, artifact)
            done.phase = phase
            return done
        phase = Phase.WAIT_DEVICE
        report(phase)
        with device_lock(adapter.lock_key()):
            phase = Phase.RUN
            report(phase)
            first = [a.copy() for a in inputs]
            start = time.perf_counter()
            result = adapter.run(artifact, first, outputs, settings.timing)
            done.run_s = time.perf_counter() - start
            if settings.repeat_check:
                again = [np.full_like(o, np.nan) for o in outputs]
                adapter.run(artifact, [a.copy() for a in inputs], again, ONCE)
                done.second = again
        done.phase, done.times, done.inputs, done.outputs = (
            Phase.CHECK,
            result.times,
            first,
            outputs,
        )
    except Exception as exc:
        done.phase, done.failure = phase, f"{phase} failed: {_failure(exc)}"
        done.infrastructure = _is_infrastructure(exc, phase)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt) and not in_worker:
            raise
        done.phase, done.failure = phase, f"{phase} raised {_failure(exc)}"
    return done


def _check(outcome: Outcome, case: Case, pristine: list[np.ndarray], done: _Work) -> Outcome:
    seed = outcome.seed
    in_names = [o.name for o in graphs.inputs(case.graph)]
    out_names = [o.name for o in graphs.outputs(case.graph)]
    problems = checking.changed_inputs(in_names, pristine, done.inputs)
    ref = reference.evaluate(case.graph, pristine, exact=case.exact, c=case.c)
    comparison = checking.compare(out_names, done.outputs, ref)
    outcome.worst_ratio = comparison.worst_ratio
    problems += [m.describe() for m in comparison.mismatches]
    if done.second is not None:
        problems += checking.unstable_outputs(out_names, done.outputs, done.second)
    if problems:
        return _end(
            outcome,
            Status.FAILED,
            Phase.CHECK,
            f"wrong results (seed {seed}): " + "; ".join(problems),
        )
    return _end(outcome, Status.PASSED, Phase.CHECK, "")


def _end(outcome: Outcome, status: Status, phase: str, message: str) -> Outcome:
    outcome.status, outcome.phase, outcome.message = status, Phase(phase), message
    return outcome
