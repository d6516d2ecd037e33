"""``xtc-conformance diff``'s comparison as terminal text. No pytest."""

from __future__ import annotations

from pytest_xtc.report.render.text import human_time, table, visible
from pytest_xtc.report.rules.comparison import Comparison


def lines(found: Comparison, width_limit: int = 30) -> list[str]:
    """The comparison for a terminal (each list cut at ``width_limit`` entries)."""
    out = [visible(f"{found.old} -> {found.new}: {found.headline()}")]

    def cut(rows: list[list[str]]) -> list[list[str]]:
        more = len(rows) - width_limit
        return rows[:width_limit] + ([[f"... {more} more", *[""] * (len(rows[0]) - 1)]]
                                     if more > 0 else [])

    if found.changed:
        rows = [[c.case, c.old, c.new, "regression" if c.regression else ""]
                for c in found.changed]
        out += ["", table(["case", "was", "now", ""], cut(rows), width=120)]
    for title, keys in (("new", found.added), ("gone", found.gone)):
        if keys:
            shown = ", ".join(keys[:width_limit]) + (" ..." if len(keys) > width_limit else "")
            out += ["", visible(f"{title} cases ({len(keys)}): {shown}")]
    for title, speeds in (("slower", found.slower), ("faster", found.faster)):
        if speeds:
            rows = [[s.case, human_time(s.old_median_s), human_time(s.new_median_s),
                     f"{s.ratio:.2f}x", f"{s.low:.2f}-{s.high:.2f}", f"{s.effect:.0%}",
                     f"{s.load:.2f}", f"{s.p:.3g}"] for s in speeds]
            out += ["", f"{title} kernels:",
                    table(["case", "median was", "now", "ratio", "interval", "effect",
                           "machine", "p"], cut(rows), width=120)]
    out += ["", f"speed test: {found.test}"]
    return out
