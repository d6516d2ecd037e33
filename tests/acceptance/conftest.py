"""Fixtures several acceptance tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_xtc.core.adapters import declcache, kernel_cache


@pytest.fixture
def kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> kernel_cache.KernelCache:
    """An empty kernel cache, switched on, in the test's own folder."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv(declcache.ENV_SWITCH, raising=False)
    store = kernel_cache.opened("on", folder=tmp_path / "kernels")
    assert store is not None
    return store
