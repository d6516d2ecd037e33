"""``xtc-conformance``: list targets, run a certification, verify, merge and compare
bundles, and prove the suite's own power (``selftest``).

Exit status: one table (:mod:`pytest_xtc.exit_status`, shown by ``--help``). ``run`` gives 1
when a target is not conformant to a claimed profile (``--profile``, default core; "not
applicable" fails; a shard counts when only its being one shard stands against it) or the
bundle does not certify; ``diff`` when its ``--fail-on`` condition holds.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from pytest_xtc.core.adapters import declcache, registry
from pytest_xtc.exit_status import TABLE as EXIT_TABLE
from pytest_xtc.exit_status import Exit
from pytest_xtc.importer import command as importer
from pytest_xtc.report import bundle, diff, history, merge, verify
from pytest_xtc.report.parts.model import Report
from pytest_xtc.report.parts.records import CaseRecord
from pytest_xtc.report.render.text import visible
from pytest_xtc.report.render.verdict_lines import claims_hold, format_verdicts
from pytest_xtc.report.replay import option_flags
from pytest_xtc.report.rules.profiles import PROFILES

PROG = "xtc-conformance"


class CliError(Exception):
    """A one-line problem; the command exits with ``code``."""

    def __init__(self, message: str, code: int = Exit.BAD_INPUT) -> None:
        super().__init__(message)
        self.code = code


def _target_options(pairs: Sequence[str]) -> dict[str, str | None]:
    """Adapter option values: env vars, overridden by ``--target-option KEY=VALUE``."""
    known = {o.name: o for o in registry.adapter_options()}
    settings = {n: os.environ.get(o.env) if o.env else None for n, o in known.items()}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key not in known:
            names = ", ".join(sorted(known)) or "(none)"
            raise CliError(f"--target-option {pair}: expected KEY=VALUE with KEY among {names}",
                           Exit.USAGE)
        settings[key] = value
    return settings


def cmd_list(args: argparse.Namespace) -> int:
    from pytest_xtc.report.render.text import format_targets

    print(format_targets(registry.resolve("all", _target_options(args.target_option))))
    return 0


def pytest_args(args: argparse.Namespace) -> list[str]:
    """The pytest command line of a certification run: strict, full case set, the target's
    expected-failure file ignored, a bundle written."""
    from pytest_xtc.conformance import SUITE_MODULE

    argv = [str(SUITE_MODULE), f"--xtc-target={args.target}", "--xtc-strict",
            "--xtc-ignore-expectations", "--xtc-order-check", f"--xtc-report={args.report}",
            "-p", "no:cacheprovider", f"--rootdir={Path.cwd()}"]  # ids relative to here
    argv += option_flags(_target_options(args.target_option))
    if args.workers:
        argv += ["-n", str(args.workers)]
    if args.shard:
        argv.append(f"--xtc-shard={args.shard}")
    return argv


def cmd_run(args: argparse.Namespace, extra: Sequence[str]) -> int:
    # A certification believes no cache (docs/caches.md): the adapters' declarations are
    # read afresh and XTC's runtime built, here, in pytest, its workers and their hosts.
    with declcache.switched_off():
        return _certify(args, extra)


def _certify(args: argparse.Namespace, extra: Sequence[str]) -> int:
    if extra:
        raise CliError(f"run: refusing {' '.join(extra)}: a certification runs the full case "
                       "set; use pytest itself (-k, -m, node ids) for a partial run", Exit.USAGE)
    if os.environ.get("PYTEST_ADDOPTS"):
        raise CliError("run: PYTEST_ADDOPTS is set; unset it, a certification takes no "
                       "extra pytest options", Exit.USAGE)
    _check_target(args.target)
    try:
        bundle.check_destination(args.report)
    except bundle.BundleError as exc:
        raise CliError(f"run: {exc}") from None
    import pytest

    from pytest_xtc.report.render import progress

    # a line of progress now and then, on a terminal only (quiet in CI logs)
    shown = {"plugins": [progress.PytestProgress()]} if progress.wanted(sys.stdout) else {}
    status = int(pytest.main(pytest_args(args), **shown))
    if not (args.report / bundle.MANIFEST).is_file():
        print(f"{PROG}: run: pytest ended with status {status} and wrote no bundle",
              file=sys.stderr)
        return Exit.USAGE if status == pytest.ExitCode.USAGE_ERROR else Exit.INTERNAL
    report, _, _ = bundle.read(args.report)
    print(format_verdicts(report))
    return 0 if claims_hold(report, args.profile, partial_ok=bool(args.shard)) else 1


def _check_target(selection: str) -> None:
    """A usage error unless ``selection`` names registered targets (pytest would else
    refuse it with its own status)."""
    try:
        known = registry.registered()
        unknown = [s.name for s in registry.parse(selection)
                   if s.base not in known and s.name not in ("all", "auto")]
    except (registry.SelectionError, registry.DuplicateTarget) as exc:
        raise CliError(f"run: --target {selection}: {exc}", Exit.USAGE) from None
    if unknown:
        names = ", ".join(sorted(known)) or "(none)"
        raise CliError(f"run: --target {selection}: unknown target {', '.join(unknown)}; "
                       f"registered targets: {names}", Exit.USAGE)


def cmd_verify(args: argparse.Namespace) -> int:
    problems, report, records = verify.inspect(args.bundle)
    for problem in problems:
        print(visible(f"{args.bundle}: {problem}"), file=sys.stderr)
    if problems or report is None:
        return Exit.BAD_INPUT
    assert report.case_set is not None  # verified: assembled
    print(visible(f"{args.bundle}: OK ({len(records)} results, {len(report.targets)} "
                  f"targets, case set {report.case_set.sha256[:16]})"))
    print(format_verdicts(report))
    if args.rerun is None:
        return 0
    return rerun(args, report, records)


def rerun(args: argparse.Namespace, report: Report, records: list[CaseRecord]) -> int:
    from pytest_xtc.report import audit

    seed = args.seed if args.seed is not None else secrets.randbelow(1 << 32)
    print(f"rerun: {min(args.rerun, len(records))} of {len(records)} results drawn with "
          f"--seed {seed}")
    with tempfile.TemporaryDirectory(prefix="xtc-rerun-") as work:
        found = audit.audit(report, records, args.rerun, seed, Path(work))
    for line in found.mismatches:
        print(visible(f"{args.bundle}: rerun: {line}"), file=sys.stderr)
    print(f"rerun: {len(found.chosen)} cases, {len(found.mismatches)} mismatches "
          f"({found.digests_compared} output digests compared)")
    return 1 if found.mismatches else 0


def cmd_merge(args: argparse.Namespace) -> int:
    try:
        report = merge.merge(args.out, args.bundles)
    except bundle.BundleError as exc:
        raise CliError(f"merge: {exc}") from None
    except bundle.WriteError as exc:
        raise CliError(f"merge: {exc}; {args.out} was left as it was", Exit.INTERNAL) from None
    count = report.case_set.count if report.case_set else 0
    print(visible(f"{args.out}: merged {len(args.bundles)} bundles, {count} required cases"))
    print(format_verdicts(report))
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse, its usage errors on one line (exit status 2, as in the table)."""

    def error(self, message: str) -> NoReturn:
        self.exit(Exit.USAGE, f"{self.prog}: {message}; see {self.prog} --help\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description=description(), epilog=EXIT_TABLE,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=version_text())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    option_help = "an adapter option (as --xtc-KEY of pytest); repeatable"

    listing = sub.add_parser("list", help="registered targets and their status here")
    listing.add_argument("--target-option", action="append", default=[], metavar="KEY=VALUE",
                         help=option_help)

    run = sub.add_parser("run", help="certification run of a target: strict, full case set, "
                         "expected-failure files ignored, bundle written")
    run.add_argument("--target", required=True, metavar="NAME", help="target to certify")
    run.add_argument("--report", required=True, type=Path, metavar="DIR",
                     help="bundle directory (new, empty, or a bundle to replace)")
    run.add_argument("--target-option", action="append", default=[], metavar="KEY=VALUE",
                     help=option_help)
    run.add_argument("-n", "--workers", type=int, default=0, metavar="N",
                     help="pytest-xdist worker processes")
    run.add_argument("--shard", metavar="I/N", help="run shard I of N (merge the bundles)")
    run.add_argument("--profile", action="append", choices=PROFILES, metavar="PROFILE",
                     help=f"profile claimed, decides the exit status; repeatable "
                     f"({', '.join(PROFILES)}; default core)")

    verify = sub.add_parser("verify", help="check a bundle: checksums, completeness, "
                            "consistency of results and verdicts")
    verify.add_argument("bundle", type=Path, metavar="DIR", help="the bundle directory")
    verify.add_argument("--rerun", type=int, metavar="N",
                        help="also re-run N results drawn at random on this machine and "
                        "compare statuses (and output digests where deterministic)")
    verify.add_argument("--seed", type=int, metavar="S",
                        help="seed of the --rerun draw (default: random, printed)")

    sub.add_parser("selftest", help="prove the suite's power: faulty host variants must all "
                   "be rejected, the real host must pass three seeded runs").add_argument(
        "--list", action="store_true", help="list the faulty variants (targets by name: "
        "--xtc-target=selftest-<variant>) and exit")

    sub.add_parser("coverage", help="print what the catalog's cases cover of each op's "
                   "parameters: every value, and every pair of values (all-pairs)")

    merge = sub.add_parser("merge", help="merge bundles of shards or machines into one")
    merge.add_argument("out", type=Path, metavar="OUT",
                       help="the merged bundle's directory (new, empty, or a bundle to replace)")
    merge.add_argument("bundles", type=Path, nargs="+", metavar="DIR",
                       help="the bundles to merge (shards or machines of one run)")

    runs = sub.add_parser("merge-runs", help="merge the results of several runs of one "
                          "execution pack's runner (a pack run in several device calls)")
    runs.add_argument("pack", type=Path, metavar="PACK", help="the execution pack")
    runs.add_argument("runs", type=Path, nargs="+", metavar="RESULTS",
                      help="the runner's results folders, of disjoint cases")
    runs.add_argument("--into", type=Path, required=True, metavar="DIR",
                      help="the merged results folder (new or empty; PACK/results to judge "
                      "with --xtc-from-pack=PACK)")

    shrink = sub.add_parser("shrink", help="reduce every failed case of a bundle to the "
                            "smallest case that fails the same way, as case files")
    shrink.add_argument("bundle", type=Path, metavar="DIR",
                        help="the bundle whose failed cases are shrunk")
    shrink.add_argument("-o", "--out", type=Path, default=None, metavar="OUT",
                        help="where the case files go (default: DIR/shrunk)")
    importer.add_parser(sub)
    diff.add_parser(sub)
    history.add_parser(sub)
    for choice in sub._choices_actions:  # each subcommand's --help opens with its line
        found = sub.choices[choice.dest]
        found.description = (found.description or choice.help or "").replace("`", "")
    return parser


def description() -> str:
    """The module docstring's first paragraph, whole, without its RST markup."""
    return " ".join((__doc__ or "").split("\n\n")[0].replace("``", "").split())


def version_text() -> str:
    from pytest_xtc import SUITE_VERSION, __version__

    return f"{PROG} (pytest-xtc) {__version__}, conformance suite {SUITE_VERSION}"


def cmd_merge_runs(args: argparse.Namespace) -> int:
    """One results folder from several runs of a pack's runner, each checked."""
    from pytest_xtc.core.pack.runs import merge_runs
    from pytest_xtc.core.pack.writer import PackError

    try:
        merged = merge_runs(args.pack, args.runs, args.into)
    except PackError as exc:
        raise CliError(f"merge-runs: {exc}") from None
    print(f"{args.into}: {len(merged['cases'])} case results from {len(args.runs)} runs, "
          f"{len(merged['not_run'])} of the pack's cases not run")
    return 0


def cmd_coverage() -> int:
    """Print each covered family's table; exit 1 when a pair is left uncovered."""
    from pytest_xtc.conformance import coverage_table

    table = coverage_table()
    for found in table.values():
        print("\n".join(found.lines()))
    return 0 if all(c.complete for c in table.values()) else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "run":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        if args.command == "list":
            return cmd_list(args)
        if args.command == "run":
            args.profile = args.profile or ["core"]
            return cmd_run(args, extra)
        if args.command == "verify":
            if args.rerun is not None and args.rerun < 1:
                raise CliError("verify: --rerun N needs N >= 1", Exit.USAGE)
            return cmd_verify(args)
        if args.command == "selftest":
            from pytest_xtc.selftest import proof as selftest
            from pytest_xtc.selftest import targets

            return targets.print_list() if args.list else 0 if selftest.run() else 1
        if args.command == "shrink":
            from pytest_xtc.exploration.shrink import command as shrink

            return shrink.main(args)
        if args.command == "import":
            return importer.main(args)
        if args.command == "coverage":
            return cmd_coverage()
        if args.command == "diff":
            return diff.main(args)
        if args.command == "history":
            return history.main(args)
        if args.command == "merge-runs":
            return cmd_merge_runs(args)
        return cmd_merge(args)
    except CliError as exc:
        print(visible(f"{PROG}: {exc}"), file=sys.stderr)
        return exc.code
    except registry.DuplicateTarget as exc:
        print(visible(f"{PROG}: {exc}"), file=sys.stderr)
        return Exit.USAGE
    except Exception as exc:  # a bug: one line, its own status, no traceback
        print(visible(f"{PROG}: internal error: {type(exc).__name__}: {exc} (a bug: "
                      "report it with the command line)"), file=sys.stderr)
        return Exit.INTERNAL


if __name__ == "__main__":
    sys.exit(main())
