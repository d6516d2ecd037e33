"""Loading adapters: each way an adapter method can fail fails its own target alone, once,
with its reason on every one of its cases; declarations are cached across sessions and
static facts need no round trip to an adapter's host."""

from __future__ import annotations

import json
import os
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import replace
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from pytest_xtc.conformance import builtin_cases
from pytest_xtc.core.adapter import Capabilities, TargetSpec, Tier, declared_placements
from pytest_xtc.core.adapters import adapter_declarations, declcache, registry
from pytest_xtc.core.execution.remote import AdapterFailure, HostLimits, IsolatedAdapter
from pytest_xtc.core.execution.runner import Settings, run_case
from pytest_xtc.core.execution.suite import cases_for
from pytest_xtc.core.outcome import Status
from pytest_xtc.plugin import options
from pytest_xtc.plugin.session import host_limits
from pytest_xtc.targets.host import HostTarget
from tests import DATA
from tests.conftest import write_distribution

sys.path.insert(0, str(DATA))
from broken_adapters import BROKEN

sys.path.remove(str(DATA))

CASE_IDS = ("matmul-float32-13x11x7-none", "relu-float32-5x7-tile")


def statuses(junit: Path) -> dict[str, tuple[str, str]]:
    """Each test id of a JUnit XML file: its status and message."""
    found = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name", "")
        test_id = name[name.index("[") + 1 : -1]
        status, message = "passed", ""
        for kind in ("failure", "error", "skipped"):
            node = case.find(kind)
            if node is not None:
                status, message = kind, (node.get("message") or "") + (node.text or "")
        found[test_id] = (status, message)
    return found


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "pytest-xtc" / declcache.FILE_NAME


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["no-xdist", "xdist-2"])
def test_each_broken_adapter_fails_alone_beside_a_healthy_target(
    vendor, run, pytester, fresh_cache, monkeypatch, workers
) -> None:
    vendor(
        "broken_xtc",
        {name: value for name, (value, _) in BROKEN.items()},
        {"broken_adapters": (DATA / "broken_adapters.py").read_text()},
    )
    monkeypatch.setenv("BROKEN_HANG_S", "300")
    chosen = [f"--xtc-case={i}" for i in CASE_IDS]
    clean = run("--xtc-target=host", *chosen, "--junitxml=clean.xml", *workers)
    assert clean.ret == 0, clean.stdout.str()
    start = time.monotonic()
    targets = ",".join(["host", *BROKEN])
    result = run(f"--xtc-target={targets}", *chosen, "--xtc-probe-timeout=5",
                 "--junitxml=mixed.xml", *workers)
    elapsed = time.monotonic() - start
    out = result.stdout.str() + result.stderr.str()
    assert result.ret in (0, 1) and "INTERNALERROR" not in out, out
    before = statuses(pytester.path / "clean.xml")
    after = statuses(pytester.path / "mixed.xml")
    assert len(before) == len(CASE_IDS)
    assert {k: v[0] for k, v in after.items() if k.startswith("host-")} == {
        k: v[0] for k, v in before.items()
    }
    for name, (_, reason) in BROKEN.items():
        mine = {k: v for k, v in after.items() if k.startswith(f"{name}-")}
        assert len(mine) == len(CASE_IDS), (name, sorted(after))
        for status, message in mine.values():
            assert status in ("skipped", "failure") and reason in message, (name, message)
    # each hang costs its limit once per process (load 60 s, capabilities 5 s), not per case
    assert elapsed < 150, elapsed


def test_a_failing_query_costs_its_limit_once(tmp_path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(DATA))
    monkeypatch.setenv("BROKEN_HANG_S", "60")
    entry = EntryPoint("caps", BROKEN["hanging-caps"][0], registry.GROUP)
    spec = TargetSpec("caps", "caps")
    adapter = IsolatedAdapter(spec, entry, HostLimits(query=1.0))
    try:
        start = time.monotonic()
        with pytest.raises(AdapterFailure, match="capabilities timed out after 1 s"):
            adapter.capabilities()
        first = time.monotonic() - start
        for _ in range(5):  # answered at once from then on
            assert adapter.capabilities().ops == frozenset()
        assert time.monotonic() - start < first + 0.5
        status = adapter.status()
        assert status.tier is Tier.UNAVAILABLE
        assert "capabilities timed out after 1 s" in status.reason
    finally:
        adapter.stop()


def test_a_raising_query_fails_each_call_with_the_same_reason(tmp_path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(DATA))
    entry = EntryPoint("limits", BROKEN["raising-limits"][0], registry.GROUP)
    adapter = IsolatedAdapter(TargetSpec("limits", "limits"), entry)
    try:
        assert adapter.status().tier is Tier.EXECUTE
        host = adapter._host.pid
        for _ in range(3):
            with pytest.raises(Exception, match=r"time_limits raised .*limits table missing"):
                adapter.time_limits()
        assert adapter._host.pid == host  # asked once, the host kept
    finally:
        adapter.stop()


@pytest.fixture
def vendors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_cache) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.registered.cache_clear()
    registry.option_declarations.cache_clear()
    yield tmp_path
    registry.registered.cache_clear()
    registry.option_declarations.cache_clear()


WIDGET = """
from pytest_xtc.core.adapter import OptionSpec
from pytest_xtc.targets.host import HostTarget

class Widget(HostTarget):
    options = (OptionSpec("widget-port", "the widget's port", choices=("a", "b")),)
"""


def test_declarations_are_cached_until_their_sources_change(
    vendors, fresh_cache, monkeypatch
) -> None:
    write_distribution(vendors, "widget_xtc", {"widget": "widget_mod:Widget"},
                       {"widget_mod": WIDGET})
    first = registry.option_declarations()
    assert "widget-port" in {o.name for o in first.options}
    assert fresh_cache.is_file()

    def no_child(ep):  # type: ignore[no-untyped-def]
        raise AssertionError(f"{ep.name} read again")

    registry.option_declarations.cache_clear()
    monkeypatch.setattr(adapter_declarations, "_read", no_child)
    again = registry.option_declarations()
    assert again == first
    assert again.expectations["host"].endswith("targets/host.expectations.yaml")
    # the module changes: its declaration is read again (here: the stand-in refuses)
    (vendors / "widget_mod.py").write_text(WIDGET + "\n# changed\n")
    registry.option_declarations.cache_clear()
    with pytest.raises(AssertionError, match="widget read again"):
        registry.option_declarations()


def test_a_new_version_of_the_distribution_is_read_again(
    vendors, fresh_cache, monkeypatch
) -> None:
    """The key stands for the name and version by the metadata file's stamp (reading them
    parsed the whole file, 2 ms an adapter): the same module under a new version is read
    again."""
    write_distribution(vendors, "widget_xtc", {"widget": "widget_mod:Widget"},
                       {"widget_mod": WIDGET})
    registry.option_declarations()

    def no_child(ep):  # type: ignore[no-untyped-def]
        raise AssertionError(f"{ep.name} read again")

    registry.option_declarations.cache_clear()
    monkeypatch.setattr(adapter_declarations, "_read", no_child)
    registry.option_declarations()  # kept
    metadata = vendors / "widget_xtc-1.0.dist-info" / "METADATA"
    metadata.write_text(metadata.read_text().replace("Version: 1.0", "Version: 1.10"))
    registry.option_declarations.cache_clear()
    with pytest.raises(AssertionError, match="widget read again"):
        registry.option_declarations()


def test_a_failed_declaration_is_not_cached(vendors, fresh_cache) -> None:
    write_distribution(vendors, "gone_xtc", {"gone": "gone_mod:Gone"},
                       {"gone_mod": "raise ImportError('libgone.so')\n"})
    assert "libgone.so" in registry.option_declarations().problems["gone"][0]
    cached = declcache.load()
    assert cached and not any("gone_mod" in json.dumps(v) for v in cached.values())


def test_a_corrupt_or_unwritable_cache_is_ignored(vendors, fresh_cache) -> None:
    fresh_cache.parent.mkdir(parents=True)
    fresh_cache.write_text("{not json")
    assert "host" in registry.option_declarations().expectations
    fresh_cache.write_text("[1, 2]")
    registry.option_declarations.cache_clear()
    assert "host" in registry.option_declarations().expectations


def test_concurrent_writers_leave_a_whole_cache(fresh_cache) -> None:
    pids = []
    for n in range(4):
        pid = os.fork()
        if pid == 0:
            for i in range(30):
                declcache.store({f"k{n}-{i}": [[], {}]})
            os._exit(0)
        pids.append(pid)
    for pid in pids:
        os.waitpid(pid, 0)
    assert declcache.load()  # whole and sealed (a writer may drop another's new entries)
    assert not list(fresh_cache.parent.glob(".declarations-*"))


def test_the_expectations_file_needs_no_host(vendors) -> None:
    (adapter,) = registry.resolve("host", {})
    assert isinstance(adapter, IsolatedAdapter)
    path = adapter.expectations_file()
    expected = Path(registry.__file__).parents[2] / "targets" / "host.expectations.yaml"
    assert path == (expected if expected.is_file() else None)
    assert adapter._host.pid == 0  # no host started to answer it
    adapter.stop()


def test_module_files_are_found_without_importing(tmp_path, monkeypatch) -> None:
    (tmp_path / "pkg_unseen").mkdir()
    (tmp_path / "pkg_unseen" / "__init__.py").write_text("raise SystemExit('imported')\n")
    (tmp_path / "pkg_unseen" / "mod.py").write_text("raise SystemExit('imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = declcache.module_file("pkg_unseen.mod")
    assert found == tmp_path / "pkg_unseen" / "mod.py"
    assert "pkg_unseen" not in sys.modules
    assert declcache.module_file("pkg_unseen.nothing") is None


def test_probe_timeout_bounds_queries_and_never_shortens_loading() -> None:
    assert HostLimits.load == options.DEFAULT_LOAD_TIMEOUT
    assert host_limits(None) == HostLimits()
    limits = host_limits(3.0)
    assert (limits.load, limits.probe, limits.query) == (HostLimits.load, 3.0, 3.0)


class GivesOtherPlacements(HostTarget):
    """A faulty adapter: its class declares device placement, its capabilities() not."""

    placements = frozenset({"host", "device"})

    def capabilities(self) -> Capabilities:
        return replace(super().capabilities(), placements=frozenset({"host"}))


class AddsDevice(HostTarget):
    """A vendor subclass that changes its capabilities without declaring placements."""

    def capabilities(self) -> Capabilities:
        return replace(super().capabilities(), placements=frozenset({"host", "device"}))


def test_declared_placements_expand_the_cases_without_a_host(vendors) -> None:
    """Collection needs no adapter host where the class declares its placements: nvgpu's
    cases are expanded by placement and no host process was started to say so."""
    (case,) = [c for c in builtin_cases() if c.id == CASE_IDS[0]]
    (adapter,) = registry.resolve("nvgpu", {})
    assert isinstance(adapter, IsolatedAdapter)
    try:
        placed = cases_for(adapter, [case])
        assert len(placed) > 1 and any(c.placement for c in placed)
        assert adapter._host.pid == 0
    finally:
        adapter.stop()


def test_capabilities_contradicting_the_declared_placements_fail_the_case(tmp_path) -> None:
    (case,) = [c for c in builtin_cases() if c.id == CASE_IDS[0]]
    spec = TargetSpec("liar", "liar", None, {})
    settings = Settings(isolate=False, perf=False)
    outcome = run_case(GivesOtherPlacements(spec), case, tmp_path / "liar", settings)
    assert outcome.status is Status.FAILED
    assert "capabilities() gives placements ['host'] but its class declares" in outcome.message
    honest = run_case(HostTarget(TargetSpec("host", "host", None, {})), case, tmp_path / "h",
                      settings)
    assert honest.status is Status.PASSED, honest.message
    # A subclass overriding capabilities() is asked, never held to the inherited value.
    assert declared_placements(AddsDevice) is None
    assert declared_placements(HostTarget) == frozenset({"host"})
    assert len(cases_for(AddsDevice(spec), [case])) > 1
