"""The worker processes: containment, time limits, death, and adapters that live in them."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

from pytest_xtc.conformance.families import FAMILIES
from pytest_xtc.core.adapter import (
    ONCE,
    Artifact,
    Capabilities,
    Probe,
    RunResult,
    TargetAdapter,
    TargetSpec,
    Tier,
)
from pytest_xtc.core.adapters import adapter_declarations, registry
from pytest_xtc.core.cases.case import Case, Schedule
from pytest_xtc.core.execution.remote import HostLimits, IsolatedAdapter
from pytest_xtc.core.execution.runner import Settings, run_case
from pytest_xtc.core.outcome import Status
from pytest_xtc.core.workers import isolation
from tests.conftest import write_distribution

pytestmark = pytest.mark.skipif(not isolation.available(), reason="needs fork and setsid")


def gone(pid: int, within: float = 5.0) -> bool:
    """Whether ``pid`` is dead (or a zombie) within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
            os.kill(pid, 0)
        except (ProcessLookupError, FileNotFoundError):
            return True
        time.sleep(0.05)
    return False


def wait_for_file(path: Path, within: float = 10.0) -> str:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().endswith("\n"):
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} never written")


class Interrupted(Exception):
    """What a signal handler raises in the middle of a call (as pytest-timeout does)."""


@pytest.fixture
def interrupt_in() -> Iterator[Callable[[float, type[BaseException]], None]]:
    """Raise an exception from a SIGALRM handler after some seconds."""

    def arm(seconds: float, error: type[BaseException] = Interrupted) -> None:
        def handler(signum: int, frame: Any) -> None:
            raise error("interrupted")

        signal.signal(signal.SIGALRM, handler)
        signal.setitimer(signal.ITIMER_REAL, seconds)

    previous = signal.getsignal(signal.SIGALRM)
    yield arm
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


def slow_echo(request: tuple[float, str], report: isolation.Report) -> str:
    time.sleep(request[0])
    return request[1]


def test_an_interrupted_call_never_leaves_its_reply_to_the_next(interrupt_in) -> None:
    worker = isolation.Worker(slow_echo)
    try:
        interrupt_in(0.3)
        with pytest.raises(Interrupted):
            worker.call((0.8, "stale"), {"x": 3}, "x")
        time.sleep(0.8)  # the stale reply would be in the pipe by now
        assert worker.call((0.0, "fresh"), {"x": 3}, "x") == "fresh"
    finally:
        worker.stop()


def test_ctrl_c_in_the_parent_kills_the_worker_and_propagates(interrupt_in) -> None:
    worker = isolation.Worker(slow_echo)
    worker.call((0.0, "warm"), {"x": 3}, "x")
    pid = worker.pid
    interrupt_in(0.2, KeyboardInterrupt)
    with pytest.raises(KeyboardInterrupt):
        worker.call((30.0, "never"), {"x": 60}, "x")
    assert gone(pid, 1.0)


def sleeper_grandchild(pidfile: Path) -> None:
    """Start a grandchild that ignores SIGTERM and sleeps, and note its pid."""
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", code])
    pidfile.write_text(f"{child.pid}\n")


def test_a_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild"

    def handler(request: Any, report: isolation.Report) -> None:
        sleeper_grandchild(pidfile)
        time.sleep(60)

    worker = isolation.Worker(handler)
    with pytest.raises(isolation.ChildFailure, match="timed out: x exceeded its 1 s limit"):
        worker.call(None, {"x": 1}, "x")
    assert gone(int(pidfile.read_text()), 3.0)


def test_a_kernel_killing_its_process_group_does_not_kill_pytest() -> None:
    def handler(request: Any, report: isolation.Report) -> None:
        os.killpg(0, signal.SIGTERM)
        time.sleep(5)

    with pytest.raises(isolation.ChildFailure, match="killed by signal SIGTERM"):
        isolation.call_isolated(lambda: handler(None, print), 3, "run")


PARENT = """
import os, sys, time, subprocess
from pytest_xtc.core.workers import isolation

def handler(request, report):
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    grandchild = subprocess.Popen([sys.executable, "-c", code])
    with open(sys.argv[1], "w") as f:
        f.write(f"{os.getpid()} {grandchild.pid}\\n")
    while True:  # busy, as a kernel in a loop
        pass

isolation.Worker(handler).call(None, {"x": 60}, "x")
"""


def test_the_worker_and_its_children_die_when_pytest_is_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(pidfile)], env=env)
    try:
        worker, grandchild = map(int, wait_for_file(pidfile).split())
        parent.kill()
        parent.wait()
        assert gone(worker), "the worker outlived its parent"
        assert gone(grandchild), "the worker's child outlived it"
    finally:
        parent.kill()


def test_the_worker_holds_no_descriptor_of_the_parent() -> None:
    read, write = os.pipe()  # as pytest's stdout, or the pipe of a `| tee`
    try:
        open_fds = isolation.call_isolated(
            lambda: sorted(map(int, os.listdir("/proc/self/fd"))), 3, "x"
        )
        assert read not in open_fds and write not in open_fds
        assert len(open_fds) <= 6  # 0, 1, 2, its two pipes (and the listing's own)
    finally:
        os.close(read)
        os.close(write)


@pytest.mark.parametrize("error", [SystemExit(3), KeyboardInterrupt()])
def test_system_exit_and_keyboard_interrupt_in_the_handler_are_named(error) -> None:
    def handler() -> None:
        raise error

    with pytest.raises(isolation.HandlerError, match=type(error).__name__):
        isolation.call_isolated(handler, 3, "x")


@pytest.mark.parametrize("value", [math.nan, math.inf, 0, -1])
def test_time_limits_must_be_finite_and_positive(value: float) -> None:
    with pytest.raises(ValueError, match="--xtc-run-timeout: must be a finite number"):
        Settings(limits={"run": value})
    with pytest.raises(ValueError, match="x time limit"):
        isolation.Worker(slow_echo).call((0, ""), {"x": value}, "x")


class Fake(TargetAdapter):
    """An adapter with no toolchain: compile and run do what ``action`` says."""

    action = ""

    def probe(self) -> Probe:
        return Probe(Tier.EXECUTE)

    def capabilities(self) -> Capabilities:
        return Capabilities(ops=frozenset({"matmul"}))

    def compile(self, case: Case, workdir: Path) -> Artifact:
        if self.action == "compile-exit":
            raise SystemExit(3)
        return Artifact(workdir)

    def run(self, artifact, inputs, outputs, timing=ONCE) -> RunResult:  # type: ignore[no-untyped-def]
        if self.action == "run-interrupt":
            raise KeyboardInterrupt
        return RunResult()


def matmul(m: int, n: int, k: int) -> Case:
    graph, shape = FAMILIES["matmul"](m, n, k)
    return Case("matmul", "float32", shape, Schedule(), graph)


@pytest.mark.parametrize(
    ("action", "message"),
    [
        ("compile-exit", "compile raised SystemExit: 3"),
        ("run-interrupt", "run raised KeyboardInterrupt"),
    ],
)
def test_a_base_exception_in_adapter_code_fails_its_case(tmp_path, action, message) -> None:
    adapter = Fake(TargetSpec("fake", "fake"))
    adapter.action = action
    outcome = run_case(adapter, matmul(2, 3, 4), tmp_path, Settings(perf=False))
    assert outcome.status is Status.FAILED and message in outcome.message


def test_a_case_over_the_memory_budget_is_refused_before_its_inputs(tmp_path) -> None:
    adapter = Fake(TargetSpec("fake", "fake"))
    outcome = run_case(adapter, matmul(100000, 100000, 100000), tmp_path, Settings())
    assert outcome.status is Status.SKIPPED
    assert "over the budget of 1,024 MiB (--xtc-max-case-bytes)" in outcome.message


ADAPTER = """
import os, signal, sys, time
from pytest_xtc.core.adapter import Capabilities, Probe, TargetAdapter, Tier, OptionSpec

{prologue}

class Target(TargetAdapter):
    options = {options}

    def probe(self):
        {probe}
        return Probe(Tier.EXECUTE, "", {{"pid": str(os.getpid())}})

    def capabilities(self):
        return Capabilities(ops=frozenset({{"matmul"}}))

    def compile(self, case, workdir):
        raise NotImplementedError

    def run(self, artifact, inputs, outputs, timing=None):
        raise NotImplementedError
"""


def adapter_module(
    root: Path, name: str, prologue: str = "", probe: str = "pass", options: str = "()"
) -> str:
    source = ADAPTER.format(prologue=prologue, probe=probe, options=options)
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{name}.py").write_text(source)
    return f"{name}:Target"


@pytest.mark.parametrize(
    ("prologue", "probe", "reason"),
    [
        ("", "time.sleep(60)", "probe timed out after 1 s"),
        ("", "os.kill(os.getpid(), signal.SIGSEGV)", "probe crashed: killed by signal SIGSEGV"),
        ("", "raise RuntimeError('bug')", "probe raised RuntimeError: bug"),
        ("sys.exit(3)", "pass", "adapter failed to load: SystemExit: 3"),
        ("time.sleep(60)", "pass", "adapter failed to load: timed out after 1 s"),
        ("os.kill(os.getpid(), signal.SIGABRT)", "pass", "adapter failed to load: crashed: kill"),
    ],
    ids=[
        "probe-hangs",
        "probe-crashes",
        "probe-raises",
        "exit-at-import",
        "import-hangs",
        "import-aborts",
    ],
)
def test_an_isolated_adapter_that_fails_is_unavailable_with_its_cause(
    tmp_path, monkeypatch, prologue, probe, reason
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    value = adapter_module(tmp_path, f"mod_{abs(hash(reason))}", prologue, probe)
    entry = EntryPoint("broken", value, registry.GROUP)
    adapter = IsolatedAdapter(TargetSpec("broken", "broken"), entry, HostLimits(load=1, probe=1))
    try:
        status = adapter.status()
        assert status.tier is Tier.UNAVAILABLE and reason in status.reason, status.reason
        assert status.raised == ("load" not in reason), status  # an error of the run
        expected = Status.ERROR if status.raised else Status.SKIPPED
        assert run_case(adapter, matmul(2, 3, 4), tmp_path).status is expected
    finally:
        adapter.stop()
    assert value.split(":")[0] not in sys.modules  # never imported here


def test_an_isolated_adapter_runs_in_another_process(tmp_path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    entry = EntryPoint("fine", adapter_module(tmp_path, "fine_adapter"), registry.GROUP)
    adapter = IsolatedAdapter(TargetSpec("fine", "fine"), entry)
    try:
        probe = adapter.status()
        assert probe.tier is Tier.EXECUTE and probe.versions["pid"] != str(os.getpid())
        assert adapter.capabilities().ops == {"matmul"}
        assert adapter.time_limits() == (120.0, 60.0)
        outcome = run_case(adapter, matmul(2, 3, 4), tmp_path, Settings(perf=False))
        assert outcome.status is Status.FAILED and "NotImplementedError" in outcome.message
    finally:
        adapter.stop()


def test_each_outcome_says_how_long_its_operands_took_to_move(tmp_path) -> None:
    """The real host, in process (nothing moved: None), in a worker forked here and in its
    isolated host's worker (two ways: both counted): the seconds its operands and
    results spent moving, a part of the case's time."""
    from pytest_xtc.targets.host import HostTarget

    case = matmul(64, 48, 32)
    entry = EntryPoint("host", "pytest_xtc.targets.host:HostTarget", registry.GROUP)
    hosted = IsolatedAdapter(TargetSpec("host", "host"), entry)
    here = HostTarget(TargetSpec("host", "host"))
    try:
        seen = {}
        for name, adapter, isolate in [("inline", here, False), ("forked", here, True),
                                       ("hosted", hosted, True)]:
            start = time.perf_counter()
            outcome = run_case(adapter, case, tmp_path / name, Settings(isolate=isolate,
                                                                        perf=False))
            seen[name] = (outcome.status, outcome.transfer_s, time.perf_counter() - start)
    finally:
        hosted.stop()
    assert seen["inline"][:2] == (Status.PASSED, None)
    for name in ("forked", "hosted"):
        status, moved, whole = seen[name]
        assert status is Status.PASSED and moved is not None and 0 < moved < whole, seen


@pytest.fixture
def vendors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Entry points of fake distributions under tmp_path, seen by the registry."""
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.registered.cache_clear()
    registry.option_declarations.cache_clear()
    yield tmp_path
    registry.registered.cache_clear()
    registry.option_declarations.cache_clear()


@pytest.mark.parametrize(
    ("options", "prologue", "problem"),
    [
        ("[OptionSpec('seed', 'mine')]", "", "option --xtc-seed clashes with a built-in option"),
        ("[OptionSpec('report', 'mine')]", "", "option --xtc-report clashes"),
        ("5", "", "options is a int, not a sequence of OptionSpec"),
        ("['fast']", "", "options holds a str, not an OptionSpec"),
        ("()", "sys.exit(3)", "SystemExit: 3"),
        ("()", "time.sleep(60)", "reading its options timed out after 1 s"),
    ],
)
def test_a_bad_option_declaration_makes_its_target_unavailable(
    vendors, monkeypatch, options, prologue, problem
) -> None:
    monkeypatch.setattr(adapter_declarations, "OPTIONS_LIMIT_S", 1.0)
    value = adapter_module(vendors, f"opts_{abs(hash(problem))}", prologue, options=options)
    write_distribution(vendors, "clashing", {"clash": value})
    declared = registry.option_declarations()
    assert any(problem in p for p in declared.problems["clash"]), declared.problems
    assert "clash" not in {o.name for o in declared.options}
    (adapter,) = registry.resolve("clash", {})
    status = adapter.status()
    assert status.tier is Tier.UNAVAILABLE and problem in status.reason
    assert "host" not in declared.problems  # the others are unaffected


def test_one_place_chooses_where_a_case_runs(tmp_path, monkeypatch) -> None:
    """Inline without isolation, a forked worker for an adapter built here, the host's
    worker for an isolated adapter; one executor per adapter and mode, kept."""
    from pytest_xtc.core.execution.executors import executor_for, forked, hosted, inline
    from pytest_xtc.targets.host import HostTarget

    here = HostTarget(TargetSpec("host", "host"))
    assert isinstance(executor_for(here, Settings(isolate=False)), inline.InlineExecutor)
    chosen = executor_for(here, Settings())
    assert isinstance(chosen, forked.ForkedExecutor) and executor_for(here, Settings()) is chosen
    monkeypatch.syspath_prepend(str(tmp_path))
    entry = EntryPoint("fine", adapter_module(tmp_path, "fine_adapter"), registry.GROUP)
    proxy = IsolatedAdapter(TargetSpec("fine", "fine"), entry)
    try:
        assert isinstance(executor_for(proxy, Settings()), hosted.HostedExecutor)
    finally:
        proxy.stop()


def _sums(request: Any, report: Any) -> tuple[list[float], Any]:
    import numpy as np

    return [float(a.sum()) for a in request], np.full(1 << 16, 2.0)  # a large reply


class _Forwarding:
    """A host's way: a request it received goes on to a worker of its own, whole."""

    def __init__(self) -> None:
        self.inner: isolation.Worker | None = None

    def __call__(self, request: Any, report: Any) -> Any:
        if self.inner is None:
            self.inner = isolation.Worker(_sums, fresh=True)
        return self.inner.call(request, {"run": 60.0}, "run")


def test_large_operands_reach_fenced_workers_two_levels_down() -> None:
    """Operands in shared files pass down with their frame (a fenced worker may not open
    its parent's /proc/<pid>/fd): a plain array (written once into a file), an array made
    in shared memory (its own file), through a worker that forwards them to its own; the
    large reply comes back up."""
    import numpy as np

    from pytest_xtc.core.workers import transfer

    plain = np.arange(1 << 15, dtype=np.float64)  # 256 KiB, over transfer.INLINE_MAX
    shared = transfer.shared_empty((1 << 15,), np.float64)
    shared[:] = 3.0
    for handler in (_sums, _Forwarding()):
        worker = isolation.Worker(handler, fresh=True)
        try:
            for _ in range(2):
                sums, back = worker.call((plain, shared), {"run": 60.0}, "run")
                assert sums == [float(plain.sum()), 3.0 * (1 << 15)]
                assert back.shape == (1 << 16,) and float(back.sum()) == 2.0 * (1 << 16)
        finally:
            worker.stop()


@pytest.mark.parametrize("numbers", ["closed", "given to another open"])
def test_a_call_whose_worker_another_thread_stopped_first_says_stopped(numbers: str) -> None:
    """A stop() between the call's fork and its copy of the pipe ends (the pid read as 0):
    the call ends "stopped", never copying a closed number (it raised OSError) nor one an
    open elsewhere was given meanwhile (the request went into that file)."""
    worker = isolation.Worker(lambda request, report: None)
    worker.start()
    worker.stop()
    with open(os.devnull, "wb") as elsewhere:
        if numbers != "closed":
            worker.requests = worker.replies = elsewhere.fileno()
        with pytest.raises(isolation.ChildFailure, match="stopped"):
            worker._hold("run", 0)


def reports_without_end(request: Any, report: isolation.Report) -> None:
    while True:  # every report starts its phase's clock again
        report("run")


@pytest.mark.timeout(120)  # before: a wait without end
def test_a_child_reporting_phases_without_end_is_stopped() -> None:
    """Each phase report starts that phase's clock: a kernel writing reports without end
    (it may write into its reply pipe) was never timed out; the call now ends once it
    passes the number of reports a worker makes."""
    worker = isolation.Worker(reports_without_end)
    try:
        with pytest.raises(isolation.ChildFailure, match="more than 256 phase reports"):
            worker.call(None, {"run": 60.0}, "run")
    finally:
        worker.stop()


def late_or_unknown_clock(request: Any, report: isolation.Report) -> str:
    from pytest_xtc.core.workers import transfer
    from pytest_xtc.core.workers.serving import Message

    ident = report.__defaults__[0]  # type: ignore[attr-defined]
    stamped = Message("phase", "run", ident, at=math.nan)
    transfer.write_frame(isolation_replies(), transfer.pack(stamped).frame)
    time.sleep(0.5)
    return "done"


def isolation_replies() -> int:
    """This child's reply pipe: its one pipe besides fds 0 to 2."""
    import stat

    for name in os.listdir("/proc/self/fd"):
        try:
            if int(name) > 2 and stat.S_ISFIFO(os.fstat(int(name)).st_mode):
                return int(name)
        except OSError:  # the listing's own descriptor, closed by now
            pass
    raise AssertionError("no reply pipe")


def test_a_report_stamped_not_a_number_is_timed_from_its_arrival() -> None:
    """A NaN as a report's time made every later deadline NaN (never reached, and select
    refused its timeout); it now counts from when the report before it left."""
    worker = isolation.Worker(late_or_unknown_clock)
    try:
        assert worker.call(None, {"run": 60.0}, "run") == "done"
    finally:
        worker.stop()
