"""Installed versions of Python distributions: the one lookup every report uses."""

from __future__ import annotations

import functools
from importlib import metadata


def installed(*names: str) -> dict[str, str]:
    """Name -> version of each named distribution that is installed (others left out)."""
    return {name: version for name in names if (version := _version(name)) is not None}


@functools.cache
def _version(name: str) -> str | None:
    """Read once per process (a few ms: the metadata of every installed distribution is
    scanned; each case's expectations ask): what this process imported does not change
    with a later install."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
