"""``--xtc-run-on``: compile here, run each case through an execnet gateway (``popen``, and
``socket=127.0.0.1`` to a socketserver started here), judge here. The far end runs the
same device runner as a carried pack, in a Python whose import path holds numpy (and, for
the socket server, execnet) only. Real XTC, real kernels, no fakes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import execnet
import pytest

from tests.acceptance.test_pack import numpy_only_path, pytest_run, statuses

SOCKETSERVER = Path(execnet.__file__).resolve().parent / "script" / "socketserver.py"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("remote")
    (root / "session").mkdir()
    return root


@pytest.fixture(scope="module")
def local(root: Path) -> dict[str, str]:
    found = statuses(pytest_run(root / "session").stdout)
    assert len(found) >= 5 and set(found.values()) == {"PASSED"}
    return found


def popen_spec(root: Path, path: Path | None) -> str:
    """A popen gateway whose Python runs without site-packages (-S -s), with ``path``
    (numpy alone) as its import path."""
    python = Path(sys.executable).resolve()
    spec = f"popen//python={python} -S -s"
    return spec + (f"//env:PYTHONPATH={path}" if path else "")


def test_popen_gateway_gives_the_local_statuses(root: Path, local: dict[str, str]) -> None:
    spec = popen_spec(root, numpy_only_path(root))
    done = pytest_run(root / "session", f"--xtc-run-on={spec}")
    assert statuses(done.stdout) == local, done.stdout[-3000:]


def test_a_far_end_without_numpy_fails_no_case_as_passed(root: Path, local) -> None:
    """The cases really run at the far end: one that cannot run the runner (no numpy on its
    path) gives infrastructure errors, not passes."""
    done = pytest_run(root / "session", f"--xtc-run-on={popen_spec(root, None)}")
    found = statuses(done.stdout)
    assert set(found) == set(local) and set(found.values()) == {"FAILED"}
    assert "[infrastructure error, run] remote run failed" in done.stdout
    assert "No module named 'numpy'" in done.stdout


@pytest.fixture
def socketserver(root: Path) -> Iterator[int]:
    """execnet's socketserver on loopback, in a Python with numpy and execnet alone on its
    path; stopped (its process group killed) at the end."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = numpy_only_path(root)
    link = path.parent / "execnet-only"
    link.mkdir(exist_ok=True)
    if not (link / "execnet").exists():
        (link / "execnet").symlink_to(SOCKETSERVER.parent.parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = os.pathsep.join([str(path), str(link)])
    server = subprocess.Popen([sys.executable, "-S", "-s", str(SOCKETSERVER),
                               f"127.0.0.1:{port}"], env=env, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, "no server"
                time.sleep(0.2)
        yield port
    finally:
        os.killpg(server.pid, 9)
        server.wait(timeout=30)


def test_socket_gateway_gives_the_local_statuses(root: Path, local, socketserver: int) -> None:
    done = pytest_run(root / "session", f"--xtc-run-on=socket=127.0.0.1:{socketserver}")
    assert statuses(done.stdout) == local, done.stdout[-3000:]


def test_a_spec_execnet_cannot_open_is_a_usage_error(root: Path) -> None:
    done = pytest_run(root / "session", "--xtc-run-on=nothing=here")
    assert done.returncode == 4 and "not an execnet gateway spec" in done.stderr


def test_split_options_are_exclusive(root: Path, tmp_path: Path) -> None:
    done = pytest_run(root / "session", f"--xtc-pack={tmp_path / 'p'}",
                      "--xtc-run-on=popen")
    assert done.returncode == 4 and "choose one" in done.stderr
