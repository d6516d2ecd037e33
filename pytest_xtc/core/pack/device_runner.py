"""The device runner of an execution pack: Python 3 and numpy only (no XTC, no MLIR, no
pytest, no pytest_xtc). It is copied into every pack (``runner/``) and run there:

    python3 PACK/runner/device_runner.py PACK [--results DIR] [--only KEY] [--jobs N]
                                              [--deadline-s S]

Each case runs in a process of its own (``--one``; ``--jobs`` of them at a time), in a
session of its own, under the time limit the pack gives it: a crash, a hang or a sticky
device error costs that case only. What each case's call protocol
(``cases/KEY/call.json``) says is done as XTC's evaluators do it: the kernel library
loaded after its runtime libraries, the entry called with bare pointers (inputs, then
outputs), each call timed by XTC's host runtime (``evaluate_perf``) where the pack ships
it. Outputs (``.npy``; one bit for bit that of an earlier call on the same inputs names
that call's file), times, guard-band findings and errors go to ``RESULTS/KEY/``;
``RESULTS/run.json`` names the pack (the SHA-256 of its manifest), this runner's version
and every case's result digest; with ``--deadline-s`` no case starts after S seconds and
those left are named in ``run.json`` (``not_run``), so that a time-boxed run on a lent
machine still brings back what it ran. SIGTERM (an outer limit) stops the cases running
(recorded as the runner's end: infrastructure errors, never verdicts) and writes
``run.json`` with what ran. Exit status: 0 cases ran (read their results); 2 a pack
problem (named on one line); 4 no case gave a result.

Its parts, all copied into the pack beside it: ``device_pack.py`` (the manifest, checked),
``device_case.py`` (one case, in its own process), ``device_inputs.py`` (the input sets),
``device_cuda.py`` and ``device_aarch64.py`` (the kernels of other kinds than the host's).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

# The runner's other modules: beside this file, in the package or in a pack's runner/ folder.
if TYPE_CHECKING or __package__:  # imported from pytest_xtc.core.pack
    from .device_case import UNWRITTEN, Operand, run_one, unwritten
    from .device_pack import (
        FORMAT,
        MANIFEST,
        PROGRESS,
        RESULT,
        RUN,
        RUNNER_VERSION,
        UNPACKED,
        Json,
        PackProblem,
        load_json,
        read_manifest,
        sha256,
        unpack_libraries,
    )
else:  # run as a script (``-I`` puts no folder on the path): the files beside it, no package
    sys.dont_write_bytecode = True  # the runner writes nothing into the pack
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from device_case import UNWRITTEN, Operand, run_one, unwritten
    from device_pack import (
        FORMAT,
        MANIFEST,
        PROGRESS,
        RESULT,
        RUN,
        RUNNER_VERSION,
        UNPACKED,
        Json,
        PackProblem,
        load_json,
        read_manifest,
        sha256,
        unpack_libraries,
    )

__all__ = ["FORMAT", "MANIFEST", "RESULT", "RUN", "RUNNER_VERSION", "UNWRITTEN", "Operand",
           "PackProblem", "load_json", "main", "read_manifest", "run_one", "run_pack",
           "sha256", "supervise", "unwritten"]  # what the package and the tests use

START_S = 30.0  # a case process's own start-up, over its calls' limits
LOG_TAIL = 64 << 10  # bytes of a case process's output kept, its last (core/workers/output.py)
#: Set by SIGTERM (an outer time limit): the cases running are stopped and recorded as
#: the runner's end, none is started, and ``run.json`` is written with what ran.
STOPPING = threading.Event()


def _child_command(pack: Path, key: str, out: Path) -> list[str]:
    flags = [f for f, on in (("-I", sys.flags.isolated), ("-S", sys.flags.no_site),
                             ("-s", sys.flags.no_user_site and not sys.flags.isolated)) if on]
    return [sys.executable, *flags, str(Path(__file__).resolve()), "--one", str(pack), key,
            str(out)]


class OutputTail(threading.Thread):
    """A case process's fds 1 and 2, read from a pipe as it writes: the last ``LOG_TAIL``
    bytes kept, the rest counted. A kernel that writes gigabytes costs neither the
    runner's memory nor the results folder (which goes back whole to the judging side)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.read_fd, self.write_fd = os.pipe()
        self.kept, self.dropped = bytearray(), 0

    def run(self) -> None:
        with contextlib.suppress(OSError):
            while chunk := os.read(self.read_fd, 1 << 16):
                self.kept += chunk
                if len(self.kept) > LOG_TAIL:
                    self.dropped += len(self.kept) - LOG_TAIL
                    del self.kept[:-LOG_TAIL]

    def save(self, path: Path) -> None:
        """Wait for the writers' end (a process that left the case's group and kept the
        pipe: a second at most), then write the tail to ``path``."""
        self.join(timeout=1.0)
        os.close(self.read_fd)
        head = f"[{self.dropped} bytes before these dropped]\n".encode() if self.dropped else b""
        path.write_bytes(head + bytes(self.kept))


def supervise(pack: Path, key: str, case: Json, out: Path) -> Json:
    """Run case ``key`` in its own process; its result, whatever happened to it."""
    out.mkdir(parents=True)
    limit = START_S + sum(case["limits_s"])
    result: Json = {"case": case["id"], "key": key, "call_sha256": case["call_sha256"]}
    stopped = False
    log = OutputTail()
    try:
        proc = subprocess.Popen(_child_command(pack, key, out), start_new_session=True,
                                stdout=log.write_fd, stderr=subprocess.STDOUT)
    finally:
        os.close(log.write_fd)
    log.start()
    ends = time.monotonic() + limit
    code: int | None = None
    while code is None and not (stopped := STOPPING.is_set()):
        try:
            code = proc.wait(timeout=max(0.0, min(0.25, ends - time.monotonic())))
        except subprocess.TimeoutExpired:
            if time.monotonic() >= ends:
                break
    if code is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    progress = (out / PROGRESS).read_text() if (out / PROGRESS).is_file() else "start"
    child = out / "child.json"
    if code == 0 and child.is_file():
        result.update(load_json(child))
        child.unlink()
    elif stopped:  # the runner's own end (SIGTERM: its time limit), not the kernel's
        result.update(status="error", phase="run", infrastructure=True, type="Stopped",
                      error=f"stopped: the runner was ended (SIGTERM) at {progress}")
    elif code is None:
        result.update(status="timeout", phase="run", error=f"over {limit:.0f} s at {progress}")
    elif code < 0:
        result.update(status="signal", phase="run", signal=signal.Signals(-code).name,
                      error=f"killed by {signal.Signals(-code).name} at {progress}")
    else:
        result.update(status="exit", phase="run", code=code,
                      error=f"exited with status {code} at {progress}")
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # anything the case left behind
    log.save(out / "stdout.txt")
    result["files"] = {p.name: sha256(p) for p in sorted(out.glob("*.npy"))}
    (out / RESULT).write_text(json.dumps(result, indent=1))
    return result


def interleaved(keys: list[str], cases: Json) -> list[str]:
    """``keys`` taking each op family in turn (the first word of the case's id), in their
    order within a family: a deadline then leaves a few cases of every family not run,
    never a whole family (the manifest's order groups them)."""
    families: dict[str, list[str]] = {}
    for key in keys:
        families.setdefault(str(cases[key]["id"]).split("-")[0], []).append(key)
    queues = list(families.values())
    return [queue[n] for n in range(max(map(len, queues), default=0))
            for queue in queues if n < len(queue)]


def run_pack(pack: Path, results: Path, only: list[str], jobs: int = 1,
             deadline_s: float | None = None) -> int:
    """Every packed case (or those of ``only``), ``jobs`` case processes at a time, the op
    families in turn (:func:`interleaved`); none started after ``deadline_s`` seconds."""
    from concurrent.futures import ThreadPoolExecutor

    manifest, pack_id = read_manifest(pack)
    cases: Json = manifest["cases"]
    unknown = sorted(set(only) - set(cases))
    if unknown:
        raise PackProblem(f"--only {unknown[0]}: not a case of this pack")
    if results.exists() and any(results.iterdir()):
        raise PackProblem(f"{results}: not empty (remove it, or give another --results)")
    results.mkdir(parents=True, exist_ok=True)
    unpack_libraries(pack, manifest, results / UNPACKED)
    wanted = [k for k, c in cases.items() if c.get("packed") and (not only or k in only)]
    chosen = interleaved(wanted, cases)
    start = time.perf_counter()

    def one(key: str) -> tuple[str, str]:
        late = deadline_s is not None and time.perf_counter() - start > deadline_s
        if late or STOPPING.is_set():
            return key, ""
        result = supervise(pack, key, cases[key], results / key)
        print(f"{result['status']:8} {cases[key]['id']}", flush=True)
        return key, sha256(results / key / RESULT)

    previous = signal.signal(signal.SIGTERM, lambda *_: STOPPING.set())
    try:
        with ThreadPoolExecutor(max(1, jobs)) as pool:
            ran = sorted(pool.map(one, chosen))
    finally:
        signal.signal(signal.SIGTERM, previous)
    digests = {key: digest for key, digest in ran if digest}
    here = Path(__file__).resolve().parent
    run = {"format": FORMAT, "runner_version": RUNNER_VERSION, "pack_id": pack_id,
           "runner_sha256": {p.name: sha256(p) for p in sorted(here.glob("device_*.py"))},
           "cases": digests, "not_run": [key for key, digest in ran if not digest],
           "deadline_s": deadline_s, "seconds": time.perf_counter() - start, "jobs": jobs,
           "python": sys.version.split()[0], "numpy": np.__version__}
    (results / RUN).write_text(json.dumps(run, indent=1))
    return 0 if digests else 4


def main(argv: list[str]) -> int:
    sys.dont_write_bytecode = True  # the runner writes nothing into the pack
    if argv[:1] == ["--one"]:
        return run_one(Path(argv[1]), argv[2], Path(argv[3]))
    if not argv or argv[0].startswith("-"):
        print("usage: device_runner.py PACK [--results DIR] [--only KEY ...] [--jobs N] "
              "[--deadline-s S]",
              file=sys.stderr)
        return 2
    pack, rest = Path(argv[0]), argv[1:]
    results, only, jobs, deadline_s = pack / "results", [], 1, None
    while rest:
        flag, value, rest = rest[0], rest[1] if len(rest) > 1 else "", rest[2:]
        if flag == "--results" and value:
            results = Path(value)
        elif flag == "--only" and value:
            only.append(value)
        elif flag == "--jobs" and value.isdigit() and int(value) > 0:
            jobs = int(value)
        elif flag == "--deadline-s" and value.replace(".", "", 1).isdigit():
            deadline_s = float(value)
        else:
            print(f"device_runner.py: {flag}: unknown option or missing value", file=sys.stderr)
            return 2
    try:
        return run_pack(pack, results, only, jobs, deadline_s)
    except PackProblem as exc:
        print(f"device_runner.py: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
