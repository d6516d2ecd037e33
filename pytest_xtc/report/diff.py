"""``xtc-conformance diff OLD NEW``: what changed between two bundles, in the terminal,
as JSON (``--json``) and as NEW's report page with the changes first (``--html FILE``).

Exit status: 0, or 1 when ``--fail-on`` names something found (``regressions``: a passed
case that now fails, errs, is invalid, or a kernel slower beyond the noise,
:mod:`pytest_xtc.report.rules.comparison`; ``changes``: any difference); 3 when a bundle
cannot be read (the message names it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pytest_xtc.exit_status import Exit
from pytest_xtc.report import bundle
from pytest_xtc.report.files import atomic
from pytest_xtc.report.render import page
from pytest_xtc.report.render.diff_lines import lines
from pytest_xtc.report.render.text import visible
from pytest_xtc.report.rules.comparison import ALPHA, THRESHOLD, Comparison, compare  # noqa: F401

FAIL_ON = ("never", "regressions", "changes")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "diff", help="compare two bundles: status changes, new and gone cases, kernels "
        "slower or faster beyond the noise of their repeats",
        description=__doc__.split("\n\n")[0].replace("\n", " ") if __doc__ else None)
    parser.add_argument("old", type=Path, metavar="OLD", help="the baseline bundle directory")
    parser.add_argument("new", type=Path, metavar="NEW", help="the bundle compared with it")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.add_argument("--html", type=Path, metavar="FILE",
                        help="also write NEW's report page with the changes to FILE")
    parser.add_argument("--fail-on", choices=FAIL_ON, default="never",
                        help="exit 1 when regressions (or any change) are found "
                        "(default: never)")
    parser.add_argument("--alpha", type=float, default=ALPHA, metavar="P",
                        help=f"significance of the speed test (default {ALPHA})")
    parser.add_argument("--threshold", type=float, default=THRESHOLD, metavar="F",
                        help="smallest relative change of a median counted, raised to the "
                        f"pair's own noise where that is larger (default {THRESHOLD})")


def main(args: argparse.Namespace) -> int:
    if not 0 < args.alpha < 1 or args.threshold < 0:
        print("xtc-conformance: diff: --alpha needs 0 < P < 1 and --threshold F >= 0",
              file=sys.stderr)
        return Exit.USAGE
    try:
        _, old, old_problems = bundle.read(args.old)
        report, new, new_problems = bundle.read(args.new)
    except bundle.BundleError as exc:
        print(visible(f"xtc-conformance: diff: {exc}"), file=sys.stderr)
        return Exit.BAD_INPUT
    for path, problems in ((args.old, old_problems), (args.new, new_problems)):
        for problem in problems:  # compared all the same; verify says more
            print(visible(f"xtc-conformance: diff: warning: {path}: {problem}"),
                  file=sys.stderr)
    found = compare(old, new, old_name=str(args.old), new_name=str(args.new),
                         alpha=args.alpha, threshold=args.threshold)
    if args.json:
        print(json.dumps(found.to_dict(), indent=1, sort_keys=True))
    else:
        print("\n".join(lines(found)))
    if args.html is not None:
        try:
            atomic.write_text(args.html, page.render(report, new, found))
        except OSError as exc:
            print(visible(f"xtc-conformance: diff: writing {args.html} failed: "
                          f"{exc.strerror or exc}"), file=sys.stderr)
            return Exit.BAD_INPUT
    if args.fail_on == "regressions" and found.regressions:
        return Exit.VERDICT
    return Exit.VERDICT if args.fail_on == "changes" and not found.empty else Exit.OK
