"""An adapter that lives only inside a forked worker: :class:`IsolatedAdapter`.

The pytest process never imports a vendor's adapter module. A persistent *host* process
(an :class:`isolation.Worker` of its own session) loads the entry point, builds the
adapter and calls ``prepare()``; every other method call is forwarded to it under a time
limit and its answer cached. Each case's compile and run go one level further down, to a
worker the host forks for that case alone (warm: imports and runtimes are already there;
pristine: the host, its template, never runs a kernel), so nothing a case does reaches
another, and a crashing kernel costs a fork of the host, not a new import. A load or
probe that fails, crashes or hangs gives an *unavailable* target whose reason names the
cause. What runs in the host itself is :mod:`pytest_xtc.core.execution.adapter_host`.
"""

from __future__ import annotations

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
from pytest_xtc.core.execution.adapter_host import WARM, HostHandler, LoadError
from pytest_xtc.core.execution.adapter_host import AdapterFailure as AdapterFailure
from pytest_xtc.core.judging.plausibility import Ceilings
from pytest_xtc.core.workers import isolation

if TYPE_CHECKING:
    import numpy as np

    from pytest_xtc.core.cases.case import Case

LOAD = "load"


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
            HostHandler(entry, spec, state), warm=(WARM,), warm_limit=limits.load, clean=False
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
        except LoadError as exc:
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
        except LoadError as exc:
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
