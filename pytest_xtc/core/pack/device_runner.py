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
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

RUNNER_VERSION = "1"
FORMAT = "pytest-xtc-pack/1"
MANIFEST = "manifest.json"
RUN = "run.json"
RESULT = "result.json"
PROGRESS = "progress"
UNPACKED = ".libs"  # in the results folder: the compressed runtime libraries, unpacked
START_S = 30.0  # a case process's own start-up, over its calls' limits
UNWRITTEN = {"float16": (np.uint16, 0x7D5A), "float32": (np.uint32, 0x7FA5A5A5),
             "float64": (np.uint64, 0x7FF5A5A5A5A5A5A5)}  # core/cases/values.py's sentinel
ALIGN, MIN_BAND, MAX_BAND = 256, 4096, 1 << 20  # core/execution/guard.py's bands
AARCH64 = "aarch64-bare"  # device_aarch64.py: run by device_call, under QEMU off AArch64
LOG_TAIL = 64 << 10  # bytes of a case process's output kept, its last (core/workers/output.py)
Json = dict[str, Any]
#: Set by SIGTERM (an outer time limit): the cases running are stopped and recorded as
#: the runner's end, none is started, and ``run.json`` is written with what ran.
STOPPING = threading.Event()


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class PackProblem(Exception):
    """The pack is not whole or not this runner's: exit status 2."""


def _unique(pairs: list[tuple[str, Any]]) -> Json:
    found: Json = {}
    for key, value in pairs:
        if key in found:  # readers differ on which value counts: refuse, never pick
            raise ValueError(f"key {key!r} given twice")
        found[key] = value
    return found


def load_json(path: Path) -> Any:
    """``path``'s JSON, an object naming a key twice refused (``ValueError``)."""
    return json.loads(path.read_text(), object_pairs_hook=_unique)


def read_manifest(pack: Path) -> tuple[Json, str]:
    """The manifest and the pack's id (its SHA-256); every file it lists checked."""
    path = pack / MANIFEST
    if not path.is_file():
        raise PackProblem(f"{path}: no manifest (not an execution pack)")
    try:
        manifest: Json = load_json(path)
    except ValueError as exc:
        raise PackProblem(f"{path}: not a manifest ({exc})") from None
    if manifest.get("format") != FORMAT:
        raise PackProblem(f"{path}: format {manifest.get('format')!r}, expected {FORMAT}")
    for name, digest in manifest["files"].items():
        file = pack / name
        if not file.is_file() or sha256(file) != digest:
            raise PackProblem(f"{file}: missing or not the file the manifest names (sha256)")
    return manifest, sha256(path)


# -- one case, in a process of its own ------------------------------------------------------


def unwritten(shape: Any, dtype: str) -> np.ndarray:
    array = np.empty(tuple(shape), dtype)
    uint, bits = UNWRITTEN[np.dtype(dtype).name]
    array.view(uint)[...] = bits
    return array


class Operand:
    """One operand as the kernel gets it: a plain copy, or a view inside sentinel bands."""

    def __init__(self, name: str, array: np.ndarray, guarded: bool) -> None:
        self.name, self.band = name, 0
        if not guarded:
            self.buffer = self.view = np.require(array.copy(), requirements="C")
            return
        item, shape = array.dtype.itemsize, array.shape
        plane = int(np.prod(shape[-2:])) if shape else 1
        row = int(shape[-1]) if shape else 1
        band = max(min(plane, MAX_BAND // item), row, -(-MIN_BAND // item))
        self.band = band = -(-band // (ALIGN // item)) * (ALIGN // item)
        total = 2 * band + array.size
        raw = np.empty(total * item + ALIGN, np.uint8)
        shift = (-raw.ctypes.data) % ALIGN
        self.buffer = raw[shift : shift + total * item].view(array.dtype)
        self.buffer[...] = unwritten(self.buffer.shape, array.dtype.name)
        self.view = self.buffer[band : band + array.size].reshape(shape)
        np.copyto(self.view, array)

    def violations(self) -> list[str]:
        """Writes outside the view, in guard.py's words."""
        if not self.band:
            return []
        uint, bits = UNWRITTEN[self.buffer.dtype.name]
        size, found = self.view.size, []
        before = self.buffer[: self.band].view(uint) == uint(bits)
        after = self.buffer[self.band + size :].view(uint) == uint(bits)
        if not before.all():
            changed = np.flatnonzero(~before)
            found.append(f"wrote {changed.size} element(s) before the start of {self.name} "
                         f"(up to {self.band - int(changed[0])} before it)")
        if not after.all():
            changed = np.flatnonzero(~after)
            found.append(f"wrote {changed.size} element(s) past the end of {self.name} "
                         f"(up to {int(changed[-1]) + 1} past it)")
        return found


def library(pack: Path, name: str, unpacked: Path) -> Path:
    """Where runtime library ``name`` (relative to the pack) is: an xz-compressed one is
    unpacked once, by the supervisor, into ``unpacked``."""
    return unpacked / Path(name).name[:-3] if name.endswith(".xz") else pack / name


def unpack_libraries(pack: Path, manifest: Json, unpacked: Path) -> None:
    import lzma

    for name in manifest["files"]:
        if name.endswith(".xz"):
            unpacked.mkdir(parents=True, exist_ok=True)
            library(pack, name, unpacked).write_bytes(lzma.decompress((pack / name).read_bytes()))


class HostKernel:
    """``host-bare``: XTC's host shared library, timed by XTC's host runtime."""

    def __init__(self, case_dir: Path, call: Json, loaded: list[ctypes.CDLL]) -> None:
        self.timer = loaded[call["timer"]].evaluate_perf
        self.timer.restype = None
        self.timer.argtypes = [ctypes.POINTER(ctypes.c_double), ctypes.c_int,
                               ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_int,
                               ctypes.c_int, ctypes.CFUNCTYPE(ctypes.c_void_p),
                               ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
        self.library = ctypes.CDLL(str(case_dir / call["library"]))
        self.entry = ctypes.cast(getattr(self.library, call["entry"]),
                                 ctypes.CFUNCTYPE(ctypes.c_void_p))

    def __call__(self, operands: list[Operand], timing: Json) -> list[float]:
        repeat = int(timing["repeat"])
        results = (ctypes.c_double * repeat)()
        args = (ctypes.c_void_p * len(operands))(*[o.view.ctypes.data for o in operands])
        self.timer(results, 0, None, repeat, int(timing["number"]),
                   int(timing["min_repeat_ms"]), self.entry, args, len(operands))
        return [float(t) for t in results]


def _sibling(name: str) -> Any:
    """The runner's module ``name``, from the file beside this one (no package needed)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def kernel_for(case_dir: Path, call: Json, loaded: list[ctypes.CDLL], paths: list[Path],
               out: Path) -> Any:
    if call["kind"] == AARCH64:
        return _sibling("device_aarch64").Aarch64Kernel(case_dir, call, paths, out)
    if call["kind"] == "host-bare":
        return HostKernel(case_dir, call, loaded)
    if call["kind"] == "cuda-bare":
        return _sibling("device_cuda").CudaKernel(case_dir, call, loaded)
    raise ValueError(f"unknown kernel kind {call['kind']!r} (a newer pack than this runner?)")


def run_one(pack: Path, key: str, out: Path) -> int:
    """Every call of case ``key``; what it gave into ``out``. Exit status 0 when it ran."""
    case_dir = pack / "cases" / key
    call = load_json(case_dir / "call.json")
    progress = out / PROGRESS
    result: Json = {"status": "error", "phase": "run", "calls": []}
    stage = "runtime"  # the runtime libraries and the inputs: this machine's, not the target's
    try:
        progress.write_text(stage)
        paths = [library(pack, lib, out.parent / UNPACKED) for lib in call["runtime"]]
        loaded = [] if call["kind"] == AARCH64 else [  # another ISA's: loaded over there
            ctypes.CDLL(str(p), mode=ctypes.RTLD_GLOBAL) for p in paths]
        progress.write_text(stage := "inputs")
        sets = _sibling("device_inputs").input_sets(call, case_dir)
        progress.write_text(stage := "load")
        kernel = kernel_for(case_dir, call, loaded, paths, out)
        saved: dict[tuple[int, int], tuple[str, bytes]] = {}  # (set, output): first file
        for n, step in enumerate(call["calls"]):
            progress.write_text(f"call {n}")
            given = sets[step["set"]]
            ins = [Operand(i["name"], a, call["guarded"])
                   for i, a in zip(call["inputs"], given, strict=True)]
            outs = [Operand(o["name"], unwritten(o["shape"], o["dtype"]), call["guarded"])
                    for o in call["outputs"]]
            start = time.perf_counter()
            times = kernel([*ins, *outs], step["timing"])
            took = time.perf_counter() - start
            done: Json = {"times": times, "wall_s": took, "outputs": [], "inputs_left": [],
                          "guard": [v for o in [*ins, *outs] for v in o.violations()]}
            for i, o in enumerate(outs):
                name, data = f"call{n}-out{i}.npy", o.view.tobytes()
                same = saved.get((step["set"], i))  # an earlier call's, on the same inputs
                if same is not None and same[1] == data:
                    name = same[0]  # bit for bit that call's outputs: its file, not a copy
                else:
                    np.save(out / name, o.view)
                    saved.setdefault((step["set"], i), (name, data))
                done["outputs"].append(name)
            for i, (o, a) in enumerate(zip(ins, given, strict=True)):
                left = None
                if o.view.tobytes() != np.ascontiguousarray(a).tobytes():
                    left = f"call{n}-in{i}.npy"
                    np.save(out / left, o.view)
                done["inputs_left"].append(left)
            result["calls"].append(done)
        result.update(status="ok", phase="check")
    except Exception as exc:
        name = type(exc).__name__
        result.update(error=f"{name}: {exc}", type=name,
                      infrastructure=stage != "load" or name == "Unavailable")
    (out / "child.json").write_text(json.dumps(result))
    return 0


# -- the supervisor: every case, one process each ---------------------------------------------


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
