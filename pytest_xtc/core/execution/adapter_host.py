"""The adapter host's side of :class:`~pytest_xtc.core.execution.remote.IsolatedAdapter`:
what runs in the host process. It loads the entry point, builds and prepares the adapter,
answers forwarded calls with core types only, and hands each case to a worker it forks.
"""

from __future__ import annotations

import contextlib
import json
import os
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

from pytest_xtc.core.adapter import Capabilities, Probe, TargetAdapter, TargetSpec, Tier
from pytest_xtc.core.judging.plausibility import Ceilings
from pytest_xtc.core.limits import check_limit, worker_memory_limit
from pytest_xtc.core.workers import isolation, template

WARM = "warm"  # a request that only loads the adapter and forks its first case worker
MEASURES = frozenset({"peak_flops"})  # calls that run kernels: in a child of the host
MEASURE_S = 3600.0  # their backstop there (the host's own call has the real limit)


class AdapterFailure(RuntimeError):
    """A forwarded call failed; the message names the method and the cause."""


class LoadError(RuntimeError):
    """The entry point did not load or build an adapter, said in one line."""


class HostHandler:
    """The host's request handler; ``state`` holds the adapter once built (in the host)."""

    def __init__(self, entry: EntryPoint, spec: TargetSpec, state: dict[str, Any]) -> None:
        self.entry, self.spec, self.state = entry, spec, state

    def __call__(self, request: Any, report: isolation.Report) -> Any:
        state = self.state
        adapter = state.get("adapter")
        if adapter is None:
            adapter = state["adapter"] = _build(self.entry, self.spec, state["scratch"])
            # the host is the template: each case in a child of its own, forked from it
            template.relay_quietly()
            state["inner"] = isolation.Worker(_inner_handler(adapter),
                                              worker_memory_limit(adapter), fresh=True,
                                              defer_next=True, ahead=state["ahead"])
        kind, inner = request[0], state["inner"]
        if kind == WARM:
            inner.start()
            return None
        if kind == "call":
            _, method, args = request
            report(method)
            if method in MEASURES:  # runs code of its own: never in the template
                return isolation.call_isolated(
                    lambda: _plain(method, _invoke(adapter, method, args)), MEASURE_S, method)
            return _plain(method, _invoke(adapter, method, args))
        _, work, limits, first_phase = request
        report(first_phase)
        done = inner.call(work, limits, first_phase, on_phase=report,
                          keep=work.settings.keep_worker, reuse=work.settings.kept_worker)
        done.notes += inner.notes
        done.moved_s = inner.moved_s
        done.kept = inner.kept
        return done

    def after_reply(self) -> None:
        """Between requests (the reply sent, pytest judging it): fork the next case's
        worker, the last case's processes all killed by now."""
        inner = self.state.get("inner")
        if inner is None:
            return
        if inner.spoiled:  # this host can no longer fork a clean case worker: pytest's
            os._exit(75)  # next request finds it gone before it began, and makes another
        inner.prepare_next()


def _inner_handler(adapter: TargetAdapter) -> isolation.Handler:
    from pytest_xtc.core.execution.work import target_work

    return lambda request, report: target_work(adapter, request, report, in_worker=True)


def _build(entry: EntryPoint, spec: TargetSpec, scratch: Path) -> TargetAdapter:
    """Load the entry point, call its factory, prepare the adapter (failures ignored)."""
    try:
        factory = entry.load()
        adapter = factory(spec)
    except BaseException as exc:  # SystemExit at import included
        raise LoadError(_describe(exc)) from None
    if not isinstance(adapter, TargetAdapter):
        raise LoadError(f"entry point gave {type(adapter).__name__}, not an adapter")
    with contextlib.suppress(BaseException):  # SystemExit too: the cases meet the problem
        adapter.prepare(scratch)
    return adapter


def _invoke(adapter: TargetAdapter, method: str, args: tuple[Any, ...]) -> Any:
    try:
        return getattr(adapter, method)(*args)
    except BaseException as exc:  # never a vendor class or a SystemExit up the pipe
        raise AdapterFailure(_describe(exc)) from None


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _plain(method: str, value: Any) -> Any:
    """``value`` as core types only, so that unpickling it never imports vendor code."""
    if method == "probe":
        if not isinstance(value, Probe):
            raise AdapterFailure(f"probe() gave {type(value).__name__}, not a Probe")
        versions = {str(k): str(v) for k, v in dict(value.versions).items()}
        return Probe(Tier(value.tier), str(value.reason), versions, str(value.device))
    if method == "capabilities":
        if not isinstance(value, Capabilities):
            raise AdapterFailure(f"capabilities() gave {type(value).__name__}")
        schedules = None if value.schedules is None else frozenset(map(str, value.schedules))
        return Capabilities(
            frozenset(map(str, value.ops)),
            frozenset(map(str, value.dtypes)),
            frozenset(map(str, value.placements)),
            schedules,
        )
    if method == "time_limits":
        compile_s, run_s = value
        return (
            check_limit("time_limits() compile limit", compile_s),
            check_limit("time_limits() run limit", run_s),
        )
    if method == "expectations_file":
        return None if value is None else Path(value)
    if method == "lock_key":
        return None if value is None else str(value)
    if method == "peak_flops":
        return None if value is None else float(value)
    if method == "physical_limits":
        if value is not None and not isinstance(value, Ceilings):
            raise AdapterFailure(f"physical_limits() gave {type(value).__name__}, not Ceilings")
        def number(v: Any) -> float | None:
            return None if v is None else float(v)

        return None if value is None else Ceilings(
            number(value.flops_per_s), number(value.bytes_per_s), number(value.min_call_s),
            str(value.basis))

    if method == "kernel_identity":  # plain JSON data, never a vendor's object
        try:
            return None if value is None else json.loads(json.dumps(value))
        except (TypeError, ValueError) as exc:
            raise AdapterFailure(f"kernel_identity() gave no plain data: {exc}") from None
    return value
