"""The pytest plugin (entry point ``pytest11: xtc``): options, then, in a session that
selects XTC targets, the modules that collect, run, report and summarize the suite.

Each module owns its hooks: :mod:`.options` (command line), :mod:`.state` (the session's
state), :mod:`.collection` (the suite's tests), :mod:`.outcomes` (a case's run and its
pytest outcome), :mod:`.sharding`, :mod:`.reporting` (bundles), :mod:`.terminal` (the
summary), :mod:`.benchmarking` (pytest-benchmark glue).
"""

from __future__ import annotations

import pytest

from pytest_xtc.plugin import options


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    if not config.getoption("xtc_list_targets"):
        return None
    from pytest_xtc.core import registry
    from pytest_xtc.report.text import format_targets

    print(format_targets(registry.resolve("all", options.adapter_settings(config))))
    return 0


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "xtc: a conformance case of the XTC suite")
    from pytest_xtc.plugin import session

    session.configure(config)
