"""The selected targets, resolved as soon as the options are parsed, their adapter hosts
started then: each imports its toolchain while this process imports and sets up the rest
of the session (:mod:`.session`). Imports only what resolving needs."""

from __future__ import annotations

import pytest

from pytest_xtc.core.adapter import TargetAdapter
from pytest_xtc.core.execution import registry
from pytest_xtc.core.execution.remote import HostLimits, IsolatedAdapter
from pytest_xtc.plugin import options


def start(config: pytest.Config) -> list[TargetAdapter]:
    """The selected targets' adapters, their hosts loading (not in an xdist controller,
    which runs no case). A bad selection or adapter option is a usage error."""
    selection, _ = options.selection(config)
    try:
        values = options.adapter_settings(config)
        for option in registry.adapter_options():
            value = values[option.name]
            problem = value is not None and option.problem(value)
            if problem:
                raise registry.SelectionError(problem)
        isolate = not config.getoption("xtc_no_isolation")
        limits = host_limits(config.getoption("xtc_probe_timeout"))
        adapters = registry.resolve(selection, values, isolate=isolate, limits=limits)
    except (registry.SelectionError, ValueError) as exc:
        raise pytest.UsageError(str(exc)) from None
    if not xdist_controller(config):
        for adapter in adapters:
            if isinstance(adapter, IsolatedAdapter):
                adapter.warm()
    return adapters


def stop(adapters: list[TargetAdapter]) -> None:
    """End the hosts started for a session that is refused after all."""
    for adapter in adapters:
        if isinstance(adapter, IsolatedAdapter):
            adapter.stop()


def xdist_controller(config: pytest.Config) -> bool:
    """Whether this process hands the cases to xdist workers (and runs none itself)."""
    if hasattr(config, "workerinput"):
        return False
    return bool(config.getoption("numprocesses", None)) or config.getoption("dist", "no") != "no"


def host_limits(probe_s: float | None) -> HostLimits:
    """The adapter hosts' limits: ``--xtc-probe-timeout`` bounds probing an adapter and
    each of its queries (capabilities...), and loading it when longer than the default."""
    if probe_s is None:
        return HostLimits()
    load = max(HostLimits.load, probe_s)
    return HostLimits(load=load, probe=probe_s, query=min(HostLimits.query, probe_s))
