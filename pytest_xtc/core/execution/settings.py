"""How cases run: the settings every case of a session shares. No pytest."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_xtc.core.adapter import ONCE, Timing
from pytest_xtc.core.limits import DEFAULT_MAX_CASE_BYTES, check_budget, check_limit

if TYPE_CHECKING:
    from pytest_xtc.core.cases.case import Case
    from pytest_xtc.core.execution.kernels import KernelStore


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
    #: Order check (core/execution/order.py): the neighbours a passed case is run again
    #: after; empty: off.
    order: tuple[Case, ...] = ()
    #: Split runs (docs/split-run.md): compile and write each case into this execution
    #: pack; judge each case from this pack's results; run each case through this execnet
    #: gateway. Empty: off.
    pack_dir: str = ""
    from_pack: str = ""
    run_on: str = ""
    #: Every case runs in a worker of its own; the order check's pair alone shares one, on
    #: purpose: ``keep_worker`` (its neighbour) keeps its worker for the next case, which
    #: runs in it when ``kept_worker`` (the case again).
    keep_worker: bool = False
    kept_worker: bool = False
    #: The kernel cache (``--xtc-compile-cache``; kernels.py); None: every case compiles.
    kernels: KernelStore | None = None

    @property
    def exports(self) -> bool:
        """Whether a compiled case is exported for a device runner instead of run here."""
        return bool(self.pack_dir or self.run_on)

    @property
    def split(self) -> bool:
        """Whether cases run elsewhere (their inputs are made here even without a device)."""
        return bool(self.pack_dir or self.from_pack or self.run_on)

    def __post_init__(self) -> None:
        """Refuse limits that are not finite and positive (ValueError naming the option)."""
        for phase, value in self.limits.items():
            self.limits[phase] = check_limit(f"--xtc-{phase}-timeout", value)
        check_budget("--xtc-max-case-bytes", self.max_case_bytes)
