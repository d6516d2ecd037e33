"""Installed versions of Python distributions: the one lookup every report uses."""

from __future__ import annotations

from importlib import metadata


def installed(*names: str) -> dict[str, str]:
    """Name -> version of each named distribution that is installed (others left out)."""
    found = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found
