"""Running one case on one target: probe, capabilities, compile, run, check. No pytest.

The target's own work (compile, placement check, run) happens where the adapter's
executor (:mod:`executors`) puts it: a forked child when isolation is on (the default
where ``fork`` exists), so that a crash or a hang there fails one case, with its cause,
and the session goes on. Checking happens in the parent, whose references are computed
while a worker compiles and runs (the executor's ``meanwhile``). Every case's operands are
weighed against a memory budget before any is made. Inputs are made in this process's
own memory (the reference reads them there) and copied once into shared memory on their
way to a worker; a worker's output placeholders are made in shared memory (no copy).
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from pytest_xtc.core.adapter import ONCE, TargetAdapter, Tier, declared_placements
from pytest_xtc.core.cases import graphs
from pytest_xtc.core.cases.case import Case, case_bytes
from pytest_xtc.core.cases.selectors import Traits
from pytest_xtc.core.execution import kernels, order, packed, perf
from pytest_xtc.core.execution.executors import executor_for
from pytest_xtc.core.execution.settings import Settings
from pytest_xtc.core.execution.work import (
    TIMED_RUN,
    Work,
    WorkRequest,
    describe_failure,
    device_lock,
    outcome_phase,
)
from pytest_xtc.core.judging import checks
from pytest_xtc.core.judging.reference import Reference
from pytest_xtc.core.limits import check_limit
from pytest_xtc.core.outcome import Failure, FailureKind, Outcome, Phase, Status
from pytest_xtc.core.workers import interrupts, isolation, transfer

__all__ = ["Settings", "device_lock", "run_case"]

DEVICE_WAIT_S = 3600.0  # longest wait for a device another worker holds
CALLS = 2  # untimed kernel calls per case, each on fresh inputs (then the timed one, work.py)
#: Floating-point operations per second below which no correct kernel falls: a scalar loop
#: missing the cache and the TLB on every access (XTC's unscheduled 128x4096x4096 matmul
#: made 150 MFLOP/s on a 2-core VM, 70 beside another job).
SLOWEST_FLOPS = 10e6


def _limits(adapter: TargetAdapter, case: Case, settings: Settings) -> dict[str, float]:
    """Each phase's time limit: the adapter's, overridden by the settings'. The run limit
    is per kernel call, and the adapter's grows with the case's work: at least its flops
    at :data:`SLOWEST_FLOPS` (a user's own limit is kept as given). The timed run, whose
    timing loop makes several calls, has it once for each. Raises ValueError (naming the
    limit) for one that is not finite and positive."""
    compile_limit, run_limit = adapter.time_limits()
    run_s = check_limit("time_limits() run limit", run_limit)
    limits = {
        Phase.COMPILE.value: check_limit("time_limits() compile limit", compile_limit),
        Phase.RUN.value: max(run_s, perf.flop_count(case.graph) / SLOWEST_FLOPS),
        Phase.WAIT_DEVICE.value: DEVICE_WAIT_S,
    }
    limits.update(settings.limits)
    limits[TIMED_RUN] = limits[Phase.RUN.value] * perf.kernel_calls(settings.timing)
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
        if probe.raised:  # no finding about this machine: an error of the run
            outcome.status = Status.ERROR
            outcome.message = f"{adapter.name}: its probe failed, an error of the run: " \
                              f"{probe.reason}"
        return outcome
    if case.schedule.refused:  # XTC's own strategy could not make this schedule
        return _end(outcome, Status.NOT_SUPPORTED, Phase.CAPABILITIES, case.schedule.refused)
    try:
        capabilities = adapter.capabilities()
        missing = capabilities.missing(case)
    except Exception as exc:
        return _end(
            outcome,
            Status.FAILED,
            Phase.CAPABILITIES,
            f"capabilities() raised {describe_failure(exc)}",
            _raised(exc),
        )
    declared = declared_placements(adapter)  # what the cases were expanded by
    if declared is not None and capabilities.placements != declared:
        said = f"{sorted(capabilities.placements)} but its class declares {sorted(declared)}"
        return _end(outcome, Status.FAILED, Phase.CAPABILITIES,
                    f"{adapter.name}: capabilities() gives placements {said}")
    if missing:
        return _end(outcome, Status.NOT_SUPPORTED, Phase.CAPABILITIES, f"{adapter.name}: {missing}")
    over = _over_budget(case, settings)
    if over:
        return _end(outcome, Status.SKIPPED, Phase.CAPABILITIES, over)
    try:
        limits = _limits(adapter, case, settings)
    except Exception as exc:
        return _end(outcome, Status.FAILED, Phase.COMPILE, f"time limits: {describe_failure(exc)}",
                    _raised(exc))

    # A split run makes the inputs here, whether or not this machine can run the kernels.
    execute = probe.tier is Tier.EXECUTE or (settings.split and probe.can_compile)
    twin_first = probe.tier is Tier.EXECUTE and not settings.split and case.twin is not None
    executor = executor_for(adapter, settings)
    if twin_first and case.twin is not None and executor.kept != case.twin.id:
        # Right before it, in the same worker (as the order check's pair): a kernel cache
        # keyed without what tells them apart (attributes, dtype, shapes) gives this case
        # its twin's kernel. Unless the twin's own run, just before, kept its worker.
        quiet = replace(settings, order=(), timing=ONCE, perf=False, peak=False,
                        keep_worker=True, kept_worker=False)
        run_case(adapter, case.twin, workdir.with_name(f"{workdir.name}-twin-first"), quiet)
    empty = transfer.shared_empty if executor.shared else np.empty
    input_sets: list[list[np.ndarray]] = [[]]
    outputs: list[np.ndarray] = []  # their shapes and dtypes (untouched memory)
    if execute:
        outcome.seed = case.seed(settings.base_seed)
        # Inputs in this process's own memory (the reference reads them at its speed);
        # they are copied once into shared memory as they go to a worker.
        input_sets = [case.make_inputs(case.seed(settings.base_seed, n)) for n in range(CALLS)]
        outputs = [empty(o.shape, np.dtype(o.dtype)) for o in graphs.outputs(case.graph)]
    inputs = input_sets[0]
    mine = replace(settings, kept_worker=True) if twin_first else settings
    store = None if settings.from_pack else settings.kernels  # nothing compiles from a pack
    kept = kernels.before(adapter, case, workdir, store)  # a kept kernel placed, or not
    request = WorkRequest(case, workdir, inputs, outputs, execute, replace(mine, kernels=None),
                          input_sets[1:], kernels.mode(kept))
    expected: dict[int, Reference] = {}

    def references() -> None:  # while a worker compiles and runs: this core is free
        expected.update(checks.references(case, input_sets))

    try:
        if settings.from_pack:  # judged from a pack's results: nothing compiles or runs here
            done: Work = packed.from_pack(packed.opened(settings.from_pack), case, input_sets,
                                          settings, adapter.name)
            references()
        else:
            wanted = execute and not settings.pack_dir  # a packed case is judged later
            executor.kept = ""
            done = _refused(kept) or executor.run(request, limits, references if wanted else None)
            # a twin may run in that worker next, as after running this case first itself
            executor.kept = case.id if done.kept and not settings.kept_worker else ""
            refused = {"failure": done.failure, "kind": done.kind.detail} \
                if done.rejected and done.kind else None
            kernels.after(store, kept, workdir, done.kernel_files, done.notes, refused)
        interrupts.check()  # a Ctrl-C an in-process adapter swallowed: no verdict
    except isolation.ChildFailure as exc:
        phase = outcome_phase(exc.phase).value
        status = Status.ERROR if phase in (Phase.COMPILE, Phase.WAIT_DEVICE) else Status.FAILED
        return _end(outcome, status, phase, str(exc), exc.kind or _raised(exc))
    if settings.pack_dir:
        packed.save(Path(settings.pack_dir), adapter.name, case, request, done, limits)
        if not done.failure:
            return _end(outcome, Status.SKIPPED, Phase.RUN,
                        f"packed into {settings.pack_dir}, not run here: run its device runner, "
                        f"then judge with --xtc-from-pack={settings.pack_dir}")
    elif settings.run_on:
        done = packed.run_remote(case, request, done, limits, adapter.name, input_sets)
    if execute and (settings.from_pack or settings.run_on):
        outcome.tier = Tier.EXECUTE.value  # the kernels ran, on the machine that ran the pack
    outcome = _judge(outcome, adapter, case, input_sets if execute else [], done, settings,
                     workdir, expected)
    outcome.kernel_cached = None if kept is None else kept.hit
    if done.notes:
        outcome.message = "; ".join(filter(None, [outcome.message, *done.notes]))
    return outcome


def _refused(kept: kernels.Lookup | None) -> Work | None:
    """The work of a case whose compile the compiler refused in an earlier run, the
    refusal kept by the kernel cache (``CompileRejected``): nothing compiles or runs."""
    if kept is None or not kept.refused:
        return None
    return Work(failure=kept.refused["failure"], rejected=True,
                kind=FailureKind(Failure.EXCEPTION, kept.refused["kind"]),
                notes=["the compiler's refusal kept by the kernel cache: not compiled again"])


def _over_budget(case: Case, settings: Settings) -> str:
    """Why the case's operands are over the memory budget, or ""."""
    needed = case_bytes(case)
    if needed <= settings.max_case_bytes:
        return ""
    return (
        f"{case.id} needs about {needed / 2**20:,.0f} MiB for its operands and reference, "
        f"over the budget of {settings.max_case_bytes / 2**20:,.0f} MiB "
        "(--xtc-max-case-bytes)"
    )


def _judge(
    outcome: Outcome,
    adapter: TargetAdapter,
    case: Case,
    input_sets: list[list[np.ndarray]],
    done: Work,
    settings: Settings,
    workdir: Path,
    expected: dict[int, Reference],
) -> Outcome:
    """The outcome of the target's work ``done``: its failure, or its results checked
    against the references ``expected`` (those missing are computed now)."""
    outcome.compile_s, outcome.run_s, outcome.times = done.compile_s, done.run_s, done.times
    outcome.transfer_s = done.moved_s
    if done.failure:
        status = Status.ERROR if done.infrastructure else Status.FAILED
        if done.phase == Phase.SCHEDULE:
            status = Status.INVALID
        return _end(outcome, status, done.phase, done.failure, done.kind)
    if not input_sets:  # compiled and inspected, never run: its own status, not a pass
        why = adapter.status().reason or "compiled and inspected, not run"
        return _end(outcome, Status.COMPILED, done.phase, f"compile-only tier: {why}")
    inputs = input_sets[0]
    outcome = _check(outcome, case, input_sets, done, expected,
                     getattr(adapter, "deterministic", True) is not False)
    previous = order.followed(adapter.name, case.id)
    if outcome.status is Status.PASSED and settings.order and not settings.split:
        run = partial(run_case, adapter)
        outcome = order.check(outcome, case, workdir, settings, run, previous)
    if outcome.status is Status.PASSED and settings.perf:
        outcome.perf = _perf(adapter, case, inputs, outcome.times, settings, done.start_number)
    return outcome


def _perf(
    adapter: TargetAdapter,
    case: Case,
    inputs: list[np.ndarray],
    times: list[float],
    settings: Settings,
    start_number: int | None = None,
) -> dict[str, Any]:
    """The case's performance record; a failure to make it is noted, never a verdict."""
    try:
        with_peak = settings.peak and perf.flop_count(case.graph)
        peak = perf.device_peak(adapter, case.dtype) if with_peak else None
        with np.errstate(all="ignore"):  # special values: numpy's own NaN and overflow
            return perf.record(case.graph, inputs, times, settings.timing, peak,
                               limits=perf.ceilings(adapter, case.dtype, peak),
                               same_as=(graphs.canonical(case.graph), case.values),
                               start_number=start_number)
    except Exception as exc:
        return {"error": describe_failure(exc)}


def _check(
    outcome: Outcome, case: Case, pristine: list[list[np.ndarray]], done: Work,
    expected: dict[int, Reference], deterministic: bool = True,
) -> Outcome:
    """Every call's results through the per-case checks (judging/checks: one list)."""
    out_names = [o.name for o in graphs.outputs(case.graph)]
    outcome.guarded, outcome.calls = done.guarded, len(done.calls)
    if done.calls:
        outcome.output_digest = output_digest(out_names, list(done.calls[0].outputs))
    given = [*pristine, *[pristine[0]] * (len(done.calls) - len(pristine))]  # timed: set 1
    count = len(done.calls)
    seen = checks.Seen(case, [
        checks.Call(inputs, _left(inputs, call.inputs), call.outputs, call.guard,
                    _label(n, count, call.timed), call.timed)
        for n, (inputs, call) in enumerate(zip(given, done.calls, strict=True))
    ], done.guarded, done.second, references=expected, deterministic=deterministic)
    outcome.checks = checks.judge(seen)
    outcome.worst_ratio = outcome.checks["results"]["worst_ratio"]
    outcome.precision = outcome.checks.get("precision")
    if seen.problems:
        return _end(
            outcome,
            Status.FAILED,
            Phase.CHECK,
            f"wrong results (seed {outcome.seed}): " + "; ".join(seen.problems),
            FailureKind(Failure.WRONG_RESULTS),
        )
    return _end(outcome, Status.PASSED, Phase.CHECK, "")


def _left(given: list[np.ndarray], left: list[np.ndarray | None]) -> list[np.ndarray]:
    """What a call left of its inputs: the very arrays given where it left their bytes."""
    return [g if kept is None else kept for g, kept in zip(given, left, strict=True)]


def _label(n: int, count: int, timed: bool) -> str:
    """How a failure names call ``n`` (0-based) of ``count``: nothing for the first."""
    if timed:
        return f"call {n + 1} of {count} (timed, on call 1's inputs)"
    return f"call {n + 1} of {count} (fresh inputs)" if n else ""


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
