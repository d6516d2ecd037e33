"""The target's side of a case: compile, check the placement, hold the device, run. It
runs in a worker process (or in process without isolation) and sends a :class:`Work`
back to the checking side. No pytest."""

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

from pytest_xtc.core import placement
from pytest_xtc.core.adapter import ONCE, InfrastructureError, TargetAdapter
from pytest_xtc.core.cases import Case
from pytest_xtc.core.outcome import Phase
from pytest_xtc.core.settings import Settings

LOCK_DIR_ENV = "XTC_LOCK_DIR"


@dataclass
class Work:
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
    outputs: list[np.ndarray]
    execute: bool
    settings: Settings


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
        done.phase, done.failure = phase, f"{phase} failed: {describe_failure(exc)}"
        done.infrastructure = is_infrastructure(exc, phase)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt) and not in_worker:
            raise
        done.phase, done.failure = phase, f"{phase} raised {describe_failure(exc)}"
    return done
