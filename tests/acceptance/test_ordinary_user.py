"""The suite run as an ordinary user with no writable home (a CI container's user,
``HOME=/nonexistent``): results as for root. Before, ``host`` was *skipped* with "adapter
failed: probe sent a reply that is not one: refers to builtins.getattr", exit 0: that
user's Python (3.11.2 here) pickles an enum member by name, ``getattr(Tier, 'EXECUTE')``,
which the reply reader refused; a probe that failed was a skip, so the run looked green.
Now a probe that fails is an error of the run (test_hardening, ``probe``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import ROOT

SITE = sysconfig.get_paths()["purelib"]  # this Python's packages (XTC's among them)

SELECT = "relu-float32-5x7-none"


def as_ordinary_user(work: Path) -> tuple[list[str], str]:
    """The command prefix running as an ordinary user (this one, or ``nobody`` for root)
    and a Python it can run: this one, else the system's of the same version given this
    one's packages (a venv under /root); skipped where there is none."""
    if os.geteuid() != 0:
        return [], sys.executable
    runuser = shutil.which("runuser")
    if runuser is None:
        pytest.skip("runs as root and has no runuser to become an ordinary user")
    prefix = [runuser, "-u", "nobody", "--"]
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for python in (sys.executable, f"/usr/bin/{version}"):
        done = subprocess.run([*prefix, "env", f"PYTHONPATH={ROOT}:{SITE}", python, "-c",
                               "import pytest_xtc, xtc"], cwd=work, capture_output=True,
                              text=True, timeout=120, check=False)
        if done.returncode == 0:
            return prefix, python
    pytest.skip(f"nobody cannot run a Python with this one's packages here: "
                f"{done.stderr.strip()[-200:]}")


@pytest.fixture
def work() -> Iterator[Path]:
    """A folder the ordinary user may use (pytest's own lie in root's 0700 folder)."""
    folder = Path(tempfile.mkdtemp(prefix="xtc-ordinary-user-"))
    folder.chmod(0o777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_an_ordinary_user_with_no_writable_home_gets_the_results_root_gets(work: Path) -> None:
    prefix, python = as_ordinary_user(work)
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    env.update(HOME="/nonexistent", TMPDIR=str(work), PYTHONPATH=f"{ROOT}:{SITE}",
               PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}")
    done = subprocess.run(
        [*prefix, "env", *(f"{k}={v}" for k, v in env.items()), python, "-m", "pytest",
         "-p", "no:cacheprovider", "--rootdir", str(work), "--xtc-target=host", "-k", SELECT,
         "-rs", str(ROOT / "pytest_xtc" / "conformance" / "test_conformance.py")],
        cwd=work, capture_output=True, text=True, timeout=300, check=False, env=env)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    last = out.strip().splitlines()[-1]
    assert "2 passed" in last and "skipped" not in last, out[-3000:]
    # no state folder can be made in a home that does not exist: the caches are off, said once
    assert out.count("pytest-xtc: caches off") == 1, out[:3000]
    assert "/nonexistent" in next(x for x in out.splitlines() if "caches off" in x)
