"""``xtc-conformance shrink``: shrink a bundle's failures and print each result."""

from __future__ import annotations

import argparse
import sys

from pytest_xtc.exit_status import Exit
from pytest_xtc.exploration.shrink.from_bundle import shrink_bundle
from pytest_xtc.report import bundle
from pytest_xtc.report.render.text import visible


def main(args: argparse.Namespace) -> int:
    """Shrink the bundle's failures; exit 1 when any could not be shrunk or reproduced."""
    if not (args.bundle / bundle.REPORT).is_file():
        return _bad_input(f"{args.bundle}: no {bundle.REPORT}; give a bundle directory")
    out = args.out or args.bundle / "shrunk"
    try:
        results = shrink_bundle(args.bundle, out)
    except bundle.BundleError as exc:  # a bundle altered or not whole: bad input
        return _bad_input(str(exc))
    for result in results:
        print(visible(result.describe()))
    if not results:
        print(f"{args.bundle}: no failed case to shrink")
    return 0 if all(r.reproduced for r in results) else 1


def _bad_input(problem: str) -> int:
    print(visible(f"xtc-conformance: shrink: {problem}"), file=sys.stderr)
    return Exit.BAD_INPUT
