"""The selftest's variants as targets by name: every variant of the registry, built with
the host's expected-failure file; an unknown name refused in one line."""

from __future__ import annotations

import pytest

from pytest_xtc import cli
from pytest_xtc.core.adapter import TargetSpec
from pytest_xtc.core.adapters import registry
from pytest_xtc.selftest import faults, targets


def test_every_variant_of_the_registry_is_a_target() -> None:
    assert targets.names() == sorted(f"selftest-{n}" for n in faults.FAULTS)
    for name in targets.names():
        adapter = targets.by_name(TargetSpec(name, name))
        assert isinstance(adapter, faults.FAULTS[name.removeprefix("selftest-")])
        assert adapter.name == name
        assert adapter.expectations_file() == targets.HOST_EXPECTATIONS


def test_an_unknown_variant_is_refused() -> None:
    targets.check_selection(["host", targets.names()[0]])
    with pytest.raises(registry.SelectionError, match="selftest --list") as caught:
        targets.check_selection(["selftest-no-such-fault"])
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match="no selftest variant"):
        targets.by_name(TargetSpec("selftest-no-such-fault", "selftest-no-such-fault"))


def test_selftest_list_names_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["selftest", "--list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out[:-1]] == targets.names()
    assert out[-1].startswith(f"{len(faults.FAULTS)} variants; run one: pytest --xtc-target=")


def test_they_are_not_registered_targets() -> None:
    """Not in ``all`` nor --xtc-list-targets: only by name."""
    assert not any(n.startswith("selftest-") for n in registry.registered())
