"""``--help`` as users read it: ``xtc-conformance --help`` and every subcommand's own
``--help`` describe it, in plain text (no RST markup such as ``double backticks``), and
pytest's ``--xtc-`` options too."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

import pytest

from pytest_xtc import cli

#: RST markup that must not reach a terminal: literals, roles, emphasis by asterisks.
MARKUP = re.compile(r"`|:(?:mod|func|class|data|meth):|\*\*")


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_the_top_help_is_plain_and_lists_every_subcommand(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = capsys.readouterr().out
    assert not MARKUP.search(text), MARKUP.search(text)
    assert "xtc-conformance: list targets, run a certification" in text
    for name in subcommands():
        line = re.search(rf"^    {re.escape(name)}(?:\s+(\S.*))?$", text, re.M)
        assert line, name
        described = line[1] or text.split(line[0], 1)[1].splitlines()[1].strip()
        assert len(described) > 10, (name, described)


@pytest.mark.parametrize("name", sorted(subcommands()))
def test_every_subcommand_describes_itself(name: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main([name, "--help"])
    text = capsys.readouterr().out
    usage, _, rest = text.partition("\n\n")
    description = rest.split("\n\n")[0]
    assert usage.startswith(f"usage: xtc-conformance {name}")
    assert not description.startswith(("positional arguments", "options")), text[:400]
    assert len(description.split()) >= 4, text[:400]
    assert not MARKUP.search(text), (name, MARKUP.search(text))


def test_pytest_s_xtc_options_are_plain() -> None:
    """pytest's --help, the adapters' options included (declared in XTC sessions)."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider",
                           "--xtc-target=host"], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    section = done.stdout.split("XTC conformance:")[1].split("\n\n")[0]
    assert "--xtc-target" in section and "--xtc-report" in section
    assert not MARKUP.search(section), MARKUP.search(section)
    for option in re.findall(r"^  (--xtc-[\w-]+)", section, re.M):
        after = section.split(option, 1)[1].split("\n  --", 1)[0]
        assert len(after.split()) >= 3, f"{option}: no help"
