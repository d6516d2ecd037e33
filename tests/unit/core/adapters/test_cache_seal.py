"""Caches believed only as far as checked: a kept host runtime replaced together with a
matching record is not loaded; a declarations cache pointing an adapter at another
expectations file changes no verdict; a certification run (``xtc-conformance run``) reads
and writes no cache; the sealing key is trusted only when private and outside the cache."""

from __future__ import annotations

import hashlib
import hmac
import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_xtc.core.adapters import adapter_declarations, cache_seal, declcache, registry
from pytest_xtc.core.xtc import runtime_cache, xtc_env
from tests.unit.core.xtc.test_runtime_cache import FakeBuild

xtc_env.import_mlir_backend()
from xtc.runtimes.host import runtime as xtc_runtime  # noqa: E402  (after the bootstrap)

CASE = "relu-float32-5x7-tile"
HOST = xtc_runtime.RuntimeType.HOST


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A cache and a state folder of this test's own, in this process and its children."""
    found = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_STATE_HOME": str(tmp_path / "state")}
    for name, value in found.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv(declcache.ENV_SWITCH, raising=False)
    adapter_declarations.option_declarations.cache_clear()
    yield found
    adapter_declarations.option_declarations.cache_clear()


def kept_library(tmp_path: Path) -> tuple[FakeBuild, Path, object]:
    fake = FakeBuild(b"\x7fELF the real runtime")
    build = runtime_cache.cached(fake, xtc_runtime)
    build(str(tmp_path / "first.so"), str(tmp_path), HOST)
    folder = declcache.cache_file(runtime_cache.DIRECTORY)
    assert folder is not None
    (kept,) = folder.glob("host-*.so")
    return fake, kept, build


@pytest.mark.parametrize("record", ["sha256", "hmac-other-key"])
def test_a_foreign_library_with_a_matching_record_is_not_loaded(dirs, tmp_path: Path,
                                                                record: str) -> None:
    fake, kept, build = kept_library(tmp_path)
    foreign = b"\x7fELF a library whose constructor runs a stranger's code"
    kept.write_bytes(foreign)
    if record == "sha256":  # the record as it used to be: its digest beside it
        fields = {"sha256": hashlib.sha256(foreign).hexdigest()}
    else:  # the present record's form, sealed with a key of the writer's own
        fields = {"hmac": hmac.new(os.urandom(32), foreign, hashlib.sha256).hexdigest()}
    kept.with_suffix(".json").write_text(json.dumps({"sha256": "", "hmac": "", **fields}))
    build(str(tmp_path / "second.so"), str(tmp_path), HOST)
    assert (tmp_path / "second.so").read_bytes() == fake.library  # built, not the foreign one
    assert fake.builds == 2
    assert kept.read_bytes() == fake.library  # and the kept one replaced


def test_the_library_kept_by_this_user_is_reused(dirs, tmp_path: Path) -> None:
    """The real host's check: the cache still saves the build when nobody touched it."""
    fake, _, build = kept_library(tmp_path)
    build(str(tmp_path / "second.so"), str(tmp_path), HOST)
    assert fake.builds == 1 and (tmp_path / "second.so").read_bytes() == fake.library


def test_a_key_others_can_read_or_one_inside_the_cache_is_not_trusted(
    dirs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_xtc.core.adapters import cache_seal

    assert declcache.cache_file() is not None
    cache_seal.key_file().chmod(0o644)
    cache_seal._key.cache_clear()
    assert cache_seal.key() is None and declcache.cache_file() is None
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "cache" / "pytest-xtc"))
    assert cache_seal.key() is None and declcache.cache_file() is None


def test_the_cache_folder_is_the_platforms(dirs) -> None:
    import platformdirs

    from pytest_xtc.core.adapters import cache_seal

    assert cache_seal.cache_dir() == Path(platformdirs.user_cache_dir("pytest-xtc"))
    assert declcache.cache_file() == cache_seal.cache_dir() / declcache.FILE_NAME


def forged_declarations(evil: Path) -> None:
    """A declarations cache for ``host`` under its real key pointing at ``evil``: once as a
    planted plain file, once as the suite's own sealed entry (a leaked key)."""
    key = declcache.key(registry.registered()["host"])
    facts = {"ordinals": False, "deterministic": True, "expectations": str(evil),
             "default_expectations": True}
    path = declcache.cache_file()
    assert path is not None and key is not None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({key: [[], facts]}))


def evil_expectations(tmp_path: Path) -> Path:
    evil = tmp_path / "evil.expectations.yaml"
    evil.write_text("- pattern: '*'\n  phase: run\n  reason: forged\n  url: https://x\n")
    return evil


def real_host_expectations() -> str:
    from pytest_xtc.targets.host import HostTarget

    return str(Path(inspect.getfile(HostTarget)).resolve().with_suffix(".expectations.yaml"))


@pytest.mark.parametrize("how", ["planted", "sealed"])
def test_a_declarations_cache_cannot_point_at_other_expectations(dirs, tmp_path: Path,
                                                                 how: str) -> None:
    evil = evil_expectations(tmp_path)
    if how == "planted":
        forged_declarations(evil)
    else:
        key = declcache.key(registry.registered()["host"])
        assert key is not None
        declcache.store({key: [[], {"expectations": str(evil), "default_expectations": True}]})
    assert registry.option_declarations().expectations.get("host") == real_host_expectations()


def test_a_forged_declarations_cache_changes_no_verdict(dirs, tmp_path: Path, run) -> None:
    """End to end on the real host: an expectation file marking every case as an expected
    failure would turn the passing case into a strict failure (exit 1); it is not used."""
    forged_declarations(evil_expectations(tmp_path))
    result = run("--xtc-target=host", f"--xtc-case={CASE}", "-q")
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=1)


CERTIFY = """
import json, sys
from pathlib import Path
from pytest_xtc import cli
from pytest_xtc.conformance import SUITE_MODULE
from pytest_xtc.core.adapters import declcache, registry

key = declcache.key(registry.registered()["host"])
declcache.store({key: [["planted: a sealed entry a certification must not read"], {}]})
cache = declcache.cache_file().parent
before = {p: p.read_bytes() for p in cache.rglob("*") if p.is_file()}
report = Path(sys.argv[1])
cli.pytest_args = lambda args: [str(SUITE_MODULE), "--xtc-target=host", "--xtc-case=%s",
                                f"--xtc-report={report}", "-p", "no:cacheprovider", "-q"]
cli.main(["run", "--target", "host", "--report", str(report)])
after = {p: p.read_bytes() for p in cache.rglob("*") if p.is_file()}
print("CACHE-UNCHANGED" if after == before else f"CACHE-CHANGED {sorted(map(str, after))}")
"""


def test_a_certification_run_reads_and_writes_no_cache(dirs, tmp_path: Path) -> None:
    report = tmp_path / "rep"
    env = {**os.environ, **dirs}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(CERTIFY % CASE), str(report)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert "CACHE-UNCHANGED" in done.stdout, done.stdout + done.stderr
    statuses = [json.loads(line)["status"]
                for line in (report / "results.jsonl").read_text().splitlines() if line]
    assert statuses == ["passed"], statuses  # the planted declaration was not read


def test_a_planted_exploration_plan_is_drawn_again(dirs, monkeypatch: pytest.MonkeyPatch) -> None:
    """The drawn schedules (and which XTC refused) decide verdicts: a plan file this
    user's suite did not write, in the plan folder, is not believed."""
    from pytest_xtc.conformance import builtin_cases
    from pytest_xtc.exploration import explore

    monkeypatch.delenv(explore.CACHE_ENV, raising=False)
    bases = list(builtin_cases()[:1])
    drawn = {bases[0].id: {"tile_oo": {"samples": []}}}
    calls: list[int] = []

    def draw(*args: object) -> dict[str, object]:
        calls.append(1)
        return drawn

    monkeypatch.setattr(explore, "_draw_all", draw)
    path = explore._cache_file(bases, 2, 0, ["tile_oo"])
    assert path is not None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({bases[0].id: {"tile_oo": {"na": "planted"}}}))
    assert explore.draw_all(bases, 2, 0, ["tile_oo"]) == drawn and calls == [1]
    assert explore.draw_all(bases, 2, 0, ["tile_oo"]) == drawn and calls == [1]  # kept, sealed


def test_no_writable_state_folder_says_why_every_cache_is_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ordinary user with no writable home: no key, so no cache, and one line why (the
    run's header prints it). A regular file where the state folder should be stops root too."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocker / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert cache_seal.key() is None
    why = cache_seal.unavailable()
    assert why is not None and "no key file can be kept at" in why and str(blocker) in why
    assert "\n" not in why


def test_a_writable_state_folder_has_no_reason_to_give(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert cache_seal.key() is not None
    assert cache_seal.unavailable() is None
