"""The vocabulary every layer shares: what happened to a case (:class:`Status`), where
(:class:`Phase`), how it failed (:class:`FailureKind`), and the :class:`Outcome` record the
runner gives. No pytest."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any


class Word(str, enum.Enum):
    """An enum whose members read, print and serialize as their values."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class Status(Word):
    """What a target did with a case."""

    PASSED = "passed"
    #: Compiled and its artifact inspected, never run (a compile-only tier): not a pass.
    COMPILED = "compiled"
    FAILED = "failed"  # wrong results, or a compile or run failure: not conformant
    ERROR = "error"  # the infrastructure failed (toolchain, device): not a verdict on results
    SKIPPED = "skipped"  # this machine cannot run the target (probe says why)
    NOT_SUPPORTED = "not-supported"  # the adapter declares the capability absent
    INVALID = "invalid"  # the case's schedule breaks a precondition of XTC: not the target's


class Phase(Word):
    """Where a case was when it ended, in the order a case goes through them."""

    PROBE = "probe"
    CAPABILITIES = "capabilities"
    SCHEDULE = "schedule"  # the case's schedule checked against XTC's loops
    COMPILE = "compile"
    PLACEMENT = "placement"
    CHECK_ARTIFACT = "check-artifact"
    WAIT_DEVICE = "wait-device"
    RUN = "run"
    CHECK = "check"

    @property
    def stage(self) -> str:
        """The stage an expected failure names: ``compile``, ``placement`` or ``run``
        (running and checking: a wrong result counts as ``run``)."""
        if self in (Phase.COMPILE, Phase.PLACEMENT):
            return self.value
        if self is Phase.SCHEDULE:
            return Phase.COMPILE.value
        return "run"


STAGES = ("compile", "placement", "run")


class Failure(Word):
    """What went wrong, as the runner classified it where it happened."""

    WRONG_RESULTS = "wrong results"  # the check found results outside their error bound
    TIMEOUT = "timeout"  # a phase exceeded its time limit
    SIGNAL = "signal"  # the target's process was killed by a signal (detail: its name)
    EXIT_CODE = "exit code"  # the target's process exited without a result (detail: code)
    EXCEPTION = "exception"  # the target (or adapter) raised (detail: the exception type)


@dataclass(frozen=True)
class FailureKind:
    """How a case failed, as data: :class:`Failure` and its detail (``SIGSEGV``, ``3``,
    ``ValueError``). Printed as ``wrong results``, ``timeout``, ``signal SIGSEGV``,
    ``exit code 3``, or the exception type alone."""

    what: Failure
    detail: str = ""

    def __str__(self) -> str:
        if self.what is Failure.EXCEPTION:
            return self.detail or str(self.what)
        return f"{self.what} {self.detail}".strip()

    def to_dict(self) -> dict[str, str]:
        return {"what": self.what.value, "detail": self.detail}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FailureKind:
        """The kind a record holds; ValueError for an unknown one (never guessed)."""
        unknown = set(data) - {"what", "detail"}
        if unknown:
            raise ValueError(f"failure kind: unknown keys {sorted(unknown)}")
        return cls(Failure(data["what"]), str(data.get("detail") or ""))


@dataclass
class Outcome:
    """What the runner gives for one case on one target: its :class:`Status`, the
    :class:`Phase` it ended in, a one-line message, how it failed (:class:`FailureKind`),
    and the figures of its run (seed, times, error ratio, checks' facts, performance)."""

    case: str
    target: str
    status: Status
    phase: Phase
    message: str = ""
    tier: str = ""
    seed: int | None = None
    worst_ratio: float | None = None
    compile_s: float = 0.0
    run_s: float = 0.0
    #: Seconds moving the case's operands to the worker and its results back, its
    #: tidying included (None: run in the pytest process): what isolation costs.
    transfer_s: float | None = None
    times: list[float] = field(default_factory=list)
    output_digest: str | None = None  # SHA-256 of the first call's outputs (reruns)
    perf: dict[str, Any] | None = None  # a passed case's performance record (perf.py)
    guarded: bool | None = None  # writes out of bounds checked by guard bands (None: not run)
    calls: int = 0  # kernel calls checked, each on fresh inputs
    #: The statistical precision check's sums (precision.Terms.to_dict: dtype, e2, v, s2,
    #: n, bits, decided), for random-input contraction cases; reports pool them.
    precision: dict[str, Any] | None = None
    traits: dict[str, Any] | None = None  # what expectations select by (selectors.Traits)
    #: Each per-case check's facts, by check name (core/judging/checks; None: not run).
    checks: dict[str, Any] | None = None
    #: How a failed or errored case failed, set where the runner classified it; None for
    #: a case that did not fail, and in records written before kinds were recorded.
    kind: FailureKind | None = None
    #: Whether its kernel came from the kernel cache (None: no cache used for it).
    kernel_cached: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.value
        data["phase"] = self.phase.value
        data["kind"] = self.kind.to_dict() if self.kind is not None else None
        return data

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> Outcome:
        """The outcome a result record holds (the record's other keys, such as the
        plugin's ``nodeid``, are not the outcome's and are left). ValueError for a status,
        phase or kind this version does not know."""
        known = {f.name for f in fields(cls)}
        data = {k: v for k, v in record.items() if k in known}
        data["status"], data["phase"] = Status(data["status"]), Phase(data["phase"])
        if data.get("kind") is not None:
            data["kind"] = FailureKind.from_dict(data["kind"])
        return cls(**data)
