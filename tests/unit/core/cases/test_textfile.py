"""The suite's small input files: regular files only, and a size cap that refuses a file
before any of it is read."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from pytest_xtc.core.cases.textfile import UnreadableFile, read_bytes


def test_a_file_over_the_cap_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """A 1 GiB file (sparse) under a 64 MiB cap: refused from its size, with no 64 MiB
    read into memory first (as before: the cap was checked on what had been read)."""
    big = tmp_path / "big.onnx"
    with open(big, "wb") as file:
        file.truncate(1 << 30)
    tracemalloc.start()
    try:
        with pytest.raises(UnreadableFile, match="larger than 64 MiB"):
            read_bytes(big, 64 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak


def test_a_file_within_the_cap_is_read_whole(tmp_path: Path) -> None:
    small = tmp_path / "small.yaml"
    small.write_bytes(b"x" * 1000)
    assert read_bytes(small, 1000) == b"x" * 1000
