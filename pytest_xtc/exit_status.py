"""The exit status of ``xtc-conformance``, the same for every subcommand (the table of
docs/cli-exit-status.md and of ``xtc-conformance --help``)."""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    OK = 0
    VERDICT = 1
    USAGE = 2
    BAD_INPUT = 3
    INTERNAL = 4


TABLE = """\
exit status (the same for every subcommand):
  0  done, and every answer is yes (certified, verified, merged, imported...)
  1  verdict: the command ran and the answer is no: a target not conformant to a
     claimed profile, a bundle that does not certify, a rerun that disagrees with
     the bundle, a coverage gap, a faulty variant the selftest did not reject, a
     failure shrink could not reproduce
  2  usage: the command line or the environment is refused before any file is used:
     an unknown subcommand, option or target, a malformed value, extra arguments,
     PYTEST_ADDOPTS set for a certification, a target registered twice, a missing extra
  3  bad input: a file or folder named on the command line cannot be used as given:
     a bundle damaged, altered, incomplete, unverifiable or of another suite version,
     bundles that do not merge, a model that cannot be imported, an output folder that
     holds something else
  4  internal: the command could not finish: an unexpected error (a bug: report it
     with the command line), pytest ending without writing the bundle, a write that
     failed (disk full)
"""
