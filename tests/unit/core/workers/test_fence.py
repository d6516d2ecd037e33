"""A kernel cannot reach the session that runs it (core/workers/fence.py): its signal to
pytest (SIGKILL, SIGSTOP), to pytest's process group or to every process (``kill(-1)``),
through a pidfd made from ``/proc/<pid>``, its ``prlimit`` of pytest, are refused; nor can
it write into pytest's memory or open its descriptors through ``/proc/<pid>``, nor signal
or lower the limits of a *neighbour*: a process that is neither its ancestor nor its
ancestors' child (as the case another xdist worker runs at the same time). The case that
tried is judged as usual (here its compile raised), and every later case keeps the verdict
a clean run gives it.

Each fault is applied by a real host adapter in the first case of a session: a Python
process of its own (its own session and group, so that a fault that got through would end
it alone), run through the isolated host as pytest runs it, and through a worker forked
from the session itself (an adapter built in process). Before the fence, the session died
(SIGKILL), hung (SIGSTOP) or lost its file limit; before its Landlock layer, a pidfd
stopped it, its memory and descriptors could be opened, and the neighbour was killed or
had its file limit lowered."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_xtc.core.workers import fence


def _refused_here() -> str | None:
    """Why this machine takes no fence or only part of it (None: all of it), asked of a
    process of its own."""
    if not sys.platform.startswith("linux") or platform.machine() not in fence._ARCHES:
        return "the fence is Linux on x86-64 and AArch64"
    done = subprocess.run(
        [sys.executable, "-c", "from pytest_xtc.core.workers import fence; "
                               "print(fence.install() or '')"],
        capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip() or None


@pytest.fixture(scope="module")
def refused_here() -> str | None:
    """Asked once, when a test of this module first runs (not at collection)."""
    return _refused_here()


@pytest.fixture(autouse=True)
def _a_fence_here(refused_here: str | None) -> None:
    if refused_here is not None and refused_here.startswith("no fence"):
        pytest.skip(refused_here)

FAULTS = {
    "kills-the-session": "os.kill(SESSION, signal.SIGKILL)",
    "stops-the-session": "os.kill(SESSION, signal.SIGSTOP)",
    "kills-the-sessions-group": "os.killpg(os.getpgid(SESSION), signal.SIGKILL)",
    # SIGCONT: harmless should the fence fail (SIGKILL to -1 would end every process)
    "signals-every-process": "os.kill(-1, signal.SIGCONT)",
    "lowers-the-sessions-file-limit": "resource.prlimit(SESSION, resource.RLIMIT_NOFILE, "
                                      "(16, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))",
    "stops-the-session-through-a-pidfd": "signal.pidfd_send_signal(os.open("
                                         "f'/proc/{SESSION}', os.O_RDONLY | os.O_DIRECTORY), "
                                         "signal.SIGSTOP)",
    "lowers-a-neighbours-file-limit": "resource.prlimit(NEIGHBOUR, resource.RLIMIT_NOFILE, "
                                      "(16, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))",
    # the Landlock layer's (the seccomp filter cannot name a path, nor every process)
    "writes-into-the-sessions-memory": "open(f'/proc/{SESSION}/mem', 'r+b')",
    "opens-the-sessions-output": "os.open(f'/proc/{SESSION}/fd/1', os.O_WRONLY)",
    "kills-a-neighbour": "os.kill(NEIGHBOUR, signal.SIGKILL)",
    # renices, idles, pins the session, lowers its I/O priority, renices the user's all
    "reschedules-the-session": "reschedule(SESSION)",
}
LANDLOCK_ONLY = {"writes-into-the-sessions-memory", "opens-the-sessions-output",
                 "kills-a-neighbour"}
FIRST = "matmul-float32-13x11x7-none"
LATER = ("matmul-float32-31x37x29-tile", "relu-float32-6x5-none-special")

ADAPTER = '''
import os, resource, signal
from pytest_xtc.targets.host import HostTarget

SESSION = int(os.environ["FENCE_TEST_SESSION"])
NEIGHBOUR = int(os.environ["FENCE_TEST_NEIGHBOUR"])


def reschedule(pid):
    """Every scheduling call on ``pid``: PermissionError when each was refused."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    number = {"x86_64": 251, "aarch64": 30}[os.uname().machine]

    def ioprio_set(which, who):
        if libc.syscall(number, which, who, (3 << 13) | 7) != 0:  # IOPRIO_CLASS_IDLE
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))

    calls = {
        "setpriority": lambda: os.setpriority(os.PRIO_PROCESS, pid, 19),
        "sched_setscheduler": lambda: os.sched_setscheduler(pid, os.SCHED_IDLE,
                                                            os.sched_param(0)),
        "sched_setparam": lambda: os.sched_setparam(pid, os.sched_param(0)),
        "sched_setaffinity": lambda: os.sched_setaffinity(pid, {min(os.sched_getaffinity(0))}),
        "ioprio_set": lambda: ioprio_set(1, pid),
        # a user with no process: the kernel's answer (ESRCH) harms no one
        "setpriority of a user": lambda: os.setpriority(os.PRIO_USER, 65533, 19),
        "ioprio_set of a user": lambda: ioprio_set(3, 65533),
    }
    done = []
    for name, call in calls.items():
        try:
            call()
            done.append(name)
        except PermissionError:
            pass
        except OSError as exc:
            done.append(f"{name} ({exc.strerror})")
    if done:
        raise RuntimeError(f"not refused: {', '.join(done)}")
    raise PermissionError(1, "Operation not permitted: every scheduling call refused")


class Target(HostTarget):
    def compile(self, case, workdir):
        if case.id == {first!r}:
            {fault}
        return super().compile(case, workdir)
'''

SESSION = '''
import json, os, resource, signal, subprocess, sys
from importlib.metadata import EntryPoint
from pathlib import Path

from pytest_xtc.conformance import builtin_cases
from pytest_xtc.core.adapter import TargetSpec
from pytest_xtc.core.adapters import registry
from pytest_xtc.core.execution.remote import IsolatedAdapter
from pytest_xtc.core.execution.runner import Settings, run_case

os.environ["FENCE_TEST_SESSION"] = str(os.getpid())
# the neighbour: a grandchild of the session (a case of another worker stands so)
keeper = subprocess.Popen(["sh", "-c", "sleep 600 & echo $!; wait"], stdout=subprocess.PIPE,
                          text=True)
neighbour = int(keeper.stdout.readline())
os.environ["FENCE_TEST_NEIGHBOUR"] = str(neighbour)


def open_files(pid):
    with open(f"/proc/{pid}/limits") as limits:
        return next(line.split()[3] for line in limits if line.startswith("Max open files"))


def scheduling():
    return (os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0),
            sorted(os.sched_getaffinity(0)))


neighbours_limit = open_files(neighbour)
scheduled = scheduling()
here, mode, ids = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
sys.path.insert(0, str(here))
limit = resource.getrlimit(resource.RLIMIT_NOFILE)
if mode == "seccomp-alone":
    from pytest_xtc.core.workers import fence
    fence.landlock_abi = lambda: 0
if mode == "landlock-refused":  # a kernel that has the ABI but refuses the domain
    from pytest_xtc.core.workers import fence
    fence._scope = lambda: "no Landlock domain: refused (a test)"
if mode == "hosted":
    adapter = IsolatedAdapter(TargetSpec("faulty", "host"),
                              EntryPoint("faulty", "faulty:Target", registry.GROUP))
else:
    from faulty import Target
    adapter = Target(TargetSpec("faulty", "host"))
cases = {c.id: c for c in builtin_cases()}
verdicts = {}
for n, case_id in enumerate(ids):
    outcome = run_case(adapter, cases[case_id], here / f"case-{n}", Settings(perf=False))
    verdicts[case_id] = [outcome.status.value, outcome.message[:300]]
if mode == "hosted":
    adapter.stop()
alive = keeper.poll() is None
kept = alive and open_files(neighbour) == neighbours_limit
os.kill(neighbour, signal.SIGKILL)
keeper.wait()
print(json.dumps({"verdicts": verdicts, "limit kept": resource.getrlimit(
    resource.RLIMIT_NOFILE) == limit, "neighbour alive": alive, "neighbour's limit kept": kept,
    "scheduling kept": scheduling() == scheduled}))
'''


def session(tmp_path: Path, fault: str, mode: str) -> dict[str, object]:
    source = ADAPTER.replace("{first!r}", repr(FIRST)).replace("{fault}", FAULTS[fault])
    (tmp_path / "faulty.py").write_text(source)
    (tmp_path / "session.py").write_text(SESSION)
    try:
        done = subprocess.run(
            [sys.executable, str(tmp_path / "session.py"), str(tmp_path), mode, FIRST, *LATER],
            capture_output=True, text=True, timeout=120, start_new_session=True, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{fault}: the session hung (stopped by its kernel?)")
    assert done.returncode == 0, f"{fault}: the session ended ({done.returncode}) " \
                                 f"{done.stderr[-800:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


#: hosted: through the isolated host; forked: forked from the session; seccomp-alone: so,
#: Landlock left out (as on a kernel before 6.12); landlock-refused: its domain refused
RUNS = [(fault, mode) for fault in sorted(FAULTS) for mode in ("hosted", "forked")]
RUNS += [(fault, mode) for fault in sorted(FAULTS) if fault not in LANDLOCK_ONLY
         for mode in ("seccomp-alone", "landlock-refused")
         if (fault, mode) != ("reschedules-the-session", "landlock-refused")]  # seccomp's


@pytest.mark.parametrize(("fault", "mode"), RUNS)
def test_a_kernel_cannot_reach_its_session(tmp_path: Path, fault: str, mode: str,
                                          refused_here: str | None) -> None:
    if fault in LANDLOCK_ONLY and refused_here is not None:
        pytest.skip(refused_here)
    ran = session(tmp_path, fault, mode)
    verdicts: dict[str, list[str]] = ran["verdicts"]  # type: ignore[assignment]
    status, message = verdicts[FIRST]
    assert status == "error", (fault, message)
    assert "Operation not permitted" in message or "Permission denied" in message, \
        (fault, message)
    for case in LATER:
        assert verdicts[case] == ["passed", ""], (fault, case, verdicts[case])
    assert ran["limit kept"], fault
    assert ran["neighbour alive"] and ran["neighbour's limit kept"], fault
    assert ran["scheduling kept"], fault


def test_what_is_protected_and_what_is_not() -> None:
    """Ancestors (to init), as pids and as groups, and every process (-1); never this
    process, its group (it leads one) or 0 (its own group)."""
    code = textwrap.dedent("""
        import json, os
        os.setsid()
        from pytest_xtc.core.workers import fence
        print(json.dumps([os.getpid(), os.getppid(), fence.protected()]))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    me, parent, values = json.loads(done.stdout)
    assert values[0] == -1 and parent in values and -parent in values
    assert os.getpid() in values and 1 in values  # this test's process: an ancestor there
    assert me not in values and -me not in values and 0 not in values


def test_the_filter_reaches_every_value_it_is_given() -> None:
    """BPF jumps reach 255 instructions: each refusal jumps to a return close by, so the
    program holds for the most values it is given, and each value is compared."""
    arch, checked, refused = fence._ARCHES["x86_64"]
    checked = {**checked, **fence._SCHEDULING["x86_64"]}
    values = list(range(1000, 1000 + fence._MAX_PROTECTED))  # none a call number
    program = fence._program(arch, checked, (*refused, *fence._BY_PIDFD), values,
                             fence._OWN["x86_64"], 4321, fence._WHOLE_USER["x86_64"])
    assert all(0 <= jt <= 255 for _, jt, _, _ in program)
    compared = [k for code, _, _, k in program if code == fence._JEQ]
    for value in values:
        assert compared.count(value) == len(set(checked.values()))


KEPT = """
import json, os, resource, signal, subprocess, sys
from pytest_xtc.core.workers import fence
os.setsid()
print(fence.install() or "", file=sys.stderr)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (soft - 1, hard))  # its own limits: prlimit(0)
resource.prlimit(os.getpid(), resource.RLIMIT_NOFILE, (soft - 2, hard))
helper = subprocess.Popen(["sleep", "60"])
os.kill(helper.pid, 0)
os.killpg(0, signal.SIGCONT)  # its own group
os.setpriority(os.PRIO_PROCESS, 0, 1)  # its own scheduling, by 0 and by its pid
os.setpriority(os.PRIO_PROCESS, os.getpid(), 2)
os.sched_setaffinity(os.getpid(), os.sched_getaffinity(0))
os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
helper.kill()
helper.wait()
helper = subprocess.Popen(["sleep", "60"])
pidfd = os.pidfd_open(helper.pid)
try:
    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    by_pidfd = "done"
except PermissionError:
    by_pidfd = "refused"
helper.kill()
helper.wait()
print(json.dumps({"limit": resource.getrlimit(resource.RLIMIT_NOFILE)[0] == soft - 2,
                  "nice": os.getpriority(os.PRIO_PROCESS, 0),
                  "helper": helper.returncode, "by pidfd": by_pidfd}))
"""


def test_what_a_case_keeps(refused_here: str | None) -> None:
    """Its own limits, its helpers (signalled by pid, by its group, and by pidfd where
    Landlock scopes it; the seccomp layer alone refuses every pidfd call)."""
    done = subprocess.run([sys.executable, "-c", KEPT], capture_output=True, text=True,
                          timeout=60, check=True)
    kept = json.loads(done.stdout)
    assert kept["limit"] and kept["helper"] == -9 and kept["nice"] >= 2
    assert kept["by pidfd"] == ("refused" if refused_here else "done")
