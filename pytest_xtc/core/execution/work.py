"""The target's side of a case: compile, check the placement, hold the device, run. It
runs in a worker process (or in process without isolation) and sends a :class:`Work`
back to the checking side. No pytest.

Every executed case calls the kernel at least three times, each on fresh output buffers
holding the unwritten sentinel (``values.py``): once per input set, untimed (a kernel
that carries state from one call to the next, a cache keyed by shape, is wrong on the
second), then the timed call on the first set (XTC's timing loop: its outputs are the last
timed kernel call's; once when performance is off). Every call is checked. Where the
adapter works in place (``guarded_buffers``), every operand lies inside guard bands
(``guard.py``).
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
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from pytest_xtc.core.adapter import (
    ONCE,
    CompileRejected,
    InfrastructureError,
    RunResult,
    TargetAdapter,
)
from pytest_xtc.core.cases import graphs, values
from pytest_xtc.core.cases.case import Case
from pytest_xtc.core.cases.schedule_rules import INVALID_CASE, InvalidSchedule
from pytest_xtc.core.execution import guard, kernels, perf, placement
from pytest_xtc.core.execution.settings import Settings
from pytest_xtc.core.outcome import Failure, FailureKind, Phase
from pytest_xtc.core.workers import confinement, interrupts, transfer
from pytest_xtc.core.workers.serving import TRANSFER

LOCK_DIR_ENV = "XTC_LOCK_DIR"
#: The timed call's phase: XTC's timing loop makes several kernel calls in it, so its time
#: limit is the run limit times their number (``runner``); a failure in it is the run's.
TIMED_RUN = "timed run"
Allocate = Callable[[Any, Any], np.ndarray]  # (shape, dtype) -> an uninitialised array


@dataclass
class Call:
    """One checked call of the kernel: what it left of its inputs (None for an input whose
    bytes it left as given: nothing to send back or compare again), its outputs, and the
    writes out of bounds its guard bands saw."""

    inputs: list[np.ndarray | None]
    outputs: list[np.ndarray]
    guard: list[str] = field(default_factory=list)
    timed: bool = False  # the timed call (last): its outputs are the last timed call's


@dataclass
class Work:
    """What the target's side of a case sends back to the checking side."""

    phase: Phase = Phase.COMPILE
    failure: str = ""
    kind: FailureKind | None = None  # the failure's kind: the exception's type
    infrastructure: bool = False
    compile_s: float = 0.0
    run_s: float = 0.0
    moved_s: float | None = None  # moving operands to a worker and back (None: in process)
    times: list[float] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)  # one per input set, then the timed one
    second: list[np.ndarray] | None = None  # outputs of the repeat-check run (the timed one)
    guarded: bool = False  # operands lay inside guard bands
    notes: list[str] = field(default_factory=list)  # what the worker did after the case
    export: Any = None  # the adapter's ExportedKernel, for a device runner (split runs)
    kept: bool = False  # the worker that did it is kept for the next case (``keep_worker``)
    #: the work folder's files right after a fresh compile, for the kernel cache (kernels.py)
    kernel_files: dict[str, str] | None = None
    start_number: int | None = None  # the timed call's first count (``perf.aimed``)
    rejected: bool = False  # the compiler refused the case (``CompileRejected``): kept

    @property
    def outputs(self) -> list[np.ndarray]:
        return self.calls[0].outputs if self.calls else []


def outcome_phase(name: str) -> Phase:
    """The outcome's phase for a phase a worker reported (the timed run is the run; a
    name the suite does not know, a worker's own, counts as compile)."""
    if name == TIMED_RUN:
        return Phase.RUN
    return Phase(name) if name in {p.value for p in Phase} else Phase.COMPILE


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


def lock_folder() -> Path:
    """Where the device locks are: ``XTC_LOCK_DIR``, else the temporary folder's
    ``pytest-xtc-locks`` (the session's: a case worker pins it before its own private
    temporary folder replaces the session's, :func:`confine`)."""
    return Path(os.environ.get(LOCK_DIR_ENV) or Path(tempfile.gettempdir()) / "pytest-xtc-locks")


def device_lock(key: str | None) -> AbstractContextManager[Any]:
    """A cross-process lock for one physical device (``filelock``); none for ``None``."""
    if key is None:
        return nullcontext()
    from filelock import FileLock

    folder = lock_folder()
    folder.mkdir(parents=True, exist_ok=True)
    return FileLock(str(folder / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', key)}.lock"))


def confine(adapter: TargetAdapter, request: WorkRequest) -> None:
    """In a case worker, before the case's code runs: the case writes only its own folder
    (:mod:`~pytest_xtc.core.workers.confinement`), and its device's lock folder."""
    shared = []
    if adapter.lock_key() is not None:
        folder = lock_folder()
        folder.mkdir(parents=True, exist_ok=True)
        os.environ[LOCK_DIR_ENV] = str(folder)  # the session's, whatever TMPDIR becomes
        shared.append(folder)
    confinement.enter(request.workdir, request.settings.keep_worker, shared)


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
    kernel: str = ""  # kernels.REUSE: the compile's files are placed; kernels.KEEP: digest them


def call_kernel(
    adapter: TargetAdapter,
    artifact: Any,
    case: Case,
    inputs: list[np.ndarray],
    like: list[np.ndarray],
    timing: Any,
    guarded: bool,
    empty: Allocate = np.empty,
    report: Callable[[str], None] = lambda phase: None,
    phase: str = Phase.RUN,
    call: int = 0,
) -> tuple[Call, Any]:
    """One call on copies of ``inputs`` and fresh outputs shaped ``like`` holding the
    unwritten sentinel, inside guard bands when ``guarded``. The call's inputs are
    ``inputs`` themselves when the kernel left their copies' bytes alone; its outputs are
    allocated by ``empty`` (shared memory in a worker: they go back without a copy).
    ``report`` is told ``phase`` (``run``; :data:`TIMED_RUN` for the timed call) as the
    adapter's run starts, ``transfer`` once the call's own look at what it left (its
    inputs' bytes, its guard bands) is done: the run limit times the target's work and
    that look (work a run in process does too), not the copies around them; a worker's
    ``transfer_s`` counts only the moving (issue 56: 256 MB of inputs compared took about
    0.25 s a case, recorded as 1 ms/MB of transfer). ``call``: the call's number in the
    case (its operands' alignment may change between calls: ``guard.for_call``)."""
    interrupts.check()  # an adapter in this process may have caught the last Ctrl-C
    shifts = [guard.offset(case.align, np.dtype(a.dtype).itemsize, n, call)
              for n, a in enumerate([*inputs, *like])]
    if not guarded:
        return _call_unguarded(adapter, artifact, inputs, like, timing, shifts, empty, report,
                               phase)
    in_names = [o.name for o in graphs.inputs(case.graph)]
    out_names = [o.name for o in graphs.outputs(case.graph)]
    placed = [guard.place(n, a, shift=at) for n, a, at in zip(in_names, inputs, shifts,
                                                               strict=False)]
    placed += [
        guard.place(n, values.unwritten(o.shape, o.dtype), shift=at)
        for n, o, at in zip(out_names, like, shifts[len(inputs) :], strict=True)
    ]
    views = [g.view for g in placed]
    report(phase)
    result = adapter.run(artifact, views[: len(inputs)], views[len(inputs) :], timing)
    left, found = _kept(inputs, views[: len(inputs)]), guard.check(placed)
    report(TRANSFER)
    outs = [_copy(v, empty) for v in views[len(inputs) :]]
    return Call(left, outs, found), result


def _call_unguarded(adapter: TargetAdapter, artifact: Any, inputs: list[np.ndarray],
                    like: list[np.ndarray], timing: Any, shifts: list[int], empty: Allocate,
                    report: Callable[[str], None], phase: str) -> tuple[Call, Any]:
    """A call on plain copies; operands the case puts off alignment (``shifts``) are
    handed over at their offsets, their outputs copied into ``empty``'s memory after."""
    ins = [guard.at_offset(a, at) if at else a.copy() for a, at in zip(inputs, shifts,
                                                                       strict=False)]
    outs = [_unwritten(o.shape, o.dtype, empty) for o in like]
    given = [guard.at_offset(o, at) if at else o
             for o, at in zip(outs, shifts[len(inputs) :], strict=True)]
    report(phase)
    result = adapter.run(artifact, ins, given, timing)
    left = _kept(inputs, ins)
    report(TRANSFER)
    for out, used in zip(outs, given, strict=True):
        if out is not used:
            np.copyto(out, used)
    return Call(left, outs), result


def _unwritten(shape: tuple[int, ...], dtype: Any, empty: Allocate) -> np.ndarray:
    array = empty(shape, dtype)
    values.fill_unwritten(array)
    return array


def _copy(array: np.ndarray, empty: Allocate) -> np.ndarray:
    copy = empty(array.shape, array.dtype)
    np.copyto(copy, array)
    return copy


def _kept(given: list[np.ndarray], after: list[np.ndarray]) -> list[np.ndarray | None]:
    """Each input as the kernel left it: None where its bytes are those given, a copy of
    what the kernel made of it otherwise."""
    return [None if same_bytes(g, a) else np.array(a) for g, a in zip(given, after, strict=True)]


def same_bytes(first: np.ndarray, second: np.ndarray, block: int = 1 << 18) -> bool:
    """Whether two arrays of one shape and dtype hold the same bytes (NaN payloads too),
    compared ``block`` bytes at a time (a small temporary, reused, in the cache)."""
    if first.shape != second.shape or first.dtype != second.dtype:
        return False
    one = np.ascontiguousarray(first).reshape(-1).view(np.uint8)
    two = np.ascontiguousarray(second).reshape(-1).view(np.uint8)
    return all(
        np.array_equal(one[at : at + block], two[at : at + block])
        for at in range(0, one.size, block)
    )


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
    case, workdir, execute = request.case, request.workdir, request.execute
    empty: Allocate = transfer.shared_empty if in_worker else np.empty
    done = Work()
    phase = Phase.COMPILE
    try:
        if in_worker:
            confine(adapter, request)
        start = time.perf_counter()
        with kernels.reusing(request.kernel == kernels.REUSE):
            artifact = adapter.compile(case, workdir)
        done.compile_s = time.perf_counter() - start
        where = Path(artifact.directory).resolve()
        if request.kernel == kernels.KEEP and where == workdir.resolve():
            done.kernel_files = kernels.manifest(workdir)  # before any of its code runs
        if case.placement is not None:
            phase = Phase.PLACEMENT
            placement.check(case, artifact.directory)
        if request.settings.exports:
            phase = Phase.RUN
            done.export = adapter.export(case, artifact)
            if done.export is None:
                raise InfrastructureError(f"{adapter.name} cannot export a compiled case for "
                                          "a device runner (TargetAdapter.export)")
            done.phase = phase
            return done
        if not execute:
            phase = Phase.CHECK_ARTIFACT
            adapter.check_artifact(case, artifact)
            done.phase = phase
            return done
        phase = Phase.WAIT_DEVICE
        report(phase)
        with device_lock(adapter.lock_key()):
            phase = Phase.RUN
            report(TRANSFER)
            done.guarded = guarded = adapter.guarded_buffers()
            call = partial(call_kernel, adapter, artifact, case, guarded=guarded, empty=empty,
                           report=report)
            done.times = _call_all(call, request, done)
        done.phase = Phase.CHECK
    except InvalidSchedule as exc:  # the case's own error, found before XTC compiles
        done.phase, done.failure = Phase.SCHEDULE, f"{INVALID_CASE}: {exc}"
    except Exception as exc:
        done.phase, done.failure = phase, f"{phase} failed: {describe_failure(exc)}"
        done.kind = FailureKind(Failure.EXCEPTION, type(exc).__name__)
        done.infrastructure = is_infrastructure(exc, phase)
        done.rejected = phase == Phase.COMPILE and isinstance(exc, CompileRejected)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt) and not in_worker:
            raise
        done.phase, done.failure = phase, f"{phase} raised {describe_failure(exc)}"
        done.kind = FailureKind(Failure.EXCEPTION, type(exc).__name__)
    return done


def _call_all(call: Callable[..., tuple[Call, RunResult]], request: WorkRequest,
              done: Work) -> list[float]:
    """Every kernel call of a case, into ``done.calls``: one untimed call per input set,
    then the timed one on the first set, whose outputs (those of the last timed kernel
    call) are checked like the others. Returns the timed call's times."""
    inputs, outputs, settings = request.inputs, request.outputs, request.settings
    start = time.perf_counter()
    first, once = call(inputs, outputs, ONCE)
    done.run_s = time.perf_counter() - start
    done.calls = [first]
    for n, more in enumerate(request.more, 1):
        done.calls.append(call(more, outputs, ONCE, call=n)[0])
    timing = perf.aimed(settings.timing, getattr(once, "times", None) or [])  # same inputs
    done.start_number = timing.number
    timed, result = call(inputs, outputs, timing, phase=TIMED_RUN, call=len(done.calls))
    timed.timed = True
    done.calls.append(timed)
    if settings.repeat_check:  # the timed call reran the first call's inputs
        done.second = timed.outputs
    return result.times
