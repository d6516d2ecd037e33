"""The target adapter interface: what a compilation target must provide to be certified.

An adapter is found through the ``pytest_xtc.targets`` entry-point group. The entry point
names a factory (usually the adapter class) called with a :class:`TargetSpec`. Adapters
must import nothing heavy at module import time: ``probe()`` is where toolchains are looked
for, and it never raises.
"""

from __future__ import annotations

import enum
import inspect
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from pytest_xtc.core.cases.case import Case
    from pytest_xtc.core.judging.plausibility import Ceilings


class Tier(str, enum.Enum):
    """How far a target can go on this machine."""

    EXECUTE = "available"  # compile and run, results checked against numpy
    COMPILE_ONLY = "compile-only"  # compile and inspect the artifact, nothing runs
    UNAVAILABLE = "unavailable"  # nothing can be done here; the reason says why


@dataclass(frozen=True)
class Probe:
    """The answer of :meth:`TargetAdapter.probe`: a tier, why, and the tools found."""

    tier: Tier
    reason: str = ""
    versions: Mapping[str, str] = field(default_factory=dict)
    device: str = ""  # identity of the device used, when there is one
    #: The probe itself raised (or its process failed): no finding about this machine but
    #: an error of the run; its target's cases are infrastructure errors, not skips.
    raised: bool = False

    @property
    def can_compile(self) -> bool:
        return self.tier is not Tier.UNAVAILABLE

    @property
    def can_run(self) -> bool:
        return self.tier is Tier.EXECUTE


@dataclass(frozen=True)
class Capabilities:
    """What an adapter declares it supports. A case outside these is *not supported*."""

    ops: frozenset[str]
    dtypes: frozenset[str] = frozenset({"float32", "float64"})
    placements: frozenset[str] = frozenset({"host"})  # "host" and/or "device"
    schedules: frozenset[str] | None = None  # schedule primitives; None means all

    def missing(self, case: Case) -> str | None:
        """Why ``case`` is outside these capabilities, or None when it is inside."""
        absent_ops = sorted(set(case.ops) - self.ops)
        if absent_ops:
            return f"op {', '.join(absent_ops)} not supported"
        if case.dtype not in self.dtypes:
            return f"dtype {case.dtype} not supported"
        used = set(case.placement.values()) if case.placement else {"host"}
        absent_places = sorted(used - self.placements)
        if absent_places:
            return f"placement on {', '.join(absent_places)} not supported"
        if self.schedules is not None:
            absent = sorted(set(case.schedule.primitives) - self.schedules)
            if absent:
                return f"schedule primitive {', '.join(absent)} not supported"
        return None


@dataclass(frozen=True)
class OptionSpec:
    """A command-line option an adapter adds, as ``--xtc-<name>`` (env var ``env``)."""

    name: str
    help: str
    env: str | None = None
    choices: Sequence[str] | None = None
    pattern: str | None = None  # a regular expression the whole value must match
    expected: str = ""  # what a valid value looks like, for people

    def problem(self, value: str) -> str | None:
        """Why ``value`` is not valid for this option, or None."""
        if self.choices is not None and value not in self.choices:
            return f"--xtc-{self.name}={value}: expected one of {', '.join(self.choices)}"
        if self.pattern is not None and re.fullmatch(self.pattern, value) is None:
            expected = self.expected or f"a match of {self.pattern!r}"
            return f"--xtc-{self.name}={value}: not a valid value (expected {expected})"
        return None


@dataclass(frozen=True)
class TargetSpec:
    """How a target was selected: ``nvgpu[1]`` is base ``nvgpu`` with ordinal 1."""

    name: str
    base: str
    ordinal: int | None = None
    options: Mapping[str, str | None] = field(default_factory=dict)


@dataclass
class Artifact:
    """A compiled case. ``handle`` is adapter-private (an XTC module, for instance)."""

    directory: Path
    handle: Any = None
    files: list[Path] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Timing:
    """How to time a run, as XTC's evaluators take it: ``repeat`` measurements, each of
    ``number`` calls, each measurement lasting at least ``min_repeat_ms``."""

    repeat: int = 1
    number: int = 1
    min_repeat_ms: int = 0


ONCE = Timing()  # one call, one measurement: enough to check results


@dataclass(frozen=True)
class ExportedKernel:
    """A compiled case as a device runner without XTC calls it (``docs/vendor-guide.md``,
    "Exporting a compiled case"): ``kind`` names the calling convention the runner knows
    (``host-bare``: a host shared library, bare pointers, inputs then outputs, timed by
    XTC's host runtime; ``cuda-bare``: the same through XTC's CUDA runtime library, device
    operands copied to and from the GPU). Every path lies in the artifact's directory or
    is a runtime library the kernel needs, loaded (globally) in ``runtime`` order."""

    kind: str
    library: Path
    entry: str
    runtime: tuple[Path, ...] = ()
    timer: int | None = None  # index in ``runtime`` of XTC's host runtime (evaluate_perf)
    placements: tuple[str, ...] = ()  # "host" or "device", per operand (inputs, outputs)
    guarded: bool = False  # the runner places operands inside guard bands


@dataclass(frozen=True)
class KernelCache:
    """An adapter's opt-in to the kernel cache (``docs/vendor-guide.md``, "Kept kernels"):
    besides the case, its compiled code depends on nothing but its own code, its options,
    its probe and these ``distributions`` (their files), ``programs`` (found on ``PATH``)
    and ``environment`` variables (a name ending in ``*``: a prefix)."""

    distributions: tuple[str, ...] = ()
    programs: tuple[str, ...] = ()
    environment: tuple[str, ...] = ()


class InfrastructureError(RuntimeError):
    """Raised by an adapter when the machinery failed, not the target's code: a device
    that stops answering, a toolchain missing a file. Reported apart from wrong results."""


class CompileRejected(RuntimeError):
    """Raised by an adapter's ``compile()`` when its compiler refused the case with a
    diagnostic of its own: the same case and toolchain always get the same refusal. The
    kernel cache keeps such a refusal as it keeps a kernel (a rerun fails the case the
    same way without compiling); no other failure is ever kept."""


@dataclass
class RunResult:
    """Outputs written in place by the kernel, and the kernel's times in seconds."""

    times: list[float] = field(default_factory=list)


class TargetAdapter(ABC):
    """One compilation target. Subclasses live in ``targets/``, one file each."""

    #: Options this adapter adds to pytest and to ``xtc-conformance``.
    options: Sequence[OptionSpec] = ()
    #: Whether the target has numbered devices, selected as ``NAME[ORDINAL]``.
    ordinals: bool = False
    #: Whether the same inputs give the same output bits on one machine (a rerun audit
    #: then compares output digests; else only statuses).
    deterministic: bool = True
    #: The placements ``capabilities()`` gives, declared on the class when every instance
    #: gives the same: the cases are then expanded by placement without building the
    #: adapter (collection does not wait for its toolchain). None: ``capabilities()`` is
    #: asked, as it is for a subclass that overrides ``capabilities`` without declaring
    #: again (:func:`declared_placements`). A ``capabilities()`` that contradicts it fails.
    placements: frozenset[str] | None = None
    #: The kernel cache's opt-in: what the compile depends on besides the case. None (the
    #: default): every case compiles afresh. A subclass inherits it (``None`` to leave).
    kernel_cache: KernelCache | None = None

    def __init__(self, spec: TargetSpec) -> None:
        self.spec = spec

    @property
    def name(self) -> str:
        return self.spec.name

    @abstractmethod
    def probe(self) -> Probe:
        """Find what this machine has for this target. Never raises."""

    def status(self) -> Probe:
        """``probe()``, computed once; a probe that raises anyway counts as unavailable."""
        cached: Probe | None = getattr(self, "_status", None)
        if cached is None:
            try:
                cached = self.probe()
            except Exception as exc:
                cached = Probe(Tier.UNAVAILABLE, f"probe raised {type(exc).__name__}: {exc}",
                               raised=True)
            self._status = cached
        return cached

    @abstractmethod
    def capabilities(self) -> Capabilities:
        """The ops, dtypes, placements and schedule primitives this target supports."""

    @abstractmethod
    def compile(self, case: Case, workdir: Path) -> Artifact:
        """Compile ``case`` into an artifact whose files all lie inside ``workdir``."""

    def check_artifact(self, case: Case, artifact: Artifact) -> None:  # noqa: B027
        """Compile-only tier: raise AssertionError when the artifact is not what it claims.
        The default accepts any artifact."""

    @abstractmethod
    def run(
        self,
        artifact: Artifact,
        inputs: Sequence[np.ndarray],
        outputs: Sequence[np.ndarray],
        timing: Timing = ONCE,
    ) -> RunResult:
        """Run ``artifact`` as ``timing`` says; write results into ``outputs`` in place and
        leave in ``inputs`` what the kernel left of them; return the kernel's times."""

    def guarded_buffers(self) -> bool:
        """True when ``run`` hands the kernel the very arrays it is given, with no copy
        (a bare-pointer call on host memory): the runner then gives it views into larger
        buffers whose guard bands show writes out of bounds (``core/execution/guard.py``). Default
        False: a runtime that copies operands into buffers of its own (XTC's evaluators
        do) would make the bands meaningless."""
        return False

    def export(self, case: Case, artifact: Artifact) -> ExportedKernel | None:
        """How a device runner without XTC calls ``artifact`` (execution packs and remote
        runs, ``docs/split-run.md``); None (the default): this target's compiled cases run
        only where it compiles them."""
        return None

    def prepare(self, workdir: Path) -> None:  # noqa: B027
        """Called once per process before the first case, in the process that forks the
        isolated cases: warm what every case would otherwise build again (imports,
        runtimes). A failure here is ignored; the cases then meet it themselves."""

    def peak_flops(self, dtype: str) -> float | None:
        """The device's peak FLOP/s for ``dtype`` where the runtime reports one."""
        return None

    def physical_limits(self, dtype: str) -> Ceilings | None:
        """What the device cannot physically exceed for ``dtype`` (FLOP/s, bytes/s, the
        shortest call: ``pytest_xtc.core.judging.plausibility.Ceilings``); a kernel time
        beyond them marks the case's performance record invalid. None (the default): the
        declared peak times a margin, and bounds no device reaches."""
        return None

    def expectations_file(self) -> Path | None:
        """This target's expected failures: ``<adapter module>.expectations.yaml`` beside
        the module that defines the adapter class, when it exists."""
        path = Path(inspect.getfile(type(self))).with_suffix(".expectations.yaml")
        return path if path.is_file() else None

    def lock_key(self) -> str | None:
        """Name of the physical device this target uses, for cross-process locking."""
        return None

    def time_limits(self) -> tuple[float, float]:
        """Seconds allowed for (compile, run) of one case; simulators need more."""
        return (120.0, 60.0)

    def kernel_identity(self) -> dict[str, Any] | None:
        """Everything besides the case that can change what ``compile`` makes, as plain
        data (``versions.kernel_identity``), for the kernel cache's key; None: not cached."""
        if self.kernel_cache is None:
            return None
        from pytest_xtc.core.versions import kernel_identity

        probe, kept = self.status(), self.kernel_cache
        classes = [c for c in type(self).__mro__ if issubclass(c, TargetAdapter)]
        options = {"target": self.spec.base, **self.spec.options}
        return kernel_identity(classes, options, [dict(probe.versions), probe.device],
                               kept.distributions, kept.programs, kept.environment)

    def memory_limit(self) -> int | None:
        """Bytes of address space (RLIMIT_AS) each isolated worker of this target may use;
        None for no limit."""
        return None


def declared_placements(adapter: TargetAdapter | type[TargetAdapter]) -> frozenset[str] | None:
    """The placements ``adapter`` (an adapter or its class) declares for its
    ``capabilities()``: one set on the instance (a proxy given its class's), else the
    class attribute, unless ``capabilities`` is defined below it (a subclass changing its
    capabilities without declaring again: None, asked)."""
    if not isinstance(adapter, type) and "placements" in vars(adapter):
        return adapter.placements
    cls = adapter if isinstance(adapter, type) else type(adapter)
    mro = cls.__mro__
    declares = next((c for c in mro if "placements" in vars(c)), None)
    answers = next((c for c in mro if "capabilities" in vars(c)), None)
    if declares is None or answers is None or not issubclass(declares, answers):
        return None
    placements = vars(declares)["placements"]
    return placements if isinstance(placements, frozenset) else None


class BrokenAdapter(TargetAdapter):
    """Stands in for an adapter whose import or construction failed."""

    def __init__(self, spec: TargetSpec, error: str) -> None:
        super().__init__(spec)
        self.error = error

    def probe(self) -> Probe:
        return Probe(Tier.UNAVAILABLE, f"adapter failed to load: {self.error}")

    def capabilities(self) -> Capabilities:
        return Capabilities(ops=frozenset())

    def compile(self, case: Case, workdir: Path) -> Artifact:
        raise RuntimeError(self.error)

    def run(self, artifact, inputs, outputs, timing=ONCE):  # type: ignore[no-untyped-def]
        raise RuntimeError(self.error)
