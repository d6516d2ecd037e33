"""Workers: large operands cross at memory speed and untimed, a case starts in a clean
worker state, processes a case leaves (daemons included) are ended, recovery is paid by
the case that caused it, and a timeout plugin's end of a case is no wrong result."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_xtc.core.workers import isolation, transfer
from tests.acceptance.test_reliability import gone as processes_gone
from tests.unit.core.workers.test_isolation import Interrupted, gone

pytestmark = pytest.mark.skipif(not isolation.available(), reason="needs fork and setsid")
MB = 2**20


def shm_entries() -> set[str]:
    """/dev/shm's entries, but the OpenMP runtime's registrations of other processes
    (``__KMP_REGISTERED_LIB_<pid>``: another test's process under ``-n``, which come and
    go meanwhile; the handlers here load no OpenMP)."""
    if not os.path.isdir("/dev/shm"):
        return set()
    mine = f"__KMP_REGISTERED_LIB_{os.getpid()}"
    return {entry for entry in os.listdir("/dev/shm")
            if not entry.startswith("__KMP_REGISTERED_LIB_") or entry == mine}


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def echo(request: Any, report: isolation.Report) -> Any:
    return request


def test_large_operands_cross_both_ways_untimed() -> None:
    """128 MB each way under a 1 s phase limit: the transfer is not the phase's (the
    quadratic pipe took minutes for this); the bytes arrive exact and writable, and a
    write on one side never reaches the other."""
    sent = transfer.shared_empty((32 * MB,), np.float32)
    sent[:] = np.arange(sent.size, dtype=np.float32)
    heap = np.full(16 * MB, 7.0)  # not in shared memory: written once into a new file
    worker = isolation.Worker(echo)
    try:
        back = worker.call([sent, heap], {"x": 1.0}, "x")
    finally:
        worker.stop()
    assert np.array_equal(back[0], sent) and np.array_equal(back[1], heap)
    back[0][0] = -1.0
    assert sent[0] == 0.0 and back[0].flags.writeable


def test_the_time_spent_moving_a_call_is_measured_apart_from_its_work() -> None:
    """``moved_s`` counts the request's way in and the reply's way out, not the handler's
    work between them: a handler sleeping 1 s moves 64 MB each way in well under it,
    and moving more takes longer than moving nothing."""

    def slow_echo(request: Any, report: isolation.Report) -> Any:
        report("x")
        time.sleep(1.0)
        return request

    heap = np.full(16 * MB, 7.0, dtype=np.float32)  # written into a new file each way
    worker = isolation.Worker(slow_echo)
    try:
        moved_nothing = []
        for _ in range(2):  # the least of two: on a loaded machine one may wait for a core
            worker.call(None, {"x": 5.0}, "x")
            moved_nothing.append(worker.moved_s)
        nothing = min(moved_nothing)
        start = time.perf_counter()
        back = worker.call(heap, {"x": 5.0}, "x")
        whole = time.perf_counter() - start
        assert back.sum() == heap.sum()  # touched on this side: its way is paid
        moved = worker.moved_s
    finally:
        worker.stop()
    assert 0 < nothing < moved < whole - 0.9


def test_work_done_here_meanwhile_is_neither_transfer_nor_a_phase_of_the_child() -> None:
    """``meanwhile`` (the references) runs here while the child works: the phases it
    delays reading are timed from when the child reported them, so 1.5 s spent here is
    not counted as moving (it once was, arrival-timed), and a child hanging in a phase
    is stopped at that phase's limit counted from its report, not from when it was
    read."""

    def works(request: Any, report: isolation.Report) -> Any:
        report("x")
        time.sleep(request)
        return request

    ran: list[float] = []

    def meanwhile() -> None:
        ran.append(time.perf_counter())
        time.sleep(1.5)

    worker = isolation.Worker(works)
    try:
        start = time.perf_counter()
        assert worker.call(0.2, {"x": 5.0}, "x", meanwhile=meanwhile) == 0.2
        assert ran and ran[0] - start < 0.5  # it ran as the child worked
        assert worker.moved_s < 0.5, worker.moved_s
        start = time.perf_counter()
        with pytest.raises(isolation.ChildFailure, match="x exceeded its 2 s limit"):
            worker.call(30.0, {"x": 2.0}, "x", meanwhile=meanwhile)
        assert time.perf_counter() - start < 3.4  # arrival-timed: 1.5 + 2 s at least
    finally:
        worker.stop()


@pytest.mark.parametrize("target", ["host", "float16"])
def test_references_are_computed_while_the_worker_compiles(tmp_path, monkeypatch, target):
    """The checking side computes each input set's reference while the worker compiles
    and runs (once per set: the timed call shares the first's), and judges with them:
    the real host passes, a faulty variant (float16 arithmetic) is rejected as before."""
    from pytest_xtc.core.adapter import TargetSpec
    from pytest_xtc.core.execution.runner import Settings, run_case
    from pytest_xtc.core.judging.checks import base
    from pytest_xtc.core.outcome import Status
    from pytest_xtc.selftest import faults
    from pytest_xtc.targets.host import HostTarget
    from tests.unit.core.workers.test_isolation import matmul

    compiled = tmp_path / "compiled"  # when the worker's compile ended (its clock: this one's)

    class SlowToCompile(HostTarget if target == "host" else faults.Float16Arithmetic):
        def compile(self, case: Any, workdir: Path) -> Any:
            time.sleep(1.0)
            try:
                return super().compile(case, workdir)
            finally:
                compiled.write_text(repr(time.perf_counter()))

    made: list[float] = []
    evaluate = base.evaluate

    def timed_evaluate(*args: Any) -> Any:
        made.append(time.perf_counter())
        return evaluate(*args)

    monkeypatch.setattr(base, "evaluate", timed_evaluate)
    adapter = SlowToCompile(TargetSpec(target, target))
    start = time.perf_counter()
    outcome = run_case(adapter, matmul(33, 17, 65), tmp_path, Settings(isolate=True, perf=False))
    from pytest_xtc.core.execution.executors import close_all

    close_all()
    ended = float(compiled.read_text())
    assert len(made) == 2 and all(start < t < ended for t in made), (made, start, ended)
    if target == "host":
        assert outcome.status is Status.PASSED, outcome.message
    else:
        assert outcome.status is Status.FAILED and "wrong results" in outcome.message


def test_references_beside_a_worker_use_one_blas_thread(tmp_path, monkeypatch):
    """While the worker compiles and runs, the references use one BLAS thread (a spinning
    BLAS pool took the worker's core: compile 10% slower); the pool is as it was after."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from pytest_xtc.core.adapter import TargetSpec
    from pytest_xtc.core.execution.executors import close_all
    from pytest_xtc.core.execution.runner import Settings, run_case
    from pytest_xtc.core.judging.checks import base
    from pytest_xtc.core.outcome import Status
    from pytest_xtc.targets.host import HostTarget
    from tests.unit.core.workers.test_isolation import matmul

    def blas_threads() -> set[int]:
        return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}

    seen: list[set[int]] = []
    evaluate = base.evaluate

    def counted(*args: Any) -> Any:
        seen.append(blas_threads())
        return evaluate(*args)

    monkeypatch.setattr(base, "evaluate", counted)
    with threadpool_limits(limits=2, user_api="blas"):
        outcome = run_case(HostTarget(TargetSpec("host", "host")), matmul(33, 17, 65), tmp_path,
                           Settings(isolate=True, perf=False))
        close_all()
        assert blas_threads() == {2}
    assert outcome.status is Status.PASSED, outcome.message
    assert seen and all(s == {1} for s in seen), seen


@pytest.mark.parametrize("stuck", [False, True], ids=["slow kernel", "hung timed call"])
def test_the_run_limit_is_per_kernel_call_in_the_timed_run_too(tmp_path, stuck):
    """XTC's timing loop makes six calls (a warm-up, five measurements) in one phase: a
    kernel taking 0.4 s a call under a 1 s run limit passed its checked calls and was then
    "timed out" (a LLaMA prefill layer, 15 s a call under 60 s, was). The timed run has the
    limit once per call; a kernel hanging in it is still stopped, at that limit."""
    from pytest_xtc.core.adapter import TargetSpec, Timing
    from pytest_xtc.core.execution import perf
    from pytest_xtc.core.execution.executors import close_all
    from pytest_xtc.core.execution.runner import Settings, run_case
    from pytest_xtc.core.outcome import Status
    from pytest_xtc.targets.host import HostTarget
    from tests.unit.core.workers.test_isolation import matmul

    class Slow(HostTarget):
        def run(self, artifact: Any, inputs: Any, outputs: Any, timing: Any = None) -> Any:
            calls = perf.kernel_calls(timing)  # 2 for a checked call, 6 for the timed one
            time.sleep(60 if stuck and timing.repeat > 1 else 0.4 * calls / 2)
            return super().run(artifact, inputs, outputs, timing)

    settings = Settings(isolate=True, timing=Timing(repeat=5, number=1), limits={"run": 1.0})
    start = time.perf_counter()
    outcome = run_case(Slow(TargetSpec("slow", "host")), matmul(13, 11, 7), tmp_path, settings)
    close_all()
    if stuck:
        assert outcome.status is Status.FAILED and outcome.phase == "run", outcome.message
        assert "timed run exceeded its 6 s limit" in outcome.message
        assert time.perf_counter() - start < 15
    else:
        assert outcome.status is Status.PASSED, outcome.message


def test_a_target_s_run_limit_grows_with_the_case_s_work() -> None:
    """A LLaMA-7B prefill projection (128x4096 by 4096x4096, 4.3 GFLOP) unscheduled takes
    15 to 60 s a call on a 2-core VM: under the host's 60 s it was "timed out". The
    adapter's run limit is at least the case's flops at 10 MFLOP/s; the catalog's small
    cases keep it; a user's own --xtc-run-timeout is kept as given."""
    from pytest_xtc.core.adapter import TargetSpec
    from pytest_xtc.core.execution import runner
    from pytest_xtc.core.execution.runner import Settings
    from pytest_xtc.targets.host import HostTarget
    from tests.unit.core.workers.test_isolation import matmul

    host = HostTarget(TargetSpec("host", "host"))
    large = runner._limits(host, matmul(128, 4096, 4096), Settings())
    assert large["run"] == pytest.approx(2 * 128 * 4096 * 4096 / 10e6)  # 430 s
    assert runner._limits(host, matmul(13, 11, 7), Settings())["run"] == 60.0
    mine = runner._limits(host, matmul(128, 4096, 4096), Settings(limits={"run": 5.0}))
    assert mine["run"] == 5.0


def test_several_arrays_written_into_one_file_each_arrive_whole() -> None:
    """Arrays of this process's own memory, of different sizes, share one new file on the
    way (each at its offset): each comes back with its own shape and bytes (the receiver
    once cut every view to the file's whole size: two modified inputs failed to arrive)."""
    arrays = [np.arange(n, dtype=np.float32) for n in (MB, 16 * 1024, 3 * MB + 5)]
    worker = isolation.Worker(echo)
    try:
        back = worker.call(arrays, {"x": 5.0}, "x")
    finally:
        worker.stop()
    assert [a.shape for a in back] == [a.shape for a in arrays]
    assert all(np.array_equal(a, b) for a, b in zip(arrays, back, strict=True))


@pytest.mark.parametrize("how", ["returns", "crashes", "times out"])
def test_no_shared_memory_is_left_whatever_the_worker_does(how: str) -> None:
    def handler(request: Any, report: isolation.Report) -> Any:
        if how == "crashes":
            os._exit(3)
        if how == "times out":
            time.sleep(60)
        return request * 2

    before_shm, before_fds = shm_entries(), open_fds()
    worker = isolation.Worker(handler, renew=False)
    big = transfer.shared_empty((8 * MB,), np.float32)
    big[:] = 1.0
    try:
        if how == "returns":
            assert float(worker.call(big, {"x": 5}, "x")[0]) == 2.0
        else:
            with pytest.raises(isolation.ChildFailure):
                worker.call(big, {"x": 1}, "x")
    finally:
        worker.stop()
        if worker.log is not None:
            worker.log.close()  # kept by a stopped worker for its last words
    del big
    import gc

    gc.collect()
    assert shm_entries() == before_shm
    assert open_fds() == before_fds


def tamper(fault: str) -> None:
    if fault == "alarm":
        signal.alarm(1)
    elif fault == "recursion limit":
        sys.setrecursionlimit(sys.getrecursionlimit() + 1000)  # low ones crash deep stacks
    elif fault == "PATH":
        os.environ["PATH"] = "/nonexistent"
    elif fault == "closed stdio":
        os.close(1)
        os.close(2)
    elif fault == "umask":
        os.umask(0o777)
    elif fault == "working directory":
        os.chdir("/")
    elif fault == "signal handler":
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    elif fault == "numpy errors":
        np.seterr(all="raise")


def state(request: Any, report: isolation.Report) -> Any:
    """Tamper when asked to, else say what a case would find (after 1.5 s: an alarm left
    pending would have killed the worker by then)."""
    if request != "look":
        tamper(request)
        return None
    time.sleep(1.5)
    print("the standard streams work")
    mask = os.umask(0o22)
    os.umask(mask)
    return (sys.getrecursionlimit(), os.environ.get("PATH"), mask, os.getcwd(),
            signal.getsignal(signal.SIGUSR1), np.geterr())


FAULTS = ["alarm", "recursion limit", "PATH", "closed stdio", "umask", "working directory",
          "signal handler", "numpy errors"]


@pytest.mark.parametrize("fault", FAULTS)
def test_a_case_that_changes_its_worker_leaves_the_next_a_clean_one(fault: str) -> None:
    worker = isolation.Worker(state)
    try:
        clean = worker.call("look", {"x": 20}, "x")
        worker.call(fault, {"x": 20}, "x")
        assert any(note.startswith("worker replaced") for note in worker.notes), worker.notes
        assert worker.call("look", {"x": 20}, "x") == clean
        assert worker.notes == ()
    finally:
        worker.stop()


def test_an_untouched_worker_is_kept() -> None:
    worker = isolation.Worker(echo)
    try:
        worker.call(1, {"x": 20}, "x")
        pid = worker.pid
        worker.call(2, {"x": 20}, "x")
        assert worker.pid == pid and worker.notes == ()
    finally:
        worker.stop()


def daemonize(mark: str) -> None:
    """Double fork and setsid: a daemon out of the worker's process group."""
    first = os.fork()
    if first == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", mark])
        os._exit(0)
    os.waitpid(first, 0)


def test_a_daemon_a_case_leaves_is_ended_and_said(tmp_path: Path) -> None:
    mark = f"xtc-daemon-{os.getpid()}-{time.monotonic_ns()}"
    worker = isolation.Worker(lambda request, report: daemonize(mark))
    try:
        worker.call(None, {"x": 20}, "x")
        assert worker.notes == ("ended 1 process the case left behind",)
    finally:
        worker.stop()
    assert not processes_gone(mark, within=5.0)


def test_a_daemon_is_ended_when_the_worker_times_out() -> None:
    mark = f"xtc-daemon-{os.getpid()}-{time.monotonic_ns()}"

    def handler(request: Any, report: isolation.Report) -> None:
        daemonize(mark)
        time.sleep(60)

    worker = isolation.Worker(handler, renew=False)
    with pytest.raises(isolation.ChildFailure, match="timed out"):
        worker.call(None, {"x": 2}, "x")
    assert not processes_gone(mark, within=5.0)


@pytest.fixture
def interrupt_in() -> Iterator[Callable[[float], None]]:
    """Raise Interrupted from a SIGALRM handler after some seconds (as pytest-timeout)."""

    def handler(signum: int, frame: Any) -> None:
        raise Interrupted("interrupted")

    previous = signal.signal(signal.SIGALRM, handler)
    yield lambda seconds: signal.setitimer(signal.ITIMER_REAL, seconds) and None
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


def test_recovery_is_paid_by_the_interrupted_case(interrupt_in, tmp_path: Path) -> None:
    """A call interrupted (as pytest-timeout's signal method does) or crashed leaves a
    fresh worker already forked and warmed, before the next call starts."""
    warmed = tmp_path / "warmed"

    def handler(request: Any, report: isolation.Report) -> Any:
        if request == "warm":
            with open(warmed, "a") as log:
                log.write(f"{os.getpid()}\n")
            return None
        if request == "crash":
            os._exit(1)
        time.sleep(request)
        return request

    worker = isolation.Worker(handler, warm="warm")
    try:
        worker.call(0, {"x": 20}, "x")
        first = worker.pid
        interrupt_in(0.5)
        with pytest.raises(Interrupted):
            worker.call(30, {"x": 60}, "x")
        assert worker.pid not in (0, first) and gone(first)
        assert warmed.read_text().split() == [str(worker.pid)]
        second = worker.pid
        with pytest.raises(isolation.ChildFailure, match="exited with code 1"):
            worker.call("crash", {"x": 20}, "x")
        assert worker.pid not in (0, second)
        assert warmed.read_text().split()[-1] == str(worker.pid)
    finally:
        worker.stop()


FAULTY = """
import os, signal, sys, time
from pytest_xtc.targets.host import HostTarget

MARK = {mark!r}
FAULTS = {faults!r}


def daemonize():
    first = os.fork()
    if first == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", MARK])
        os._exit(0)
    os.waitpid(first, 0)


class Faulty(HostTarget):
    def compile(self, case, workdir):
        artifact = super().compile(case, workdir)
        artifact.notes["case"] = case.id
        return artifact

    def run(self, artifact, inputs, outputs, timing=None):
        result = super().run(artifact, inputs, outputs) if timing is None else \\
            super().run(artifact, inputs, outputs, timing)
        fault = FAULTS.get(artifact.notes["case"])
        if fault == "alarm":
            signal.alarm(1)
        elif fault == "recursion limit":
            sys.setrecursionlimit(60)
        elif fault == "PATH":
            os.environ["PATH"] = "/nonexistent"
        elif fault == "closed stdio":
            os.close(1)
            os.close(2)
        elif fault == "daemon":
            daemonize()
        elif fault == "slow":
            time.sleep({slow})
        return result
"""

SESSION_FAULTS = {
    "relu-float32-5x7-none": "alarm",
    "relu-float32-5x7-tile": "recursion limit",
    "matmul-float32-13x11x7-none": "PATH",
    "matmul-float32-13x11x7-tile": "closed stdio",
    "matmul-float32-13x11x7-unroll": "daemon",
    "relu-float32-5x7-vectorize": "slow",
}
SELECT = "(relu-float32-5x7 or matmul-float32-13x11x7) and not exact"
TIMEOUT = 20  # pytest-timeout's, per case: the slow kernel takes 2 x (TIMEOUT + 1) s


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["no-xdist", "xdist-2"])
def test_faulty_kernels_leave_every_other_verdict_as_a_clean_run(
    vendor, run, pytester, workers
) -> None:
    """One session, a faulty target (alarm, recursion limit, PATH, closed stdio, a setsid
    daemon, a correct kernel too slow for ``--timeout``) beside the clean host: every
    other case's verdict is the clean one's, the timeout is an infrastructure error, no
    process is left, and the bundle verifies."""
    pytest.importorskip("pytest_timeout")
    mark = f"xtc-hygiene-{os.getpid()}-{len(workers)}"
    source = FAULTY.format(mark=mark, faults=SESSION_FAULTS, slow=TIMEOUT + 1)
    vendor("faulty_xtc", {"faulty": "faulty_adapter:Faulty"}, {"faulty_adapter": source})
    result = run("--xtc-target=faulty,host", "-k", SELECT, f"--timeout={TIMEOUT}",
                 "--timeout-method=signal", "--xtc-report=bundle", "--xtc-repeat=0", *workers)
    out = result.stdout.str()
    records = [json.loads(line)
               for line in (pytester.path / "bundle" / "results.jsonl").read_text().splitlines()]
    verdicts = {(r["target"], r["case"].split("[")[-1]): r for r in records}
    clean = {case: r["status"] for (target, case), r in verdicts.items() if target == "host"}
    faulty = {case: r for (target, case), r in verdicts.items() if target == "faulty"}
    assert clean and set(faulty) == set(clean), out
    assert set(clean.values()) == {"passed"}, out
    for case, record in faulty.items():
        if case not in SESSION_FAULTS:
            assert record["status"] == clean[case], (case, record, out)
    slow = faulty["relu-float32-5x7-vectorize"]
    assert slow["status"] == "error" and "Timeout" in slow["message"], slow
    # a daemon per kernel call (every call the suite makes, the timed one included)
    daemons = faulty["matmul-float32-13x11x7-unroll"]
    assert daemons["calls"] >= 2, daemons
    assert f"ended {daemons['calls']} processes the case left behind" in daemons["message"]
    verify = subprocess.run([sys.executable, "-m", "pytest_xtc.cli", "verify",
                             str(pytester.path / "bundle")], capture_output=True, text=True,
                            timeout=120, check=False)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert not processes_gone(mark, str(pytester.path)), "processes left behind"


STOPPED_WHILE_WAITED = """
import sys, threading, time, types
from pytest_xtc.core.workers import isolation, replies
if sys.argv[1:] == ["late"]:  # the waiting thread reads only after the stop closed the pipes
    select = replies.select.select

    def late(*args):
        ready = select(*args)
        if ready[0] and threading.current_thread() is not threading.main_thread():
            time.sleep(1.0)
        return ready

    replies.select = types.SimpleNamespace(select=late)
worker = isolation.Worker(lambda request, report: time.sleep(30))
worker.start()
found = []

def wait():
    try:
        worker.call("x", {"transfer": 60.0}, "transfer")
    except isolation.ChildFailure as exc:
        found.append(str(exc))

waiter = threading.Thread(target=wait)
waiter.start()
time.sleep(0.5)
worker.stop()  # as the session's end does while a warm-up thread still waits
waiter.join(10)
print("alive;", found)
"""


@pytest.mark.parametrize("reading", ["at once", "late"])
def test_a_worker_stopped_while_another_thread_waits_on_it_leaves_this_process_alive(
    reading: str,
) -> None:
    """The waiting thread saw the pipe close and, the pid being forgotten already, used to
    kill process group 0: its own, pytest and every xdist worker with it. Reading late, it
    read a descriptor the stop had closed (``EBADF``, its thread dead: once in CI)."""
    done = subprocess.run([sys.executable, "-c", STOPPED_WHILE_WAITED, reading.split()[-1]],
                          capture_output=True, text=True, timeout=60, start_new_session=True)
    assert done.returncode == 0 and "alive;" in done.stdout, (done.returncode, done.stderr)
    assert "stopped" in done.stdout and "ended the worker" in done.stdout
