"""Tables for people: the registered targets and their status."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_xtc.core.adapter import TargetAdapter


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns aligned to their widest cell."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = [header, ["-" * w for w in widths], *rows]
    cells = (zip(line, widths, strict=True) for line in lines)
    return "\n".join("  ".join(str(c).ljust(w) for c, w in row).rstrip() for row in cells)


def format_targets(adapters: Sequence[TargetAdapter]) -> str:
    rows = []
    for adapter in adapters:
        probe = adapter.status()
        versions = ", ".join(f"{k} {v}" for k, v in probe.versions.items()) or "-"
        rows.append([adapter.name, probe.tier.value, probe.reason or "-", versions])
    return table(["target", "status", "reason", "versions found"], rows)
