"""The kernel cache's store: an entry is placed only when its seal and every file hold;
a changed, cut short, foreign or misplaced entry is removed and never loaded; writes are
whole (concurrent stores of one key keep one entry); the least recently used go past the
size bound; switched off with the suite's other caches."""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
from pathlib import Path

import pytest

from pytest_xtc.core.adapters import cache_seal, declcache, kernel_cache
from pytest_xtc.plugin.compile_cache import DEFAULT_SIZE, size_bytes

KEY = "a" * 64
OTHER = "b" * 64


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> kernel_cache.KernelCache:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv(declcache.ENV_SWITCH, raising=False)
    opened = kernel_cache.opened("on", folder=tmp_path / "kept")
    assert opened is not None
    return opened


def compiled(folder: Path, body: bytes = b"\x7fELF kernel") -> dict[str, str]:
    """A work folder as a compile leaves it, and its digests (as the worker sends them)."""
    (folder / "temps").mkdir(parents=True)
    files = {"kernel.so": body, "source.mlir": b"func.func @f()", "temps/kernel.ir": b"ir"}
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return {n: hashlib.sha256(d).hexdigest() for n, d in files.items()}


def test_a_kept_kernel_is_placed_file_for_file(store, tmp_path: Path) -> None:
    digests = compiled(tmp_path / "first")
    assert store.store(KEY, tmp_path / "first", digests) == ""
    assert store.place(KEY, tmp_path / "second") == (True, "")
    for name in digests:
        assert (tmp_path / "second" / name).read_bytes() == (tmp_path / "first" / name).read_bytes()
    assert store.place(OTHER, tmp_path / "third") == (False, "")


@pytest.mark.parametrize("spoil", ["edited", "cut short", "removed", "record of another key",
                                   "foreign seal", "seal edited"])
def test_a_spoiled_entry_is_removed_never_loaded(store, tmp_path: Path, spoil: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    store.store(KEY, tmp_path / "first", compiled(tmp_path / "first"))
    entry = store.entry(KEY)
    kernel = entry / kernel_cache.FILES / "kernel.so"
    if spoil == "edited":
        kernel.write_bytes(b"\x7fELF kernEL")  # same size
    elif spoil == "cut short":
        kernel.write_bytes(kernel.read_bytes()[:4])
    elif spoil == "removed":
        kernel.unlink()
    elif spoil == "record of another key":  # a whole entry moved under another key
        shutil.copytree(entry, store.entry(OTHER))
        entry = store.entry(OTHER)
    elif spoil == "foreign seal":  # sealed by another user's key (another machine)
        monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "elsewhere"))
        resealed = cache_seal.seal(cache_seal.unseal((entry / "seal").read_bytes()) or b"")
        monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
        assert resealed is not None
        (entry / "seal").write_bytes(resealed)
    else:
        (entry / "seal").write_bytes((entry / "seal").read_bytes().replace(b"kernel", b"kernex"))
    placed, note = store.place(entry.name, tmp_path / "second")
    assert not placed and "rebuilt, never loaded" in note
    assert not entry.exists()
    assert not (tmp_path / "second" / "kernel.so").exists()


def test_a_file_changed_after_the_compile_is_not_kept(store, tmp_path: Path) -> None:
    digests = compiled(tmp_path / "first")
    (tmp_path / "first" / "kernel.so").write_bytes(b"written by the kernel's run")
    assert "changed after the compile" in store.store(KEY, tmp_path / "first", digests)
    assert not store.entry(KEY).exists()


def test_a_path_outside_the_work_folder_is_refused(store, tmp_path: Path) -> None:
    assert "changed" in store.store(KEY, tmp_path, {"../x": "0" * 64})


def test_concurrent_stores_of_one_key_keep_one_whole_entry(store, tmp_path: Path) -> None:
    digests = compiled(tmp_path / "first")
    notes: list[str] = []
    threads = [threading.Thread(target=lambda: notes.append(
        store.store(KEY, tmp_path / "first", digests))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert notes == [""] * 8
    assert [p.name for p in store.entry(KEY).parent.iterdir()] == [KEY]  # no leftovers
    assert store.place(KEY, tmp_path / "second")[0]


def test_refresh_rewrites_an_entry(store, tmp_path: Path) -> None:
    store.store(KEY, tmp_path / "first", compiled(tmp_path / "first"))
    fresh = kernel_cache.KernelCache(store.folder, refresh=True)
    assert fresh.store(KEY, tmp_path / "again", compiled(tmp_path / "again", b"new")) == ""
    assert store.place(KEY, tmp_path / "second")[0]
    assert (tmp_path / "second" / "kernel.so").read_bytes() == b"new"


def test_the_least_recently_used_go_past_the_size_bound(store, tmp_path: Path) -> None:
    keys = [f"{n:x}" * 64 for n in range(6)]
    for n, key in enumerate(keys):
        store.store(key, tmp_path / key[:4], compiled(tmp_path / key[:4], b"k" * 1000))
        os.utime(store.entry(key) / "seal", ns=(n * 10**9, n * 10**9))
    assert store.place(keys[0], tmp_path / "used")[0]  # used now: the most recent
    small = kernel_cache.KernelCache(store.folder, max_bytes=3 * 1100)
    small.evict()
    kept = [k for k in keys if small.entry(k).exists()]
    assert 2 <= len(kept) <= 3  # under nine tenths of the bound: the newest kept
    assert kept == [keys[0], *keys[7 - len(kept):]]  # keys[0], just used, and the newest


def test_off_and_the_suites_switch_give_no_cache(store, monkeypatch, tmp_path: Path) -> None:
    assert kernel_cache.opened("off") is None
    monkeypatch.setenv(declcache.ENV_SWITCH, "off")  # xtc-conformance run sets it
    assert kernel_cache.opened("on", folder=tmp_path) is None
    with pytest.raises(ValueError, match="expected one of on, off, refresh"):
        kernel_cache.opened("maybe")


def test_sizes_read_as_bytes_and_the_default_agrees() -> None:
    assert size_bytes(DEFAULT_SIZE) == kernel_cache.DEFAULT_BYTES
    assert size_bytes("512M") == 512 << 20 and size_bytes("1000") == 1000
    with pytest.raises(ValueError, match="--xtc-cache-size=big: expected a size"):
        size_bytes("big")
