"""Helpers for the plugin's own tests: fake distributions that register adapters."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from pytest_xtc.core.adapter import TargetSpec
from pytest_xtc.core.adapters import registry

FAULTY = {
    f"faulty-{name}": f"{cls.__module__}:{cls.__name__}"
    for name, cls in __import__("pytest_xtc.selftest.faults", fromlist=["FAULTS"]).FAULTS.items()
}


@pytest.fixture(autouse=True, scope="session")
def _kernel_cache_of_this_run(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Kept kernels go to a folder of this test run (its pytest runs in subprocesses too):
    no test relies on what another run kept (docs/caches.md, "Kernels")."""
    os.environ["XTC_KERNEL_CACHE"] = str(tmp_path_factory.mktemp("kernels"))


def fake_executable(path: Path, body: str) -> Path:
    """A shell script at ``path`` standing in for a tool (nvcc, kvx-cos-gcc...)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def spec_of(name: str, options: Mapping[str, str | None]) -> TargetSpec:
    """The TargetSpec a selection such as ``nvgpu[1]`` gives an adapter."""
    (selected,) = registry.parse(name)
    return TargetSpec(selected.name, selected.base, selected.ordinal, dict(options))


def write_distribution(
    root: Path, name: str, targets: Mapping[str, str], modules: Mapping[str, str] = {}
) -> Path:
    """A minimal installed distribution (dist-info + modules) under ``root``, registering
    ``targets`` in the ``pytest_xtc.targets`` entry-point group, as a vendor package would."""
    root.mkdir(parents=True, exist_ok=True)
    info = root / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    lines = ["[pytest_xtc.targets]", *(f"{k} = {v}" for k, v in targets.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    for module, source in modules.items():
        (root / f"{module}.py").write_text(source)
    return root


@pytest.fixture
def vendor(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """Install a fake vendor distribution for subprocess runs (via PYTHONPATH)."""

    def install(name: str, targets: Mapping[str, str], modules: Mapping[str, str] = {}) -> Path:
        root = write_distribution(pytester.path / f"site-{name}", name, targets, modules)
        paths = [str(root), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
        return root

    return install


@pytest.fixture
def run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., pytest.RunResult]:
    """pytest in a subprocess, as a user runs it, from an empty directory, no terminal,
    and not marked as an xdist worker when these tests themselves run under ``-n``."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)

    def runner(*args: str) -> pytest.RunResult:
        return pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", *args
        )  # stdin closed, no tty

    return runner
