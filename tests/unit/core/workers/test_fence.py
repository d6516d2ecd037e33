"""A kernel cannot reach the session that runs it (core/workers/fence.py): its signal to
pytest (SIGKILL, SIGSTOP), to pytest's process group or to every process (``kill(-1)``),
its ``prlimit`` of pytest, are refused; the case that tried is judged as usual (here its
compile raised), and every later case keeps the verdict a clean run gives it.

Each fault is applied by a real host adapter in the first case of a session: a Python
process of its own (its own session and group, so that a fault that got through would end
it alone), run through the isolated host as pytest runs it, and through a worker forked
from the session itself (an adapter built in process). Before the fence, the session died
(SIGKILL), hung (SIGSTOP) or lost its file limit."""

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
    """Why this machine takes no fence (None: it does), asked of a process of its own."""
    if not sys.platform.startswith("linux") or platform.machine() not in fence._ARCHES:
        return "the fence is Linux on x86-64 and AArch64"
    done = subprocess.run(
        [sys.executable, "-c", "from pytest_xtc.core.workers import fence; "
                               "print(fence.install() or '')"],
        capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip() or None


@pytest.fixture(scope="module", autouse=True)
def _a_fence_here() -> None:
    """Asked once, when a test of this module first runs (not at collection)."""
    refused = _refused_here()
    if refused is not None:
        pytest.skip(refused)

FAULTS = {
    "kills-the-session": "os.kill(SESSION, signal.SIGKILL)",
    "stops-the-session": "os.kill(SESSION, signal.SIGSTOP)",
    "kills-the-sessions-group": "os.killpg(os.getpgid(SESSION), signal.SIGKILL)",
    # SIGCONT: harmless should the fence fail (SIGKILL to -1 would end every process)
    "signals-every-process": "os.kill(-1, signal.SIGCONT)",
    "lowers-the-sessions-file-limit": "resource.prlimit(SESSION, resource.RLIMIT_NOFILE, "
                                      "(16, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))",
}
FIRST = "matmul-float32-13x11x7-none"
LATER = ("matmul-float32-31x37x29-tile", "relu-float32-6x5-none-special")

ADAPTER = '''
import os, resource, signal
from pytest_xtc.targets.host import HostTarget

SESSION = int(os.environ["FENCE_TEST_SESSION"])


class Target(HostTarget):
    def compile(self, case, workdir):
        if case.id == {first!r}:
            {fault}
        return super().compile(case, workdir)
'''

SESSION = '''
import json, os, resource, sys
from importlib.metadata import EntryPoint
from pathlib import Path

from pytest_xtc.conformance import builtin_cases
from pytest_xtc.core.adapter import TargetSpec
from pytest_xtc.core.adapters import registry
from pytest_xtc.core.execution.remote import IsolatedAdapter
from pytest_xtc.core.execution.runner import Settings, run_case

os.environ["FENCE_TEST_SESSION"] = str(os.getpid())
here, mode, ids = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
sys.path.insert(0, str(here))
limit = resource.getrlimit(resource.RLIMIT_NOFILE)
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
print(json.dumps({"verdicts": verdicts, "limit kept": resource.getrlimit(
    resource.RLIMIT_NOFILE) == limit}))
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


@pytest.mark.parametrize("mode", ["hosted", "forked"])
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_kernel_cannot_reach_its_session(tmp_path: Path, fault: str, mode: str) -> None:
    ran = session(tmp_path, fault, mode)
    verdicts: dict[str, list[str]] = ran["verdicts"]  # type: ignore[assignment]
    status, message = verdicts[FIRST]
    assert status == "error" and "Operation not permitted" in message, (fault, message)
    for case in LATER:
        assert verdicts[case] == ["passed", ""], (fault, case, verdicts[case])
    assert ran["limit kept"], fault


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
    values = list(range(1000, 1000 + fence._MAX_PROTECTED))  # none a call number
    program = fence._program(arch, checked, refused, values)
    assert all(0 <= jt <= 255 for _, jt, _, _ in program)
    compared = [k for code, _, _, k in program if code == fence._JEQ]
    for value in values:
        assert compared.count(value) == len(set(checked.values()))
