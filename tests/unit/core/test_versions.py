"""What the kernel cache's key reads of the toolchain: a distribution's files (an edit in
place under an unchanged version counts), programs on PATH, environment variables by name
and prefix."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_xtc.core import versions
from tests.conftest import fake_executable, write_distribution


@pytest.fixture
def distribution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = write_distribution(tmp_path / "site", "toolchainstub", {},
                              {"toolchain_stub": "X = 1\n"})
    info = root / "toolchainstub-1.0.dist-info"
    (info / "RECORD").write_text("toolchain_stub.py,,\ntoolchainstub-1.0.dist-info/METADATA,,\n")
    monkeypatch.setattr(sys, "path", [str(root), *sys.path])
    versions.distribution_files.cache_clear()
    yield root
    versions.distribution_files.cache_clear()


def test_a_source_edited_in_place_changes_the_distributions_digest(distribution: Path) -> None:
    first = versions.distribution_files("toolchainstub")
    versions.distribution_files.cache_clear()
    assert versions.distribution_files("toolchainstub") == first  # read again: the same
    (distribution / "toolchain_stub.py").write_text("X = 2\n")  # same size, same version
    versions.distribution_files.cache_clear()
    assert first is not None and versions.distribution_files("toolchainstub") != first
    assert versions.distribution_files("not-installed-anywhere") is None


def test_programs_and_environment_are_read_by_name(tmp_path, monkeypatch) -> None:
    tool = fake_executable(tmp_path / "bin" / "cc", "exit 0")
    monkeypatch.setenv("PATH", str(tool.parent))
    assert versions.program("cc")[:2] == ["cc", str(tool.resolve())]
    assert versions.program("absent-tool") == ["absent-tool", None]
    monkeypatch.setenv("XTC_SOMETHING", "1")
    monkeypatch.setenv("CC", "clang")
    found = versions.environment(["XTC_*", "CC", "CFLAGS"])
    assert found["XTC_SOMETHING"] == "1" and found["CC"] == "clang" and "CFLAGS" not in found
    assert "PATH" not in found
