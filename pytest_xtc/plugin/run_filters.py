"""How a run left out cases of the suite (report.json's ``filters``): one phrase each,
from pytest's own selection options and the XTC ones; a run with any is never
conformant (:mod:`pytest_xtc.report.rules.verdicts`)."""

from __future__ import annotations

import pytest

from pytest_xtc.report.rules import caseset


def _param_id(nodeid: str) -> str:
    return nodeid[nodeid.index("[") + 1 : -1] if nodeid.endswith("]") and "[" in nodeid else ""


def run_filters(config: pytest.Config, keys: set[str], collected: set[str] | None) -> list[str]:
    """How this run left out cases of the suite, one phrase each."""
    option, found = config.option, []
    if option.keyword:
        found.append(f"-k {option.keyword!r}")
    if option.markexpr:
        found.append(f"-m {option.markexpr!r}")
    if getattr(option, "deselect", None):
        found.append("--deselect " + " ".join(option.deselect))
    found += [f"node id {a}" for a in config.args if "::" in a]
    for flag, name in (
        ("lf", "--last-failed"),
        ("stepwise", "--stepwise"),
        ("collectonly", "--collect-only"),
    ):
        if getattr(option, flag, False):
            found.append(name)
    if option.xtc_cases:
        found.append("case set changed by --xtc-cases " + " ".join(option.xtc_cases))
    if option.xtc_only_cases:
        found.append("--xtc-only-cases (the built-in catalog left out)")
    if option.xtc_case:
        found.append("--xtc-case " + " ".join(option.xtc_case))
    if collected is not None:
        expected = set(keys)
        if option.xtc_shard:
            index, count = caseset.parse_shard(option.xtc_shard)
            expected = {k for k in expected if caseset.shard_of(k, count) == index}
        got = {_param_id(n) for n in collected} & expected
        if got != expected:
            found.append(f"collected {len(got)} of {len(expected)} required cases")
    return found
