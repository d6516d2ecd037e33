"""The README's user set-up and quick start work on a fresh machine, as written.

The lines between ``<!-- user-setup -->`` and ``<!-- /user-setup -->`` (then those of
``<!-- quick-start -->``) are extracted and run, unedited, by bash in an empty directory,
with this machine's python3 and no virtual environment active: a fresh venv, pytest-xtc
installed from its repository, then the quick start, which must end green (exit 0), then
the README's faulty target (``selftest-<variant>``), which must end red, explained.

The README installs from a clone of the repository (there is no public one yet, and the
package is not on the index): the test clones this checkout's committed HEAD into the
empty directory as ``pytest-xtc`` first (uncommitted edits are not installed). Skipped,
saying why, outside a git checkout (an sdist) or without git.
Integration test: a venv and its wheels (270 MB, from pip's cache once warm), then the
host suite in one process: 20 minutes measured on a 2-core machine shared by 8 sessions
(1198 s); 301 s on a quieter one.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import ROOT
from tests.support import readme

README = ROOT / "README.md"
#: The folder the README's install line names: a clone of this repository.
CLONE = "pytest-xtc"


def marked_block(text: str, mark: str) -> list[str]:
    """The shell lines of the fenced block between ``<!-- mark -->`` and
    ``<!-- /mark -->`` (exactly one such block), comments and blank lines dropped."""
    found = re.findall(rf"<!-- {mark} -->\n(.*?)<!-- /{mark} -->", text, re.S)
    assert len(found) == 1, f"README.md: {len(found)} blocks marked {mark}, expected one"
    fence = re.fullmatch(r"\s*```(?:bash|sh|shell)\n(.*?)```\s*", found[0], re.S)
    assert fence, f"README.md: the {mark} block is not one ```bash fence"
    return [line for line in fence[1].splitlines() if line.strip() and not
            line.lstrip().startswith("#")]


def readme_lines() -> tuple[list[str], list[str]]:
    text = README.read_text()
    return marked_block(text, "user-setup"), marked_block(text, "quick-start")


def test_readme_marks_the_user_set_up_and_quick_start() -> None:
    setup, start = readme_lines()
    assert any("python3 -m venv" in line for line in setup), setup
    assert any(line.split()[:2] == ["pip", "install"] for line in setup), setup
    assert start == ["pytest --xtc-target=host"], start
    assert "pip install pytest-xtc\n" not in README.read_text(), "not on the index yet"
    assert "github.com/xtc-tools/pytest-xtc" not in README.read_text(), "no such repository"
    assert any(f"../{CLONE}" in line for line in setup), setup


def test_marked_block_is_refused_when_missing_or_doubled() -> None:
    with pytest.raises(AssertionError, match="0 blocks"):
        marked_block("no marks", "user-setup")
    one = "<!-- m -->\n```bash\necho a\n# note\n```\n<!-- /m -->\n"
    assert marked_block(one, "m") == ["echo a"]
    with pytest.raises(AssertionError, match="2 blocks"):
        marked_block(one + one, "m")


def _git_env() -> dict[str, str]:
    """This environment without venv, pytest or XTC settings."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")
           and not k.startswith(("PYTEST_", "XTC_", "PIP_"))}
    ours = {str(Path(sys.prefix) / "bin"), os.environ.get("VIRTUAL_ENV", "") + "/bin"}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and p not in ours)
    env.update({"CI": env.get("CI", "true")})
    return env


@pytest.mark.integration
@pytest.mark.timeout(1800)
def test_readme_user_set_up_and_quick_start_run_green(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed: the README installs from a clone")
    inside = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--show-toplevel"],
                            capture_output=True, text=True, check=False)
    if inside.returncode or Path(inside.stdout.strip()).resolve() != ROOT:
        pytest.skip("not a git checkout (an sdist?): the README installs from a clone, "
                    "which this test makes of the checkout")
    setup, start = readme_lines()
    # then the README's faulty target, in the same venv: its output and exit status
    faulty, status = tmp_path / "faulty.out", tmp_path / "faulty.rc"
    script = ("set -euo pipefail\n" + "\n".join([*setup, *start]) + "\n"
              f"set +e\n{readme.faulty_target_line()} > {faulty} 2>&1\n"
              f"echo $? > {status}\n")
    work = tmp_path / "user"
    work.mkdir()
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(work / CLONE)], check=True,
                   env=_git_env(), timeout=300)
    done = subprocess.run(["bash", "-c", script], cwd=work, env=_git_env(),
                          capture_output=True, text=True, timeout=1700, check=False)
    tail = f"\n--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-3000:]}"
    assert done.returncode == 0, f"the README's lines exited {done.returncode}:\n{script}{tail}"
    assert re.search(r"=+ XTC conformance =+", done.stdout), tail
    assert re.search(r"\d+ passed", done.stdout), tail
    assert not re.search(r"\d+ (failed|errors?)\b", done.stdout), tail
    readme.assert_failure_explained(int(status.read_text()), faulty.read_text())


def test_python_versions_are_those_ci_tests() -> None:
    """Classifiers, requires-python and the README's quick start name the Python versions
    CI runs (tests/test_ci_config.py's PYTHONS), no others; PEP 639 license metadata."""
    tomllib = pytest.importorskip("tomllib")
    from tests.acceptance.test_ci_config import PYTHONS

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    listed = {c.rsplit(" :: ", 1)[1] for c in project["classifiers"]
              if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)}
    assert listed == PYTHONS
    assert project["requires-python"] == f">={min(PYTHONS, key=lambda v: int(v[2:]))}"
    quick = README.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "Python " + " or ".join(sorted(PYTHONS, key=lambda v: int(v[2:]))) in quick
    assert project["license"] == "BSD-3-Clause" and "License ::" not in str(project)
    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    assert build == ["setuptools>=77"], "PEP 639's license = SPDX needs setuptools 77"


def test_suite_in_a_venv_below_the_rootdir_is_collected_once(tmp_path: Path) -> None:
    """The README's layout: the venv in the directory pytest runs in. pytest ignores
    virtual environments there; the suite in it is still collected, once (not again
    through the venv's lib64 link), with its package node id, and nothing else of the venv
    is. Here the venv holds a copy of pytest_xtc; its dependencies come from this one."""
    import site
    import sysconfig

    venv = tmp_path / "xtc-env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    own = Path(sysconfig.get_paths(vars={"base": str(venv), "platbase": str(venv)})["purelib"])
    shutil.copytree(ROOT / "pytest_xtc", own / "pytest_xtc",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (own / "stray_test_module").mkdir()
    (own / "stray_test_module" / "test_stray.py").write_text("def test_stray(): pass\n")
    (own / "base.pth").write_text("".join(f"import site; site.addsitedir({p!r})\n"
                                          for p in site.getsitepackages()))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "XTC_"))
           and k != "PYTHONPATH"}
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pytest", "-p",
                           "no:cacheprovider", "--xtc-target=host", "--co", "-q", "-k",
                           "relu-float32-5x7-none"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    assert ids == ["pytest_xtc/conformance/test_conformance.py::test_conformance"
                   "[host-relu-float32-5x7-none]",
                   "pytest_xtc/conformance/test_conformance.py::test_conformance"
                   "[host-relu-float32-5x7-none-exact]"], done.stdout[-2000:]
    assert "2/" in done.stdout and "stray" not in done.stdout
    # its rerun lines name the suite by that id too, not by its path in the venv
    ran = subprocess.run([str(venv / "bin" / "python"), "-m", "pytest", "-p",
                          "no:cacheprovider", "--xtc-target=host", "-k",
                          "relu-float32-5x7-none", "--xtc-repeat=0", "--junitxml=j.xml"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                         check=False)
    reruns = re.findall(r'name="xtc_rerun" value="([^"]*)"', (tmp_path / "j.xml").read_text())
    assert reruns and all(r.startswith("pytest 'pytest_xtc/conformance/test_conformance.py::")
                          for r in reruns), (reruns, ran.stdout[-2000:])
