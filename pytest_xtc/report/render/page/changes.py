"""The report page's "Changes since the baseline" section
(:mod:`pytest_xtc.report.rules.comparison`)."""

from __future__ import annotations

from pytest_xtc.report.render.page.sections import table
from pytest_xtc.report.render.page.style import esc, status_class
from pytest_xtc.report.render.text import human_time
from pytest_xtc.report.rules.comparison import Comparison, Speed


def _speeds(title: str, speeds: list[Speed]) -> list[str]:
    if not speeds:
        return []
    rows = [[f"<span class=mono>{esc(s.case)}</span>", esc(human_time(s.old_median_s)),
             esc(human_time(s.new_median_s)), f"{s.ratio:.2f}x", f"{s.effect:.0%}",
             f"{s.p:.3g}"] for s in speeds]
    return [f"<h3>{title} kernels ({len(speeds)})</h3>",
            *table(["case", "median was", "median now", "ratio", "effect", "p"], rows,
                   numeric=5)]


def changes(found: Comparison) -> list[str]:
    """Status changes (regressions marked), new and gone cases, slower and faster kernels."""
    lines = [f"<p>Baseline <code>{esc(found.old)}</code>, this bundle <code>{esc(found.new)}"
             f"</code>: {esc(found.headline())}.</p>"]
    if found.changed:
        rows = [[f"<span class=mono>{esc(c.case)}</span>",
                 f'<span class="{status_class(c.old)}">{esc(c.old)}</span>',
                 f'<span class="{status_class(c.new)}">{esc(c.new)}</span>',
                 "<b class=bad>regression</b>" if c.regression else ""] for c in found.changed]
        lines += ["<h3>Status changes</h3>", *table(["case", "was", "now", ""], rows)]
    for title, keys in (("New cases", found.added), ("Gone cases", found.gone)):
        if keys:
            lines += [f"<details><summary>{title} ({len(keys)})</summary><p class=mono>",
                      ", ".join(esc(k) for k in keys), "</p></details>"]
    lines += _speeds("Slower", found.slower) + _speeds("Faster", found.faster)
    return [*lines, f"<p class=muted>Speed test: {esc(found.test)}.</p>"]
