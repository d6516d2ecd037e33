"""The documentation's commands work: every shell command of the docs is run.

Each document's ```console blocks (commands after ``$ ``) and ```bash/```sh/```shell blocks
(every line) run in order, in one temporary work directory, in a fresh environment with
pytest-xtc installed (:func:`tests.acceptance.test_examples.layered_venv`), each checked for exit
status 0. Only these are not run as written:

- the set-up command that creates ``.venv`` (README): it must be .ci/run's, verbatim;
- ``tox -e ENV``: it must name environments of tox.ini (tox would build them);
- ``pip install pytest-xtc`` (README's quick start): the fresh environment has it already;
- full-suite commands, which take minutes: a pytest run naming targets without ``-k``
  gets ``-k NARROW_K`` (.ci/run's test command included, which must be the README's);
  ``xtc-conformance run`` gets a finer ``--shard`` (``I/N`` becomes ``I/(N*SHARDS)``);
  ``xtc-conformance selftest`` (two minutes of faulty targets) runs with ``--help``.
  With ``XTC_DOCS_FULL=1`` in the environment, these run as written.

README and user-guide commands run in a copy of the checkout holding ``examples/`` only, so that a
pytest run there collects the suite and not these tests. ```python, ```toml and ```yaml
blocks must parse. Integration tests: about 60 s.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from pytest_xtc import cli
from pytest_xtc.core import adapter
from pytest_xtc.core.cases import expectations
from pytest_xtc.report.rules import verdicts as verdict
from tests import ROOT
from tests.acceptance.test_examples import (
    clean_env,
    layered_venv,
    pip_offline_env,
    skip_if_no_build_requirements,
)

GUIDE = "docs/vendor-guide.md"
#: Each document, and where its commands run: "in" the checkout's root, or "beside" it
#: (in the directory that holds ``pytest-xtc/``).
DOCS = {GUIDE: "beside", "examples/xtc-example-adapter/README.md": "beside", "README.md": "in",
        "docs/user-guide.md": "in"}
#: Every document whose code blocks must parse.
PARSED = sorted({*DOCS, *(str(p.relative_to(ROOT)) for p in ROOT.glob("docs/*.md")),
                 "benchmarks/README.md"})
SHELLS = frozenset({"console", "bash", "sh", "shell"})
NARROW_K = "matmul-float32-13x11x7-tile"
SHARDS = 16
FULL = os.environ.get("XTC_DOCS_FULL") == "1"
PROJECT = "pytest-xtc"


@dataclass(frozen=True)
class Block:
    lang: str
    line: int  # of the opening fence, 1-based
    lines: tuple[str, ...]


@dataclass(frozen=True)
class Command:
    line: int
    text: str


def blocks(markdown: str) -> list[Block]:
    """The fenced blocks of a Markdown text."""
    found: list[Block] = []
    current: list[str] | None = None
    lang, start = "", 0
    for number, line in enumerate(markdown.splitlines(), 1):
        fence = re.match(r"^\s*```+\s*([\w+-]*)", line)
        if current is None and fence:
            current, lang, start = [], fence[1].lower(), number
        elif current is not None and fence and not fence[1]:
            found.append(Block(lang, start, tuple(current)))
            current = None
        elif current is not None:
            current.append(line)
    return found


def commands(block: Block) -> list[Command]:
    """The commands of a shell block; ``\\`` continues a command on the next line."""
    found: list[Command] = []
    pending: list[str] = []
    start = 0
    for offset, raw in enumerate(block.lines, 1):
        line = raw.strip()
        if pending:
            line = line.removeprefix(">").strip()
        elif block.lang == "console":
            if not line.startswith("$ "):
                continue  # output
            line = line[2:]
        elif not line or line.startswith("#"):
            continue
        if not pending:
            start = block.line + offset
        if line.endswith("\\"):
            pending.append(line[:-1].rstrip())
            continue
        found.append(Command(start, " ".join([*pending, line]).strip()))
        pending = []
    return found


def doc_commands(path: Path) -> list[Command]:
    return [c for b in blocks(path.read_text()) if b.lang in SHELLS for c in commands(b)]


def ci_commands() -> tuple[list[str], list[str]]:
    """.ci/run's set-up commands (those creating .venv) and its other commands."""
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    run = [line for line in lines
           if line and not line.startswith(("#", "set ", "cd ", "bash .ci/", "export "))
           and line != "#!/usr/bin/env bash"]
    setup = [line for line in run if " -m venv " in f" {line} "]
    return setup, [line for line in run if line not in setup]


def tox_envs() -> set[str]:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(ROOT / "tox.ini")
    from tests.acceptance.test_ci_config import env_list, generated

    listed = env_list(parser.get("tox", "env_list", fallback=""))
    return {n for s in parser.sections() if s.startswith("testenv:")
            for n in generated(s.split(":", 1)[1])} | set(listed)


def narrow_run(argv: list[str]) -> str:
    """``xtc-conformance run ...`` on a finer shard of the same run."""
    argv = list(argv)

    def finer(value: str) -> str:
        index, _, count = value.partition("/")
        return f"{index}/{int(count) * SHARDS}"

    for i, arg in enumerate(argv):
        if arg == "--shard":
            argv[i + 1] = finer(argv[i + 1])
            return shlex.join(argv)
        if arg.startswith("--shard="):
            argv[i] = "--shard=" + finer(arg.partition("=")[2])
            return shlex.join(argv)
    return shlex.join([*argv, "--shard", f"1/{SHARDS}"])


def words(text: str) -> list[str]:
    """The words of a simple command (no pipe, list or substitution), comments dropped;
    empty for anything else."""
    if re.search(r"[|;&`]|\$\(", text.split(" #", 1)[0]):
        return []
    try:
        return shlex.split(text, comments=True)
    except ValueError:
        return []


def full_pytest_run(argv: list[str]) -> bool:
    """A pytest run of whole targets: targets named, nothing narrowing or listing."""
    if not argv or Path(argv[0]).name != "pytest":
        return False
    quick = ("-k", "--collect-only", "--co", "--xtc-list-targets", "--help", "-h")
    return any(a.startswith("--xtc-target") for a in argv) and not any(
        a in quick or a.startswith("-k") for a in argv
    )


def user_setup() -> list[str]:
    """The README's user set-up lines (between its ``user-setup`` marks)."""
    from tests.acceptance.test_user_setup import readme_lines

    return readme_lines()[0]


def plan(text: str) -> str | None:
    """The command line to run for a documented command, or None when it is checked
    without being run (asserting what makes it safe to leave out)."""
    setup, _ = ci_commands()
    if text in user_setup():
        return None  # the user set-up: tests/acceptance/test_user_setup.py runs it
    if " -m venv " in f" {text} ":
        assert text in setup, f"set-up command {text!r} differs from .ci/run's {setup}"
        return None
    argv = words(text)
    if argv[:2] == ["pip", "install"] and PROJECT in argv[2:]:
        # the user's install from the package index: here, the checkout is installed
        return None
    if argv[:1] == ["tox"]:
        wanted = argv[argv.index("-e") + 1].split(",") if "-e" in argv else []
        unknown = set(wanted) - tox_envs()
        assert wanted and not unknown, f"{text!r}: not tox environments of tox.ini: {unknown}"
        return None
    if FULL:
        return text
    if full_pytest_run(argv):
        return shlex.join([*argv, "-k", NARROW_K])
    if argv[:2] == ["xtc-conformance", "run"] and "--help" not in argv:
        return narrow_run(argv)
    if argv[:2] == ["xtc-conformance", "selftest"]:
        return shlex.join([*argv, "--help"])  # minutes of faulty targets: see XTC_DOCS_FULL
    return text


def run_document(doc: str, tmp_path: Path) -> tuple[Path, list[str]]:
    """Run every command of ``doc``; the directory they ran in and a log of them."""
    bin_dir = layered_venv(tmp_path / "venv")
    beside = tmp_path / "work"
    checkout = beside / "pytest-xtc"
    shutil.copytree(ROOT / "examples", checkout / "examples",
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    cwd = checkout if DOCS[doc] == "in" else beside
    env = clean_env(bin_dir, {**pip_offline_env(), "VIRTUAL_ENV": str(bin_dir.parent)})
    log = []
    for command in doc_commands(ROOT / doc):
        planned = plan(command.text)
        if planned is None:
            log.append(f"checked, not run: {command.text}")
            continue
        planned = re.sub(r"(?<![\w./-])\.venv/bin/", f"{bin_dir}/", planned)
        start = time.monotonic()
        done = subprocess.run(["bash", "-c", f"set -eo pipefail\n{planned}"], cwd=cwd,
                              env=env, capture_output=True, text=True, timeout=600,
                              check=False)
        skip_if_no_build_requirements(done)
        assert done.returncode == 0, (
            f"{doc}:{command.line}: `{command.text}` exited {done.returncode}"
            + (f"\nran as: {planned}" if planned != command.text else "")
            + f"\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
        )
        log.append(f"ran ({time.monotonic() - start:.1f} s): {planned}")
    return cwd, log


@pytest.mark.integration
@pytest.mark.timeout(900)
@pytest.mark.parametrize("doc", list(DOCS))
def test_every_shell_command_of_the_docs_runs(doc: str, tmp_path: Path) -> None:
    if not (ROOT / doc).is_file():
        pytest.skip(f"{doc} does not exist")
    cwd, log = run_document(doc, tmp_path)
    assert log, f"{doc} has no shell command"
    if doc != GUIDE:
        return
    # The guide's walk-through left its bundles; the report fields it lists are real.
    text = (ROOT / doc).read_text()
    report = json.loads((cwd / "example-host-o1-report" / "report.json").read_text())
    entry = report["targets"]["example-host-o1"]
    keys = {*report, *report["runs"][0], *entry, *entry["results"][0]}
    assert not {k for k in keys if f"`{k}`" not in text}, "report.json fields not in the guide"
    merged = json.loads((cwd / "example-host-o1-merged" / "report.json").read_text())
    assert len(merged["runs"]) == 2 and merged["targets"]["example-host-o1"]["results"]


def test_shell_blocks_hold_commands() -> None:
    found = {doc: [c.text for c in doc_commands(ROOT / doc)] for doc in DOCS
             if (ROOT / doc).is_file()}
    guide = " ".join(found[GUIDE])
    for needed in ("pip install", "xtc-conformance list", "xtc-conformance run",
                   "xtc-conformance verify", "xtc-conformance merge", "--shard",
                   "pytest --xtc-target=example-host-o1", "--xtc-report="):
        assert needed in guide, needed
    assert all(found.values())


def test_block_parsing() -> None:
    text = ("intro\n```console\n$ echo a \\\n>   b\nout\n$ true\n```\n"
            "```bash\n# comment\nls -l \\\n  /\n\nexit 0\n```\n```python\nx = 1\n```\n")
    found = blocks(text)
    assert [b.lang for b in found] == ["console", "bash", "python"]
    assert [(c.line, c.text) for c in commands(found[0])] == [(3, "echo a b"), (6, "true")]
    assert [c.text for c in commands(found[1])] == ["ls -l /", "exit 0"]


@pytest.mark.skipif(FULL, reason="XTC_DOCS_FULL=1 runs every command as written")
def test_narrowing_of_full_suite_commands() -> None:
    run = "xtc-conformance run --target t --report r"
    assert plan(run) == f"{run} --shard 1/{SHARDS}"
    assert plan(f"{run} --shard 2/3 -n 2  # comment") == f"{run} --shard 2/{3 * SHARDS} -n 2"
    assert plan(f"{run} --shard=1/2") == f"{run} --shard=1/{2 * SHARDS}"
    assert plan("pytest --xtc-target=nvgpu[1]   # a GPU") == \
        f"pytest '--xtc-target=nvgpu[1]' -k {NARROW_K}"
    assert plan(".venv/bin/pytest -n 2 --xtc-target=host") == \
        f".venv/bin/pytest -n 2 --xtc-target=host -k {NARROW_K}"
    for unchanged in ("pytest --xtc-target=host -k relu", "pytest --xtc-list-targets",
                      "xtc-conformance verify r"):
        assert plan(unchanged) == unchanged
    assert plan("tox -e host") is None


@pytest.mark.parametrize("doc", PARSED)
def test_code_blocks_parse(doc: str) -> None:
    if not (ROOT / doc).is_file():
        pytest.skip(f"{doc} does not exist")
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    for block in blocks((ROOT / doc).read_text()):
        source = "\n".join(block.lines) + "\n"
        where = f"{doc}:{block.line}"
        if block.lang == "python":
            compile(source, where, "exec")
        elif block.lang == "toml":
            tomllib.loads(source)
        elif block.lang in ("yaml", "yml"):
            yaml.safe_load(source)


def test_guide_covers_the_interface_and_the_cli() -> None:
    text = (ROOT / GUIDE).read_text()
    methods = [n for n, v in vars(adapter.TargetAdapter).items()
               if not n.startswith("_") and (callable(v) or n == "options") and n != "status"]
    names = [
        *methods, "status()", "TargetSpec", "Artifact", "RunResult", "OptionSpec",
        *(f.name for f in adapter.Probe.__dataclass_fields__.values()),
        *(f.name for f in adapter.Capabilities.__dataclass_fields__.values()),
        *(f.name for f in adapter.OptionSpec.__dataclass_fields__.values()),
        *(t.value for t in adapter.Tier), *verdict.PROFILES, *verdict.STATUSES,
        verdict.CONFORMANT, verdict.NOT_CONFORMANT, verdict.NOT_APPLICABLE,
        "results.jsonl", "report.json", "summary.md", "MANIFEST.sha256", "waivers.yaml",
        "--xtc-strict", "--xtc-ignore-expectations", "--xtc-list-targets", "--xtc-shard",
        "pytest_xtc.targets", ".expectations.yaml", "InfrastructureError", "--xtc-no-isolation",
        *expectations.PHASES,
    ]
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for command, subparser in sub.choices.items():  # type: ignore[union-attr]
        names.append(f"xtc-conformance {command}")
        names += [s for a in subparser._actions for s in a.option_strings if s.startswith("--")
                  and s != "--help"]
    missing = sorted({n for n in names if n not in text})
    assert not missing, f"{GUIDE} does not mention {missing}"


def test_readme_set_up_and_test_commands_are_those_of_ci() -> None:
    readme = ROOT / "README.md"
    if not readme.is_file():
        pytest.skip("README.md does not exist")
    texts = [c.text for c in doc_commands(readme)]
    setup, tests = ci_commands()
    assert [c for c in setup + tests if c not in texts] == [], ".ci/run runs commands " \
        "the README does not show"


def test_readme_starts_with_the_users_quick_start() -> None:
    """A new user's first commands come first; the developers' two come after, named."""
    text = (ROOT / "README.md").read_text()
    from tests.acceptance.test_user_setup import readme_lines

    setup_lines, start = readme_lines()
    first = [c.text for c in doc_commands(ROOT / "README.md")][:len(setup_lines) + 1]
    assert first == [*setup_lines, "pytest --xtc-target=host"] == [*setup_lines, *start], first
    setup, tests = ci_commands()
    developers = text.index("# For developers of pytest-xtc")
    assert text.index("pytest --xtc-target=host") < developers < text.index(setup[0])
    assert text.index(tests[0]) > developers


def _pyproject() -> dict:  # type: ignore[type-arg]
    tomllib = pytest.importorskip("tomllib")
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_optional_tools_are_extras_and_dev_has_what_the_tests_use() -> None:
    project = _pyproject()["project"]
    names = {re.split(r"[<>=!~;\[ ]", d)[0].lower() for d in project["dependencies"]}
    assert not names & {"pytest-benchmark", "pytest-timeout", "matplotlib"}, names
    extras = {k: {re.split(r"[<>=!~;\[ ]", d)[0].lower() for d in v}
              for k, v in project["optional-dependencies"].items()}
    assert extras["benchmark"] == {"pytest-benchmark"}
    assert extras["timeout"] == {"pytest-timeout"}
    assert extras["report"] == {"matplotlib"}
    assert {"pytest-benchmark", "pytest-timeout", "matplotlib", "build", "tox"} <= extras["dev"]
    assert any(d.startswith("xtc-tools>=0.3.1,<0.4") for d in project["dependencies"])
    assert project["license"] == "BSD-3-Clause" and project["license-files"] == ["LICENSE"]
    assert not [c for c in project["classifiers"] if c.startswith("License ::")]  # PEP 639
    assert {"Homepage", "Source", "Issues"} <= set(project["urls"])
    assert "BSD 3-Clause" in (ROOT / "LICENSE").read_text()
    assert "the pytest-xtc authors" in (ROOT / "LICENSE").read_text()
    assert (ROOT / "pytest_xtc" / "py.typed").is_file()


@pytest.mark.timeout(300)
def test_sdist_can_run_its_own_tests_and_the_wheel_is_typed(tmp_path: Path) -> None:
    """The sdist holds the tests, their configuration, the documents whose commands they
    run, the example, the benchmarks and .ci; sdist and wheel hold LICENSE and py.typed."""
    import tarfile
    import zipfile

    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".tox", "build", "dist", "*.egg-info", "__pycache__", ".*_cache"))
    out = tmp_path / "dist"
    out.mkdir()
    built = {}
    for kind in ("sdist", "wheel"):  # one process each: setuptools keeps state
        script = ("import sys; from setuptools import build_meta as b; "
                  f"print('BUILT', b.build_{kind}(sys.argv[1]))")
        done = subprocess.run([sys.executable, "-c", script, str(out)], cwd=source,
                              capture_output=True, text=True, timeout=300, check=False)
        if done.returncode and "No module named 'wheel'" in done.stderr:
            pytest.skip("this setuptools needs the wheel package to build a wheel")
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        built[kind] = next(line for line in done.stdout.splitlines()
                           if line.startswith("BUILT ")).split()[1]
    sdist, wheel = built["sdist"], built["wheel"]
    with tarfile.open(out / sdist) as tar:
        members = {m.split("/", 1)[1] for m in tar.getnames() if "/" in m}
    for needed in ("tests/conftest.py", "tests/acceptance/test_plugin.py", "tox.ini", "LICENSE",
                   "docs/vendor-guide.md", "examples/xtc-example-adapter/pyproject.toml",
                   "benchmarks/footprint.py", ".ci/run", "pytest_xtc/py.typed",
                   "pytest_xtc/conformance/catalog.yaml", "README.md"):
        assert needed in members, needed
    assert not [m for m in members if "__pycache__" in m]
    with zipfile.ZipFile(out / wheel) as whl:
        names = whl.namelist()
    assert "pytest_xtc/py.typed" in names
    assert any(n.endswith(".dist-info/LICENSE") or "/licenses/LICENSE" in n for n in names)
