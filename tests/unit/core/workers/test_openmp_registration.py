"""LLVM's OpenMP runtime and the case's confinement (core/workers/confinement.py,
hygiene.forget_registrations): a real ``libomp.so`` (the ``cmeel-libomp`` wheel XTC's
kernels link) registers its process in ``/dev/shm/__KMP_REGISTERED_LIB_<pid>_<uid>``.
A SIGKILLed process leaves that file; a later process given the same pid finds it, sees
it is dead and removes it. Before: the confinement refused that removal and libomp retried
forever: parallel kernels hung at their first call ("timed out: run exceeded its 60 s
limit") whenever a pid came round again, 2 to 3 host cases a catalog run here, dozens
in CI. Now the removal is allowed, and the worker removes the files of what it kills."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_xtc.core.workers import containment, fence
from pytest_xtc.core.xtc import libraries

LIBOMP = next((d / "libomp.so" for d in libraries._omp_dirs() if (d / "libomp.so").is_file()),
              None)
REGISTRATION = "/dev/shm/__KMP_REGISTERED_LIB_{pid}_{uid}"

STALE_THEN_OPENMP = textwrap.dedent("""
    import ctypes, os, sys
    from pathlib import Path
    from pytest_xtc.core.workers import confinement
    stale = Path(sys.argv[2].format(pid=os.getpid(), uid=os.getuid()))
    stale.write_bytes(b"0x10-cafe-libomp.so")  # a dead process's: its flag is not mapped here
    print("confined:", confinement.enter(Path(sys.argv[1])), flush=True)
    omp = ctypes.CDLL(sys.argv[3])
    print("threads:", omp.omp_get_max_threads(), flush=True)  # registers this process
    print("stale left:", stale.exists() and stale.read_bytes() == b"0x10-cafe-libomp.so",
          flush=True)
""")


@pytest.mark.skipif(fence.landlock_abi() < 1 or LIBOMP is None or not Path("/dev/shm").is_dir(),
                    reason="needs Landlock, /dev/shm and the cmeel-libomp wheel")
def test_a_stale_registration_under_a_confined_case_pid_does_not_hang_openmp(
        tmp_path: Path) -> None:
    """The dead process's file under this pid is removed by libomp itself, confined."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", STALE_THEN_OPENMP, str(tmp_path / "work"), REGISTRATION,
             str(LIBOMP)], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired as hung:
        pytest.fail(f"libomp hung on a stale registration, confined: {hung.stdout!r}")
    assert done.returncode == 0, done.stderr
    assert "confined: None" in done.stdout and "threads:" in done.stdout, done.stdout
    assert "stale left: False" in done.stdout, done.stdout


def test_killing_a_worker_child_removes_its_openmp_registration() -> None:
    """kill_tree removes the registration of every process it kills (a SIGKILLed libomp
    cannot); a live process's registration is left alone."""
    child = subprocess.Popen(["sleep", "60"], start_new_session=True)
    other = subprocess.Popen(["sleep", "60"], start_new_session=True)
    files = [Path(REGISTRATION.format(pid=p.pid, uid=os.getuid())) for p in (child, other)]
    try:
        for file in files:
            file.write_bytes(b"0x10-cafe-libomp.so")
        containment.kill_tree(child.pid)
        with pytest.raises(ProcessLookupError):  # killed and reaped
            os.kill(child.pid, 0)
        assert not files[0].exists() and files[1].exists()
    finally:
        other.kill()
        other.wait()
        for file in files:
            file.unlink(missing_ok=True)
