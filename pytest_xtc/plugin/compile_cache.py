"""The kernel cache's options: ``--xtc-compile-cache=on|off|refresh`` and
``--xtc-cache-size`` (docs/caches.md, "Kernels"). Standard library only at import time."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_xtc.core.adapters.kernel_cache import KernelCache

MODES = ("on", "off", "refresh")
DEFAULT_SIZE = "1G"  # kernel_cache.DEFAULT_BYTES (a test checks both agree)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def size_bytes(text: str) -> int:
    """Bytes of ``512M``, ``2G``, ``1000000``...; ValueError (one line) otherwise."""
    match = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)i?B?\s*", text, re.IGNORECASE)
    if match is None or int(match[1]) <= 0:
        raise ValueError(f"--xtc-cache-size={text}: expected a size such as 512M or 2G")
    return int(match[1]) * _UNITS[match[2].upper()]


def add(parser: pytest.Parser) -> None:
    group = parser.getgroup("xtc", "XTC conformance")
    group.addoption(
        "--xtc-compile-cache", choices=MODES, default="on", dest="xtc_compile_cache",
        help="keep compiled kernels under a key of everything that changes them and reuse "
        "them (on, the default), compile every case (off), or compile every case and "
        "rewrite the kept kernels (refresh); xtc-conformance run never uses it",
    )
    group.addoption(
        "--xtc-cache-size", default=DEFAULT_SIZE, dest="xtc_cache_size", metavar="SIZE",
        help=f"the kernel cache's bound, least recently used out (default {DEFAULT_SIZE})",
    )


def opened(config: pytest.Config) -> KernelCache | None:
    """The session's kernel cache (None: off); a one-line usage error for a bad size."""
    from pytest_xtc.core.adapters import kernel_cache

    mode = getattr(config.option, "xtc_compile_cache", "off")
    try:
        size = size_bytes(getattr(config.option, "xtc_cache_size", DEFAULT_SIZE))
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    folder = os.environ.get(kernel_cache.ENV_FOLDER)
    return kernel_cache.opened(mode, size, Path(folder) if folder else None)


def mode(config: pytest.Config) -> str:
    """What the bundle says: the mode used, ``off`` when no cache could be used."""
    chosen = getattr(config.option, "xtc_compile_cache", "off")
    return chosen if opened(config) is not None else "off"
