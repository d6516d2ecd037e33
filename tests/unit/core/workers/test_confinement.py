"""A case writes only its own folder (core/workers/confinement.py): a kernel that empties
the temporary folder, the session's by its name or "the" temporary folder, or fills it,
or removes the folder beside its own, reaches nothing of the session's, and every later
case keeps the verdict a clean run gives it.

Before: emptying ``tempfile.gettempdir()`` removed pytest's ``pytest-of-<user>/`` and the
11 later cases of a run FAILED in pytest's set-up (FileNotFoundError); filling it turned
the later cases into errors (ENOSPC at compile). Each fault is applied by a real host
adapter in the first case, through the isolated host as pytest runs it, in a session of
its own whose temporary folder (``TMPDIR``) is a folder of the test's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_xtc.core.workers import confinement, containment, fence, hygiene
from pytest_xtc.core.xtc import libraries

needs_landlock = pytest.mark.skipif(
    fence.landlock_abi() < 1, reason="confinement to a folder needs Landlock (Linux 5.13+)")

FAULTS = {
    "empties-the-temporary-folder": "empty(tempfile.gettempdir())",
    "empties-the-sessions-temporary-folder": "empty(SESSION_TMP)",
    "fills-the-sessions-temporary-folder": "fill(SESSION_TMP)",
    "removes-the-folder-beside-its-own": "empty(os.path.dirname(os.path.abspath(workdir)))",
    "writes-into-the-home": "fill(os.path.expanduser('~'))",
}
FIRST = "matmul-float32-13x11x7-none"
LATER = ("matmul-float32-31x37x29-tile", "relu-float32-6x5-none-special")

ADAPTER = '''
import os, shutil, tempfile
from pytest_xtc.targets.host import HostTarget

SESSION_TMP = os.environ["CONFINED_TEST_TMP"]


def empty(folder):
    """Remove every entry of ``folder``: PermissionError if any removal was refused."""
    refused = []
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        except PermissionError as exc:
            refused.append(exc)
    if refused:
        raise refused[0]


def fill(folder):
    with open(os.path.join(folder, "filler"), "wb") as out:
        for _ in range(16):
            out.write(bytes(1 << 20))


class Target(HostTarget):
    def compile(self, case, workdir):
        if case.id == {first!r}:
            {fault}
        return super().compile(case, workdir)
'''

SESSION = '''
import json, os, sys
from importlib.metadata import EntryPoint
from pathlib import Path

from pytest_xtc.conformance import builtin_cases
from pytest_xtc.core.adapter import TargetSpec
from pytest_xtc.core.adapters import registry
from pytest_xtc.core.execution.remote import IsolatedAdapter
from pytest_xtc.core.execution.runner import Settings, run_case

here, ids = Path(sys.argv[1]), sys.argv[2:]
sys.path.insert(0, str(here))
session_tmp = Path(os.environ["CONFINED_TEST_TMP"])
base = session_tmp / "pytest-of-someone" / "pytest-0"  # as pytest's base temporary folder
base.mkdir(parents=True)
(session_tmp / "marker").write_text("the session's")
adapter = IsolatedAdapter(TargetSpec("faulty", "host"),
                          EntryPoint("faulty", "faulty:Target", registry.GROUP))
cases = {c.id: c for c in builtin_cases()}
verdicts = {}
for n, case_id in enumerate(ids):
    try:
        workdir = base / f"case-{n}"
        workdir.mkdir()  # pytest's mktemp: its base folder must be there
    except OSError as exc:
        verdicts[case_id] = ["session broken", str(exc)]
        continue
    outcome = run_case(adapter, cases[case_id], workdir, Settings(perf=False))
    verdicts[case_id] = [outcome.status.value, outcome.message[:300]]
adapter.stop()
print(json.dumps({"verdicts": verdicts, "marker": (session_tmp / "marker").is_file(),
                  "filled": (session_tmp / "filler").exists(),
                  "home filled": (Path.home() / "filler").exists(),
                  "first folder": (base / "case-0").is_dir()}))
'''


def session(tmp_path: Path, fault: str) -> dict[str, object]:
    source = ADAPTER.replace("{first!r}", repr(FIRST)).replace("{fault}", FAULTS[fault])
    (tmp_path / "faulty.py").write_text(source)
    (tmp_path / "session.py").write_text(SESSION)
    session_tmp, home = tmp_path / "tmp", tmp_path / "home"
    session_tmp.mkdir()
    home.mkdir()
    env = {**os.environ, "TMPDIR": str(session_tmp), "CONFINED_TEST_TMP": str(session_tmp),
           "HOME": str(home)}
    done = subprocess.run([sys.executable, str(tmp_path / "session.py"), str(tmp_path), FIRST,
                           *LATER], capture_output=True, text=True, timeout=300, env=env,
                          start_new_session=True, check=False)
    assert done.returncode == 0, f"{fault}: {done.stderr[-1500:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@needs_landlock
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_kernel_writes_nothing_outside_its_own_folder(tmp_path: Path, fault: str) -> None:
    ran = session(tmp_path, fault)
    verdicts: dict[str, list[str]] = ran["verdicts"]  # type: ignore[assignment]
    status, message = verdicts[FIRST]
    if fault == "empties-the-temporary-folder":  # its own, private one: allowed
        assert status == "passed", message
    else:
        assert status == "error" and "Permission denied" in message, (fault, message)
    for case in LATER:
        assert verdicts[case] == ["passed", ""], (fault, case, verdicts[case])
    assert ran["marker"] and not ran["filled"] and not ran["home filled"], ran
    assert ran["first folder"], ran


CONFINED = textwrap.dedent("""
    import json, os, sys, tempfile
    from pathlib import Path
    from pytest_xtc.core.workers import confinement, fence
    here = Path(sys.argv[1])
    os.setsid()
    fence.install()
    kept = sys.argv[2] == "keep"  # the kept child: beside "deeper", in "higher"
    why = confinement.enter(here / ("higher/deeper/work" if kept else "work"), keep=kept)
    found = {"why": why, "tmp": tempfile.gettempdir(), "TMPDIR": os.environ["TMPDIR"]}
    work = here / ("higher/deeper/work" if kept else "work")
    for name, path in (("own", work / "out"), ("own tmp", Path(tempfile.mkstemp()[1])),
                       ("beside", here / "beside" / "out"), ("above", here / "out"),
                       ("higher", here / "higher" / "out"),
                       ("devnull", Path(os.devnull))):
        try:
            with open(path, "w") as out:
                out.write("x")
            found[name] = "written"
        except PermissionError:
            found[name] = "refused"
    found["read above"] = (here / "readable").read_text()
    found["deeper"] = "written" if kept and (here / "higher/deeper/beside").mkdir() is None \
        else "refused"
    print(json.dumps(found))
""")


@needs_landlock
@pytest.mark.parametrize("keep", ["alone", "keep"])
def test_what_a_confined_case_may_write(tmp_path: Path, keep: str) -> None:
    """Its own folder and private temporary folder, /dev/null; with ``keep`` (a child
    kept for the next case, beside), the folder around; reading anywhere."""
    (tmp_path / "beside").mkdir()
    (tmp_path / "higher" / "deeper").mkdir(parents=True)
    (tmp_path / "readable").write_text("yes")
    done = subprocess.run([sys.executable, "-c", CONFINED, str(tmp_path), keep],
                          capture_output=True, text=True, timeout=60, check=True)
    found = json.loads(done.stdout)
    work = tmp_path / ("higher/deeper/work" if keep == "keep" else "work")
    private = work / confinement.PRIVATE_TMP
    assert found["why"] is None and found["tmp"] == found["TMPDIR"] == str(private)
    assert [found[k] for k in ("own", "own tmp", "devnull")] == ["written"] * 3, found
    assert [found[k] for k in ("beside", "above", "higher")] == ["refused"] * 3, found
    if keep == "keep":  # the folder around its own: where the next case's lies
        assert found["deeper"] == "written", found
    assert found["read above"] == "yes"


def test_the_run_says_once_where_cases_are_not_confined(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the kernel has no Landlock the header says so (here: as if it had none);
    where it has, nothing is said."""
    quiet = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--xtc-target=host",
                                         "--co", "-q", "-k", "relu-float32-5x7-none")
    assert "not confined" not in quiet.stdout.str()
    monkeypatch.setattr(fence, "landlock_abi", lambda: 0)
    confinement.available.cache_clear()
    try:
        result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--xtc-target=host",
                                              "--co", "-k", "relu-float32-5x7-none")
        lines = [x for x in result.stdout.lines if "not confined" in x]
    finally:
        confinement.available.cache_clear()
    assert len(lines) == 1 and "offers no Landlock" in lines[0], result.stdout.str()


# -- LLVM's OpenMP runtime, confined -------------------------------------------------
# A real ``libomp.so`` (the ``cmeel-libomp`` wheel XTC's kernels link) registers its
# process in ``/dev/shm/__KMP_REGISTERED_LIB_<pid>_<uid>``. A SIGKILLed process leaves that
# file; a later process given the same pid finds it, sees it is dead and removes it.
# Before: the confinement refused that removal and libomp retried forever: parallel
# kernels hung at their first call ("timed out: run exceeded its 60 s limit") whenever a
# pid came round again, 2 to 3 host cases a catalog run here, dozens in CI. Now the
# removal is allowed, and the worker removes the files of what it kills.

LIBOMP = next(iter(libraries.openmp_libraries()), None)
REGISTRATION = hygiene.OPENMP_REGISTRATION

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
