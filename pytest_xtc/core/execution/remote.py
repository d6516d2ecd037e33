"""An adapter that lives only inside a forked worker: :class:`IsolatedAdapter`.

The pytest process never imports a vendor's adapter module. A persistent *host* process
(an :class:`isolation.Worker` of its own session) loads the entry point, builds the
adapter and calls ``prepare()``; every other method call is forwarded to it under a time
limit and its answer cached. Each case's compile and run go one level further down, to a
worker the host forks for that case alone (warm: imports and runtimes are already there;
pristine: the host, its template, never runs a kernel), so nothing a case does reaches
another, and a crashing kernel costs a fork of the host, not a new import. A load or
probe that fails, crashes or hangs gives an *unavailable* target whose reason names the
cause.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_xtc.core.adapter import (
    ONCE,
    Artifact,
    Capabilities,
    Probe,
    RunResult,
    TargetAdapter,
    TargetSpec,
    Tier,
    Timing,
)
from pytest_xtc.core.judging.plausibility import Ceilings
from pytest_xtc.core.limits import check_limit, worker_memory_limit
from pytest_xtc.core.workers import isolation, template

if TYPE_CHECKING:
    import numpy as np

    from pytest_xtc.core.cases.case import Case

LOAD = "load"
WARM = "warm"  # a request that only loads the adapter and forks its first case worker
MEASURES = frozenset({"peak_flops"})  # calls that run kernels: in a child of the host
MEASURE_S = 3600.0  # their backstop there (the host's own call has the real limit)


@dataclass(frozen=True)
class HostLimits:
    """Seconds allowed to each forwarded call (a vendor toolchain's probe may be slow),
    and whether a core is free for the host's case workers to get ready on (``ahead``:
    each is forked one case early and copies the pages a case writes while the case
    before it runs, :class:`isolation.Worker`; for a session running fewer workers than
    the machine has cores)."""

    load: float = 60.0  # import, construction and prepare()
    probe: float = 30.0
    query: float = 10.0  # capabilities, time_limits, lock_key, expectations_file
    peak: float = 120.0  # peak_flops may measure
    grace: float = 5.0  # the host's own margin over a case's phase limits
    ahead: bool = False


class AdapterFailure(RuntimeError):
    """A forwarded call failed; the message names the method and the cause."""


class IsolatedAdapter(TargetAdapter):
    """A proxy to the adapter ``entry`` builds from ``spec`` inside a host process."""

    def __init__(
        self,
        spec: TargetSpec,
        entry: EntryPoint,
        limits: HostLimits = HostLimits(),
        expectations: Path | None = None,
    ) -> None:
        super().__init__(spec)
        self.entry = entry
        self.limits = limits
        self.broken: str | None = None  # why the adapter could not be loaded
        self.dead: str | None = None  # why the host is gone after loading (crash, hang)
        #: the expectations file the adapter gives, known without building it (else asked)
        self.static_expectations = expectations
        self._cache: dict[tuple[str, tuple[Any, ...]], Any] = {}
        self._failed: dict[tuple[str, tuple[Any, ...]], str] = {}
        self._lock = threading.Lock()  # one call to the host at a time (see warm())
        # prepare()'s scratch directory: made and removed (at exit) by this process, so
        # that the host, which ends by os._exit, leaves nothing behind.
        self._scratch = tempfile.TemporaryDirectory(prefix=f"pytest-xtc-prepare-{spec.name}-")
        state: dict[str, Any] = {"scratch": Path(self._scratch.name), "ahead": limits.ahead}
        self._host = isolation.Worker(
            _HostHandler(entry, spec, state), warm=(WARM,), warm_limit=limits.load, clean=False
        )

    def failure(self) -> str | None:
        """Why the adapter cannot answer at all (it did not load, or its host crashed or
        hung in a call), or None."""
        if self.broken is not None:
            return f"adapter failed to load: {self.broken}"
        return self.dead

    def _ask(self, method: str, *args: Any, limit: float) -> Any:
        """``method(*args)`` of the real adapter, in the host; its answer or its failure
        is cached, so a method that fails costs its time limit once. Raises AdapterFailure
        naming the method and the cause. A host that crashes or hangs is not started
        again for such calls: the adapter is then failed as a whole."""
        key = (method, args)
        with self._lock:
            if key in self._cache:
                return self._cache[key]
            if key not in self._failed:
                try:
                    self._cache[key] = self._call(method, args, limit)
                    return self._cache[key]
                except AdapterFailure as exc:
                    self._failed[key] = str(exc)
            raise AdapterFailure(self._failed[key])

    def warm(self) -> None:
        """Start loading and probing the adapter now, in the background, so that its host
        imports the toolchain while this process goes on collecting. The host is forked
        here, in the calling thread (a fork from another thread could copy an import
        lock half-held); only the wait for its answer happens in a thread."""
        if self.failure() is not None or "_status" in vars(self) or self._host.pid:
            return
        self._host._start()
        threading.Thread(target=self.status, name=f"xtc-warm-{self.name}", daemon=True).start()

    def _call(self, method: str, args: tuple[Any, ...], limit: float) -> Any:
        failed = self.failure()
        if failed is not None:
            raise AdapterFailure(failed)
        limits = {LOAD: self.limits.load, method: limit}
        try:
            return self._host.call(("call", method, args), limits, LOAD)
        except isolation.ChildFailure as exc:
            if exc.phase == LOAD:
                self.broken = _cause(exc)
            else:
                self.dead = f"adapter failed: {method} {_cause(exc)}"
            raise AdapterFailure(self.failure()) from None
        except _LoadError as exc:
            self.broken = str(exc)
            raise AdapterFailure(self.failure()) from None
        except Exception as exc:
            raise AdapterFailure(f"{method} raised {exc}") from None

    def probe(self) -> Probe:
        try:
            probe: Probe = self._ask("probe", limit=self.limits.probe)
        except AdapterFailure as exc:
            return Probe(Tier.UNAVAILABLE, str(exc), raised=self.broken is None)
        return probe

    def status(self) -> Probe:
        """``probe()``, unless a call since made the adapter fail as a whole."""
        found = super().status()
        failed = self.failure()
        if failed is not None and found.tier is not Tier.UNAVAILABLE:
            found = self._status = Probe(Tier.UNAVAILABLE, failed)
        return found

    def capabilities(self) -> Capabilities:
        if self.failure() is not None:
            return Capabilities(ops=frozenset())
        caps: Capabilities = self._ask("capabilities", limit=self.limits.query)
        return caps

    def time_limits(self) -> tuple[float, float]:
        compile_s, run_s = self._ask("time_limits", limit=self.limits.query)
        return (compile_s, run_s)

    def lock_key(self) -> str | None:
        key: str | None = self._ask("lock_key", limit=self.limits.query)
        return key

    def expectations_file(self) -> Path | None:
        """Known without a call where the adapter keeps the default (a file beside its
        class's module); else asked, and a failure makes the adapter unavailable."""
        if self.static_expectations is not None:
            path = self.static_expectations
            return path if path.is_file() else None
        if self.status().tier is Tier.UNAVAILABLE:
            return None
        try:
            asked: Path | None = self._ask("expectations_file", limit=self.limits.query)
        except AdapterFailure as exc:
            self.dead = self.dead or f"adapter failed: {exc}"
            self._status = Probe(Tier.UNAVAILABLE, self.dead)
            return None
        return asked

    def peak_flops(self, dtype: str) -> float | None:
        peak: float | None = self._ask("peak_flops", dtype, limit=self.limits.peak)
        return peak

    def physical_limits(self, dtype: str) -> Ceilings | None:
        limits: Ceilings | None = self._ask("physical_limits", dtype, limit=self.limits.query)
        return limits

    def kernel_identity(self) -> dict[str, Any] | None:
        """The adapter's, asked once; None (not cached) when it fails to answer."""
        if self.failure() is not None:
            return None
        try:
            found: dict[str, Any] | None = self._ask("kernel_identity", limit=self.limits.query)
        except AdapterFailure:
            return None
        return found

    def prepare(self, workdir: Path) -> None:
        """Done in the host when it loads the adapter."""

    def work(
        self,
        request: Any,
        limits: Mapping[str, float],
        first_phase: str,
        on_phase: isolation.Report | None = None,
        meanwhile: Callable[[], None] | None = None,
    ) -> Any:
        """One case's target work (``work.target_work``) in a worker the host forks;
        the host applies ``limits``, the call here the same plus a grace as a backstop;
        ``meanwhile()`` runs here while it works. Raises ChildFailure as a direct worker
        would."""
        if self.broken is not None:
            raise isolation.ChildFailure(first_phase, f"adapter failed to load: {self.broken}")
        backstop = {LOAD: self.limits.load, **{p: s + self.limits.grace for p, s in limits.items()}}
        entered = [first_phase]

        def report(phase: str) -> None:
            entered[0] = phase
            if on_phase is not None:
                on_phase(phase)

        try:
            request = ("case", request, dict(limits), first_phase)
            done = self._host.call(request, backstop, LOAD, report, meanwhile)
            done.moved_s = (done.moved_s or 0.0) + self._host.moved_s  # both hops
            done.notes += self._host.notes  # a host replaced before the case began
            return done
        except isolation.ChildFailure as exc:
            if exc.phase == LOAD:
                self.broken = _cause(exc)
                message = f"adapter failed to load: {self.broken}"
                raise isolation.ChildFailure(first_phase, message) from None
            raise
        except _LoadError as exc:
            self.broken = str(exc)
            message = f"adapter failed to load: {self.broken}"
            raise isolation.ChildFailure(first_phase, message) from None
        except Exception as exc:  # the host's own work failed (a limit a case lowered...)
            phase = first_phase if entered[0] in (LOAD, isolation.TRANSFER) else entered[0]
            raise isolation.ChildFailure(
                phase, f"the adapter's host failed: {type(exc).__name__}: {exc}") from None

    def compile(self, case: Case, workdir: Path) -> Artifact:
        raise AdapterFailure("an isolated adapter compiles through runner.run_case")

    def run(
        self,
        artifact: Artifact,
        inputs: Sequence[np.ndarray],
        outputs: Sequence[np.ndarray],
        timing: Timing = ONCE,
    ) -> RunResult:
        raise AdapterFailure("an isolated adapter runs through runner.run_case")

    def stop(self) -> None:
        """End the host process (and the workers it forked)."""
        self._host.stop()


def _cause(exc: isolation.ChildFailure) -> str:
    if exc.cause.startswith(("timed out", isolation.REFUSED)):
        return exc.cause
    return f"crashed: {exc.cause}"


class _LoadError(RuntimeError):
    """The entry point did not load or build an adapter, said in one line."""


class _HostHandler:
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
        raise _LoadError(_describe(exc)) from None
    if not isinstance(adapter, TargetAdapter):
        raise _LoadError(f"entry point gave {type(adapter).__name__}, not an adapter")
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
