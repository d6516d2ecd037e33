"""The pytest plugin (entry point ``pytest11: xtc``): options, then, in a session that
uses XTC, the modules that collect, run, report and summarize the suite.

Installed, this plugin is loaded by every pytest session of every project, so a session
that does not use XTC imports nothing but this module and :mod:`.declarations` (standard library
only) and loads no adapter. A session uses XTC when it names targets (option, env var
``XTC_TEST_TARGETS`` or ini ``xtc_targets``), passes any ``--xtc-`` option, or collects
the suite module itself (``pytest .../pytest_xtc/conformance`` in a checkout).

Each module owns its hooks: :mod:`.options` (command line), :mod:`.state` (the session's
state), :mod:`.session` (set-up), :mod:`.collection` (the suite's tests and markers),
:mod:`.outcomes` (a case's run and its pytest outcome), :mod:`.sharding`, :mod:`.reporting`
(bundles), :mod:`.terminal` (the summary), :mod:`.benchmarking` (pytest-benchmark glue).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest


def _own_modules_not_rewritten() -> None:
    """pytest rewrites the asserts of every module of a distribution that registers a
    plugin: all of this package, some 140 modules, none of them a test. Where the rewritten
    code cannot be cached (``PYTHONDONTWRITEBYTECODE``, as many container images set, a
    read-only install, a first run) that is a parse and a compile of each, 0.4 to 0.6 s a
    session, instead of loading Python's own cached bytecode. The suite's test module
    (``test_conformance.py``) is still rewritten as any test file is. pytest offers no way
    to unmark a name: its import hook's marks are changed where they are found, and left
    alone where pytest keeps them otherwise."""
    for finder in sys.meta_path:
        marks = getattr(finder, "_must_rewrite", None)
        known = getattr(finder, "_marked_for_rewrite_cache", None)
        if type(finder).__name__ == "AssertionRewritingHook" and isinstance(marks, set):
            marks.discard(__name__.split(".")[0])
            if isinstance(known, dict):
                known.clear()


_own_modules_not_rewritten()

from pytest_xtc.plugin import (  # noqa: E402 (not rewritten: after the above)
    compile_cache,
    declarations,
)

#: The suite's test module, found without importing the suite.
SUITE_MODULE = Path(__file__).resolve().parent.parent / "conformance" / "test_conformance.py"
_WANTED = pytest.StashKey[bool]()


def pytest_addoption(parser: pytest.Parser) -> None:
    declarations.add(parser)
    compile_cache.add(parser)


def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: Sequence[str]
) -> None:
    """Decide, from the raw arguments, whether this session uses XTC; only then load the
    adapters and declare their own options (``--xtc-nvgpu-arch``...)."""
    try:
        ini = early_config.getini(declarations.INI_TARGETS)
    except ValueError:
        ini = None
    wanted = declarations.wants_xtc(args, ini)
    early_config.stash[_WANTED] = wanted
    if wanted:
        declarations.add_adapter_options(parser)


def _collects_suite(config: pytest.Config) -> bool:
    """Whether the arguments (or testpaths) name the suite module or a folder holding it,
    other than through a virtual environment (which pytest does not recurse into)."""
    for arg in config.args:
        path = (config.invocation_params.dir / str(arg).split("::")[0]).resolve()
        if path == SUITE_MODULE or (
            path in SUITE_MODULE.parents
            and "site-packages" not in SUITE_MODULE.relative_to(path).parts
        ):
            return True
    return False


def uses_xtc(config: pytest.Config) -> bool:
    return config.stash.get(_WANTED, False) or _collects_suite(config)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    declarations.refuse_unusable(config)
    if not config.getoption("xtc_list_targets"):
        return None
    import shutil

    from pytest_xtc.core.adapters import registry
    from pytest_xtc.plugin import options
    from pytest_xtc.report.render.text import format_targets

    width = min(shutil.get_terminal_size().columns, 120)
    adapters = registry.resolve("all", options.adapter_settings(config))
    print(format_targets(adapters, width=width))
    return 0


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "xtc: a conformance case of the XTC suite")
    if not uses_xtc(config) or config.getoption("help", False):
        return  # --help: the adapters' options are declared and shown; nothing is run
    from pytest_xtc.plugin import session

    session.configure(config)


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    """One line where the cases cannot be confined to their folders (no Landlock here), one
    where no cache can be kept (no writable state folder: an ordinary user with no home)."""
    if not uses_xtc(config) or config.getoption("xtc_no_isolation", False):
        return None
    from pytest_xtc.core.adapters import cache_seal, declcache
    from pytest_xtc.core.workers import confinement

    lines: list[str] = []
    why = confinement.available()
    if why is not None:
        lines.append(f"pytest-xtc: {why}")
    if os.environ.get(declcache.ENV_SWITCH, "").lower() not in ("off", "0", "no"):
        no_key = cache_seal.unavailable()
        if no_key is not None:
            lines.append(f"pytest-xtc: caches off (kernels, declarations, runtime library): "
                         f"{no_key}; set XDG_STATE_HOME and XDG_CACHE_HOME to writable folders")
    return lines or None
