"""``--xtc-shard=I/N``: keep one shard of the cases, the same on every worker and machine."""

from __future__ import annotations

import pytest

from pytest_xtc.report.rules import caseset


def item_key(item: pytest.Item) -> str:
    """``<target>-<case id>`` for a conformance case, the node id for anything else."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    if "xtc_case" in params and "xtc_adapter" in params:
        return f"{params['xtc_adapter'].name}-{params['xtc_case'].id}"
    return item.nodeid


class Sharder:
    """Keeps the items of one shard: the same on every xdist worker and every machine."""

    def __init__(self, index: int, count: int) -> None:
        self.index, self.count = index, count

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        keep: list[pytest.Item] = []
        drop: list[pytest.Item] = []
        for item in items:
            mine = caseset.shard_of(item_key(item), self.count) == self.index
            (keep if mine else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep


def configure(config: pytest.Config) -> None:
    """Register the shard filter (every process, xdist workers included)."""
    text = config.getoption("xtc_shard")
    if text:
        try:
            index, count = caseset.parse_shard(text)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
        config.pluginmanager.register(Sharder(index, count), "xtc-shard")
