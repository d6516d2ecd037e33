"""``xtc-conformance history BUNDLE... [--out FILE]``: the verdicts and median kernel times
of several bundles on one page (a trend per kernel), and a line per bundle in the
terminal. Bundles are read as ``diff`` reads them: one that cannot be read is refused
(exit 3, nothing written), an integrity problem is a warning (``verify`` says more)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_xtc.exit_status import Exit
from pytest_xtc.report import bundle
from pytest_xtc.report.files import atomic
from pytest_xtc.report.render.page import history
from pytest_xtc.report.render.text import visible

DEFAULT_OUT = Path("history.html")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("history", help="verdicts and median kernel times of several "
                            "bundles on one page, a trend per kernel")
    parser.add_argument("bundles", type=Path, nargs="+", metavar="BUNDLE",
                        help="the bundle directories, oldest first")
    parser.add_argument("-o", "--out", type=Path, default=DEFAULT_OUT, metavar="FILE",
                        help=f"the page to write (default {DEFAULT_OUT})")


def load(paths: list[Path]) -> list[history.Loaded]:
    """Every bundle read; BundleError for the first that cannot be; warnings printed."""
    found = []
    for path in paths:
        report, records, problems = bundle.read(path)
        for problem in problems:
            print(visible(f"xtc-conformance: history: warning: {path}: {problem}"),
                  file=sys.stderr)
        found.append(history.Loaded(str(path), report, records))
    return found


def line(index: int, found: history.Loaded) -> str:
    """``#1 DIR (started ...): 685 results; host core conformant, ...``"""
    verdicts = []
    for name, entry in found.report.targets.items():
        core = (entry.verdicts or {}).get("core")
        verdicts.append(f"{name} core {core.verdict.value if core else '-'}")
    return (f"#{index} {found.name} (started {found.started}): {len(found.records)} results; "
            + ("; ".join(verdicts) or "no target"))


def main(args: argparse.Namespace) -> int:
    try:
        bundles = load(args.bundles)
    except bundle.BundleError as exc:
        print(visible(f"xtc-conformance: history: {exc}"), file=sys.stderr)
        return Exit.BAD_INPUT
    try:
        atomic.write_text(args.out, history.render(bundles))
    except OSError as exc:
        print(visible(f"xtc-conformance: history: writing {args.out} failed: "
                      f"{exc.strerror or exc}"), file=sys.stderr)
        return Exit.BAD_INPUT
    for index, found in enumerate(bundles, 1):
        print(visible(line(index, found)))
    timed = len(set().union(*(history.medians(b) for b in bundles)))
    print(visible(f"{args.out}: {len(bundles)} bundles, {timed} kernels timed"))
    return Exit.OK
