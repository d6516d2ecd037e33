"""XTC's host runtime is built once per machine and reused while nothing it is built from
has changed; a kept library that is not whole, a changed source, compiler setting or
runtime kind is built again (core/xtc/runtime_cache.py)."""

from __future__ import annotations

import shutil
import types
from pathlib import Path

import pytest

from pytest_xtc.core.xtc import runtime_cache, xtc_env

xtc_env.import_mlir_backend()
from xtc.runtimes.host import runtime as xtc_runtime  # noqa: E402  (after the bootstrap)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("PYTEST_XTC_CACHE", raising=False)
    return tmp_path / "cache" / "pytest-xtc" / runtime_cache.DIRECTORY


class FakeBuild:
    """Stands in for XTC's ``_compile_runtime``: counts its builds, writes ``library``."""

    def __init__(self, library: bytes = b"\x7fELF fake library") -> None:
        self.library, self.builds = library, 0

    def __call__(self, out_dll: str, tdir: str, runtime_type: object) -> None:
        self.builds += 1
        Path(out_dll).write_bytes(self.library)


def test_a_kept_runtime_is_copied_into_place_instead_of_built_again(cache, tmp_path) -> None:
    fake = FakeBuild()
    build = runtime_cache.cached(fake, xtc_runtime)
    build(str(tmp_path / "first.so"), str(tmp_path), xtc_runtime.RuntimeType.HOST)
    build(str(tmp_path / "second.so"), str(tmp_path), xtc_runtime.RuntimeType.HOST)
    assert fake.builds == 1
    assert (tmp_path / "second.so").read_bytes() == fake.library
    assert len(list(cache.glob("host-*.so"))) == 1


def test_a_kept_runtime_that_is_not_whole_is_built_again(cache, tmp_path) -> None:
    fake = FakeBuild()
    build = runtime_cache.cached(fake, xtc_runtime)
    build(str(tmp_path / "first.so"), str(tmp_path), xtc_runtime.RuntimeType.HOST)
    (kept,) = cache.glob("host-*.so")
    kept.write_bytes(fake.library[:5])  # cut short, as by a full disk
    build(str(tmp_path / "second.so"), str(tmp_path), xtc_runtime.RuntimeType.HOST)
    assert fake.builds == 2
    assert (tmp_path / "second.so").read_bytes() == fake.library
    assert kept.read_bytes() == fake.library  # and replaced


def test_a_changed_compiler_setting_builds_again(cache, tmp_path, monkeypatch) -> None:
    fake = FakeBuild()
    build = runtime_cache.cached(fake, xtc_runtime)
    build(str(tmp_path / "first.so"), str(tmp_path), xtc_runtime.RuntimeType.HOST)
    monkeypatch.setenv("CPATH", str(tmp_path))
    build(str(tmp_path / "second.so"), str(tmp_path), xtc_runtime.RuntimeType.HOST)
    assert fake.builds == 2


def test_a_changed_runtime_source_changes_the_key(tmp_path) -> None:
    """A copy of XTC's runtime tree gives the same key; editing one C file changes it."""
    real = Path(xtc_runtime.__file__).parents[2]
    module = tmp_path / "xtc" / "runtimes" / "host" / "runtime.py"
    module.parent.mkdir(parents=True)
    shutil.copy(real / "runtimes" / "host" / "runtime.py", module)
    shutil.copytree(real / "csrcs" / "runtimes" / "host",
                    tmp_path / "xtc" / "csrcs" / "runtimes" / "host")
    copy = types.ModuleType("runtime_copy")
    copy.__file__ = str(module)
    assert runtime_cache.key(copy) == runtime_cache.key(xtc_runtime)
    source = tmp_path / "xtc" / "csrcs" / "runtimes" / "host" / "fclock.c"
    source.write_text(source.read_text() + "\n/* changed */\n")
    assert runtime_cache.key(copy) != runtime_cache.key(xtc_runtime)


def test_the_gpu_runtime_and_a_switched_off_cache_are_built_as_xtc_does(
    cache, tmp_path, monkeypatch
) -> None:
    fake = FakeBuild()
    build = runtime_cache.cached(fake, xtc_runtime)
    for _ in range(2):
        build(str(tmp_path / "gpu.so"), str(tmp_path), xtc_runtime.RuntimeType.GPU)
    monkeypatch.setenv("PYTEST_XTC_CACHE", "off")
    for _ in range(2):
        build(str(tmp_path / "host.so"), str(tmp_path), xtc_runtime.RuntimeType.HOST)
    assert fake.builds == 4
    assert not cache.exists()


def test_an_unknown_build_function_is_left_alone(monkeypatch) -> None:
    def other(out_dll: str, runtime_type: object) -> None:  # not XTC 0.3's signature
        raise AssertionError("never called here")

    monkeypatch.setattr(xtc_runtime, "_compile_runtime", other)
    assert runtime_cache.install() is False
    assert xtc_runtime._compile_runtime is other


def test_the_real_host_passes_with_a_kept_runtime_and_with_none(run, tmp_path,
                                                                monkeypatch) -> None:
    """End to end with XTC's real build: the first session builds and keeps the runtime,
    the second uses it; both pass the same cases, as does a session with the cache off."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("PYTEST_XTC_CACHE", raising=False)
    args = ("--xtc-target=host", "-k", "matmul-float32-13x11x7 and not exact")
    first = run(*args)
    first.assert_outcomes(passed=first.parseoutcomes()["passed"])
    assert first.parseoutcomes()["passed"] >= 3
    (kept,) = (tmp_path / "cache" / "pytest-xtc" / runtime_cache.DIRECTORY).glob("host-*.so")
    stamp = kept.stat().st_mtime_ns
    second = run(*args)
    second.assert_outcomes(passed=first.parseoutcomes()["passed"])
    assert kept.stat().st_mtime_ns == stamp  # used, not built again
    monkeypatch.setenv("PYTEST_XTC_CACHE", "off")
    third = run(*args)
    third.assert_outcomes(passed=first.parseoutcomes()["passed"])
