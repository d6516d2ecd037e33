"""The shapes of the facts a report records about where it ran: the suite's source, the
system, an adapter's distribution, a target's declared capabilities. No pytest."""

from __future__ import annotations

from typing import TypedDict


class SuiteSource(TypedDict):
    """The suite's git commit and whether its tree was dirty (None: not a checkout)."""

    commit: str | None
    dirty: bool | None


class AdapterRecord(TypedDict, total=False):
    """The distribution registering a target, its entry point and the run's options."""

    distribution: str | None
    version: str | None
    entry_point: str | None
    options: dict[str, str | None]


class System(TypedDict, total=False):
    """The machine a run ran on, and the versions of the packages that matter."""

    os: str
    machine: str
    cpu: str
    cpu_count: int | None
    python: str
    packages: dict[str, str]
    devices: dict[str, str]  # target -> the device it ran on


class CapabilitiesRecord(TypedDict, total=False):
    """What a target declared it supports (core.adapter.Capabilities, as lists)."""

    ops: list[str]
    dtypes: list[str]
    placements: list[str]
    schedules: list[str] | None
