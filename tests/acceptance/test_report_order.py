"""Every bundle pytest writes verifies, whatever the order of its targets, its shard, its
xdist workers or its ``-k`` filter: one canonical order (targets by name) everywhere.

A property test over real runs, kept cheap: a few draws of a seeded generator (the same
draws every time, so a failure reruns as it failed), each a two-case selection."""

from __future__ import annotations

import random
from typing import Any

import pytest

from pytest_xtc import cli
from pytest_xtc.report import verify

TARGETS = ("host", "host-c")
FILTERS = ("relu-float32-6x5-none", "relu-float32-5x7", "pad-float32 and none and not 1x1")
DRAWS = 3


def draws(n: int) -> list[tuple[list[str], int, str | None, str]]:
    """``n`` runs: a target order, xdist workers (0 or 2), a shard (or none), a filter."""
    rng = random.Random(55)
    found = []
    for _ in range(n):
        order = rng.sample(TARGETS, k=rng.choice((1, 2)) if found else 2)
        if not found:
            order = ["host-c", "host"]  # the order the issue found broken, drawn first
        found.append((order, rng.choice((0, 2)), rng.choice((None, "1/2", "2/2")),
                      rng.choice(FILTERS)))
    return found


@pytest.mark.parametrize(("order", "workers", "shard", "keyword"), draws(DRAWS),
                         ids=lambda v: str(v))
def test_a_bundle_verifies_whatever_the_order(run: Any, pytester: pytest.Pytester,
                                              order: list[str], workers: int,
                                              shard: str | None, keyword: str) -> None:
    args = [f"--xtc-target={','.join(order)}", "--xtc-report=rep", "-k", keyword,
            "-n", str(workers)]
    if shard:
        args.append(f"--xtc-shard={shard}")
    result = run(*args)
    assert result.ret in (0, 1), result.stdout.str()[-2000:]  # a verdict, not a crash
    where = pytester.path / "rep"
    assert verify.verify(where) == []
    assert cli.main(["verify", str(where)]) == 0


def test_the_target_order_does_not_change_a_bundle(run: Any, pytester: pytest.Pytester) -> None:
    """The same selection named host-c,host and host,host-c: the same summary.md (but
    for the kernel times, measured again)."""
    texts = []
    for order, where in (("host-c,host", "a"), ("host,host-c", "b")):
        run(f"--xtc-target={order}", f"--xtc-report={where}", "-k", FILTERS[0])
        text = (pytester.path / where / "summary.md").read_text()
        texts.append(text.partition("## Performance")[0])
    assert texts[0] == texts[1]
    assert texts[0].index("| host |") < texts[0].index("| host-c |")
