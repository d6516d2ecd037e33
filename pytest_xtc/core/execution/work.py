"""The target's side of a case: compile, check the placement, hold the device, run. It
runs in a worker process (or in process without isolation) and sends a :class:`Work`
back to the checking side. No pytest.

Every executed case calls the kernel at least twice, each time on fresh inputs and fresh
output buffers holding the unwritten sentinel (``values.py``): a kernel that carries
state from one call to the next (a cache keyed by shape, an accumulator never reset) is
wrong on the second call. The first call is the timed one. Where the adapter works in
place (``guarded_buffers``), every operand lies inside guard bands (``guard.py``).
"""

from __future__ import annotations

import os
import re
import tempfile
import time
import traceback
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pytest_xtc.core.adapter import ONCE, InfrastructureError, TargetAdapter
from pytest_xtc.core.cases import graphs, values
from pytest_xtc.core.cases.case import Case
from pytest_xtc.core.execution import guard, placement
from pytest_xtc.core.execution.settings import Settings
from pytest_xtc.core.outcome import Failure, FailureKind, Phase

LOCK_DIR_ENV = "XTC_LOCK_DIR"


@dataclass
class Call:
    """One checked call of the kernel: what it left of its inputs, its outputs, and the
    writes out of bounds its guard bands saw."""

    inputs: list[np.ndarray]
    outputs: list[np.ndarray]
    guard: list[str] = field(default_factory=list)


@dataclass
class Work:
    """What the target's side of a case sends back to the checking side."""

    phase: Phase = Phase.COMPILE
    failure: str = ""
    kind: FailureKind | None = None  # the failure's kind: the exception's type
    infrastructure: bool = False
    compile_s: float = 0.0
    run_s: float = 0.0
    times: list[float] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)  # one per input set, the timed first
    second: list[np.ndarray] | None = None  # outputs of the repeat-check run
    guarded: bool = False  # operands lay inside guard bands

    @property
    def inputs(self) -> list[np.ndarray]:
        return self.calls[0].inputs if self.calls else []

    @property
    def outputs(self) -> list[np.ndarray]:
        return self.calls[0].outputs if self.calls else []


def describe_failure(exc: BaseException) -> str:
    """The exception and where it was raised, in a few lines."""
    if not isinstance(exc, Exception):  # SystemExit, KeyboardInterrupt...
        return f"{type(exc).__name__}: {exc}"
    frames = traceback.extract_tb(exc.__traceback__)[-3:]
    where = "; ".join(f"{Path(f.filename).name}:{f.lineno} in {f.name}" for f in frames)
    return f"{type(exc).__name__}: {exc}" + (f" [{where}]" if where else "")


def is_infrastructure(exc: BaseException, phase: str) -> bool:
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


@dataclass
class WorkRequest:
    """One case's target work, as sent to the worker."""

    case: Case
    workdir: Path
    inputs: list[np.ndarray]
    outputs: list[np.ndarray]  # their shapes and dtypes: every call gets fresh ones
    execute: bool
    settings: Settings
    more: list[list[np.ndarray]] = field(default_factory=list)  # further calls' inputs


def call_kernel(
    adapter: TargetAdapter,
    artifact: Any,
    case: Case,
    inputs: list[np.ndarray],
    like: list[np.ndarray],
    timing: Any,
    guarded: bool,
) -> tuple[Call, Any]:
    """One call on copies of ``inputs`` and fresh outputs shaped ``like`` holding the
    unwritten sentinel, inside guard bands when ``guarded``."""
    if not guarded:
        ins = [a.copy() for a in inputs]
        outs = [values.unwritten(o.shape, o.dtype) for o in like]
        result = adapter.run(artifact, ins, outs, timing)
        return Call(ins, outs), result
    in_names = [o.name for o in graphs.inputs(case.graph)]
    out_names = [o.name for o in graphs.outputs(case.graph)]
    placed = [guard.place(n, a) for n, a in zip(in_names, inputs, strict=True)]
    placed += [
        guard.place(n, values.unwritten(o.shape, o.dtype))
        for n, o in zip(out_names, like, strict=True)
    ]
    views = [g.view for g in placed]
    result = adapter.run(artifact, views[: len(inputs)], views[len(inputs) :], timing)
    found = guard.check(placed)
    copies = [np.array(v) for v in views]
    return Call(copies[: len(inputs)], copies[len(inputs) :], found), result


def target_work(
    adapter: TargetAdapter,
    request: WorkRequest,
    report: Callable[[str], None],
    in_worker: bool = False,
) -> Work:
    """The target's side of a case, run in a worker (or in process without isolation).
    Whatever the adapter raises fails the case with its cause named, ``SystemExit`` and
    ``KeyboardInterrupt`` included (in process, a KeyboardInterrupt is the user's: it
    propagates)."""
    case, workdir, inputs, outputs = request.case, request.workdir, request.inputs, request.outputs
    execute, settings = request.execute, request.settings
    done = Work()
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
            done.guarded = guarded = adapter.guarded_buffers()
            start = time.perf_counter()
            first, result = call_kernel(
                adapter, artifact, case, inputs, outputs, settings.timing, guarded
            )
            done.run_s = time.perf_counter() - start
            done.calls = [first]
            for more in request.more:
                call, _ = call_kernel(adapter, artifact, case, more, outputs, ONCE, guarded)
                done.calls.append(call)
            if settings.repeat_check:
                again, _ = call_kernel(adapter, artifact, case, inputs, outputs, ONCE, guarded)
                done.second = again.outputs
        done.phase, done.times = Phase.CHECK, result.times
    except Exception as exc:
        done.phase, done.failure = phase, f"{phase} failed: {describe_failure(exc)}"
        done.kind = FailureKind(Failure.EXCEPTION, type(exc).__name__)
        done.infrastructure = is_infrastructure(exc, phase)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt) and not in_worker:
            raise
        done.phase, done.failure = phase, f"{phase} raised {describe_failure(exc)}"
        done.kind = FailureKind(Failure.EXCEPTION, type(exc).__name__)
    return done
