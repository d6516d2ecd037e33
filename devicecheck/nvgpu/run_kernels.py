"""Run the nvgpu device check's kernels and compare them with float64 numpy references.

Needs Python 3 and numpy only: no XTC, no MLIR bindings, no pytest_xtc (XTC's own runtime
cannot be imported on the GPU machine: ``import xtc`` needs its distribution metadata, a
findable libomp, an MLIR prefix, and builds a host runtime against libcupti/libcudart).
This driver makes, through ctypes and in the same order, the calls XTC's GPU evaluator
makes (xtc/runtimes/accelerator/gpu/GPUDevice.py, xtc/targets/accelerator/gpu/
GPUEvaluator.py, xtc/runtimes/types/ndarray.py, xtc/utils/cfunc.py):

  1. load libmlir_cuda_runtime.so; stream = mgpuStreamCreate()
  2. copy every operand into a buffer of its own, aligned_alloc(256, ...) as XTC's CNDArray
     does; a device-placed operand then gets mgpuMemAlloc(n, stream, true), mgpuMemcpy and
     mgpuStreamSynchronize
  3. dlopen kernel.so (its constructor loads the gpu.binary: mgpuModuleLoad)
  4. mgpuMemHostRegister(buffer, n) for every host-placed operand
  5. entry(void *in0, ..., void *out0): bare pointers, inputs then outputs
  6. device outputs: mgpuMemcpy back and synchronize
  7. mgpuMemHostUnregister

  run_kernels.py --mode gpu  --libdir DIR --out FILE  # the nvgpu kernels on the GPU
  run_kernels.py --mode host --libdir DIR --out FILE  # self-test: host builds of the same
                                                      # cases, a stand-in CUDA runtime

The bundle (``--bundle``, default ``build/`` beside this file) is what build.py wrote.
Each case runs in a process of its own under ``timeout``. Exit status: 0 the cases ran
(whatever their verdict: read the verdict line or the JSON's "summary"); 2 bundle problem;
3 no usable GPU, driver or runtime (preflight); 4 no case produced a result, or the control
kernel did not pass.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
XTC_ALIGN = 256  # xtc/csrcs/runtimes/host/cndarray.c DEFAULT_ALIGNMENT
PAGE_ALIGN = 4096
CUDA_ERROR = re.compile(r"'(.+)' failed with '([A-Z_0-9<>a-z]+)'")
# Breaking the driver on purpose shows that the host self-test catches a broken driver.
SABOTAGES = ("swap_inputs", "no_copy_in", "no_copy_out")
MOCK_COUNTERS = ("stream_create", "stream_sync", "mem_alloc", "mem_free", "memcpy",
                 "host_register", "host_unregister")  # mock_mgpu.c's order
Json = dict[str, Any]


def load_manifest(bundle: Path) -> Json:
    manifest: Json = json.loads((bundle / "manifest.json").read_text())
    return manifest


# -- the worker: one case in this process ------------------------------------------------


@dataclass(frozen=True)
class Options:
    mode: str  # "gpu" or "host"
    bundle: Path
    libdir: Path
    align: int
    min_time: float
    sabotage: str | None


class Runtime:
    """libmlir_cuda_runtime.so's entry points (or the stand-in's), typed as XTC's GPUDevice
    types them."""

    def __init__(self, path: Path) -> None:
        self.lib = ctypes.cdll.LoadLibrary(str(path))  # as XTC's LibLoader loads it
        lib = self.lib
        lib.mgpuStreamCreate.argtypes, lib.mgpuStreamCreate.restype = [], ctypes.c_void_p
        lib.mgpuMemAlloc.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_bool]
        lib.mgpuMemAlloc.restype = ctypes.c_void_p
        lib.mgpuMemFree.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.mgpuMemFree.restype = None
        lib.mgpuMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64,
                                   ctypes.c_void_p]
        lib.mgpuMemcpy.restype = None
        lib.mgpuStreamSynchronize.argtypes = [ctypes.c_void_p]
        lib.mgpuStreamSynchronize.restype = None
        # XTC calls mgpuMemHostRegister and mgpuMemHostUnregister untyped.
        self.stream: int | None = lib.mgpuStreamCreate()

    def alloc(self, nbytes: int) -> int | None:
        pointer: int | None = self.lib.mgpuMemAlloc(nbytes, self.stream, True)
        return pointer

    def free(self, pointer: int) -> None:
        self.lib.mgpuMemFree(pointer, self.stream)

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        self.lib.mgpuMemcpy(dst, src, nbytes, self.stream)
        self.lib.mgpuStreamSynchronize(self.stream)

    def register(self, pointer: int, nbytes: int) -> None:
        self.lib.mgpuMemHostRegister(ctypes.c_void_p(pointer), ctypes.c_int64(nbytes))

    def unregister(self, pointer: int) -> None:
        self.lib.mgpuMemHostUnregister(ctypes.c_void_p(pointer))


def libc() -> ctypes.CDLL:
    lib = ctypes.CDLL(None)
    lib.aligned_alloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
    lib.aligned_alloc.restype = ctypes.c_void_p
    lib.free.argtypes, lib.free.restype = [ctypes.c_void_p], None
    return lib


class HostBuffer:
    """A buffer allocated as XTC's CNDArray allocates it (aligned_alloc), seen by numpy."""

    def __init__(self, shape: Sequence[int], dtype: str, align: int, lib: ctypes.CDLL) -> None:
        self.nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        pointer = lib.aligned_alloc(align, -(-self.nbytes // align) * align)
        if not pointer:
            raise MemoryError(f"aligned_alloc({align}, {self.nbytes}) failed")
        self.pointer: int = pointer
        raw = memoryview((ctypes.c_char * self.nbytes).from_address(pointer)).cast("B")
        self.array = np.frombuffer(raw, dtype=dtype).reshape(shape)


def scaled_error(out: np.ndarray, ref: np.ndarray, scale: np.ndarray) -> tuple[float, float, int]:
    """(max |out-ref|/scale, max |out-ref|, number of non-finite outputs)."""
    out64 = out.astype(np.float64)
    nonfinite = int(np.count_nonzero(~np.isfinite(out64)))
    if nonfinite:
        return float("inf"), float("inf"), nonfinite
    diff = np.abs(out64 - ref)
    relative = diff / np.maximum(scale, float(np.finfo(np.float32).tiny))
    return float(relative.max(initial=0.0)), float(diff.max(initial=0.0)), 0


def run_case(case: Json, options: Options, result: Json) -> None:
    """Run ``case`` once, check it, time it, check it again; fills ``result`` as it goes
    (its "stage" says how far it got when something raised)."""
    case_dir = options.bundle / "cases" / case["name"]
    sabotage = options.sabotage
    result.update(name=case["name"], mode=options.mode, align=options.align, stage="runtime")
    if sabotage:
        result["sabotage"] = sabotage
    if options.mode == "gpu":
        runtime_path = options.libdir / "libmlir_cuda_runtime.so"
        try:
            runtime = Runtime(runtime_path)
        except OSError as exc:
            raise OSError(f"cannot load {runtime_path}: {exc} (it needs libLLVM.so beside "
                          "it and the NVIDIA driver's libcuda.so.1)") from None
    else:
        runtime = Runtime(options.bundle / "selftest" / "libmock_mgpu.so")
    result["stream"] = bool(runtime.stream)

    result["stage"] = "buffers"
    c_lib = libc()
    buffers: list[HostBuffer] = []
    device_pointers: list[int | None] = []
    args: list[int] = []
    for operand in case["operands"]:
        buffer = HostBuffer(operand["shape"], operand["dtype"], options.align, c_lib)
        is_input = operand["role"] == "in"
        if is_input:
            buffer.array[...] = np.load(case_dir / operand["file"])
        else:
            buffer.array[...] = np.nan  # whatever the kernel does not write shows
        device = None
        if operand["on_device"]:
            device = runtime.alloc(buffer.nbytes)
            if not device:
                raise RuntimeError(f"mgpuMemAlloc({buffer.nbytes}) returned NULL")
            if not (sabotage == "no_copy_in" and is_input):
                runtime.copy(device, buffer.pointer, buffer.nbytes)
        buffers.append(buffer)
        device_pointers.append(device)
        args.append(device if device is not None else buffer.pointer)
    if sabotage == "swap_inputs":
        args[0], args[1] = args[1], args[0]
    ref = np.load(case_dir / case["ref"])
    scale = np.load(case_dir / case["scale"])
    (out_index,) = [i for i, op in enumerate(case["operands"]) if op["role"] == "out"]

    def fetch_output() -> np.ndarray:
        device, buffer = device_pointers[out_index], buffers[out_index]
        if device is not None and sabotage != "no_copy_out":
            runtime.copy(buffer.pointer, device, buffer.nbytes)
        return buffer.array.copy()

    result["stage"] = "load"
    started = time.perf_counter()
    if case["kind"] == "control":
        call = control_launcher(case, case_dir, runtime, args)
    else:
        kernel = (options.bundle / case["selftest_kernel"] if options.mode == "host"
                  else case_dir / "kernel.so")
        function = getattr(ctypes.cdll.LoadLibrary(str(kernel)), case["entry"])
        address = ctypes.cast(function, ctypes.c_void_p).value
        assert address, case["entry"]
        bare = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * len(args)))(address)
        c_args = [ctypes.c_void_p(a) for a in args]

        def call() -> None:
            bare(*c_args)
    result["load_ms"] = (time.perf_counter() - started) * 1e3

    result["stage"] = "register"
    registered = [b for b, d in zip(buffers, device_pointers, strict=True) if d is None]
    if case["kind"] != "control":
        for buffer in registered:
            runtime.register(buffer.pointer, buffer.nbytes)

    result["stage"] = "first call"
    started = time.perf_counter()
    call()
    result["first_call_ms"] = (time.perf_counter() - started) * 1e3
    result["stage"] = "check"
    out = fetch_output()
    err, abs_err, nonfinite = scaled_error(out, ref, scale)
    result.update(err_first=err, max_abs_err=abs_err, nonfinite=nonfinite)

    result["stage"] = "timing"
    times: list[float] = []
    stop = time.perf_counter() + options.min_time
    while len(times) < 3 or (time.perf_counter() < stop and len(times) < 200):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    result.update(calls_timed=len(times), median_ms=float(np.median(times) * 1e3),
                  min_ms=float(np.min(times) * 1e3))
    err_last, _, nonfinite_last = scaled_error(fetch_output(), ref, scale)
    result.update(err_last=err_last, nonfinite_last=nonfinite_last)
    result["status"] = "PASS" if max(err, err_last) <= case["bound"] else "FAIL"
    if result["status"] == "FAIL":
        diff = np.abs(out.astype(np.float64) - ref)
        diff[~np.isfinite(diff)] = np.inf
        worst = np.unravel_index(int(np.argmax(diff)), diff.shape)
        result["worst"] = {"index": [int(i) for i in worst], "got": float(out[worst]),
                           "ref": float(ref[worst])}
        result["wrong_fraction"] = float(np.mean(diff / np.maximum(scale, 1e-30) > case["bound"]))

    result["stage"] = "cleanup"
    if case["kind"] != "control":
        for buffer in registered:
            runtime.unregister(buffer.pointer)
    for device in device_pointers:
        if device is not None:
            runtime.free(device)
    if options.mode == "host":
        result["mock_calls"] = {name: runtime.lib.mock_calls(i)
                                for i, name in enumerate(MOCK_COUNTERS)}
    result["stage"] = "done"


def control_launcher(case: Json, case_dir: Path, runtime: Runtime, args: list[int]
                     ) -> Callable[[], None]:
    """A launch of the control kernel through the runtime entry points XTC's kernels call,
    typed as in the lowered IR: mgpuModuleLoad(ptr, i64), mgpuModuleGetFunction(ptr, ptr),
    mgpuLaunchKernel(ptr, i64 x6, i32, ptr, ptr, ptr, i64)."""
    lib = runtime.lib
    lib.mgpuModuleLoad.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    lib.mgpuModuleLoad.restype = ctypes.c_void_p
    lib.mgpuModuleGetFunction.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.mgpuModuleGetFunction.restype = ctypes.c_void_p
    lib.mgpuLaunchKernel.argtypes = [ctypes.c_void_p, *[ctypes.c_int64] * 6, ctypes.c_int32,
                                     ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                     ctypes.c_size_t]
    lib.mgpuLaunchKernel.restype = None
    blob = (case_dir / case["cubin"]).read_bytes()
    image = ctypes.create_string_buffer(blob, len(blob))
    module = lib.mgpuModuleLoad(ctypes.cast(image, ctypes.c_void_p), len(blob))
    if not module:
        raise RuntimeError("mgpuModuleLoad returned NULL (see the CUDA error above)")
    function = lib.mgpuModuleGetFunction(module, case["entry"].encode())
    if not function:
        raise RuntimeError(f"mgpuModuleGetFunction({case['entry']}) returned NULL")
    values: list[Any] = [ctypes.c_void_p(a) for a in args] + [ctypes.c_int32(case["n"])]
    params = (ctypes.c_void_p * len(values))(
        *[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values])
    grid = -(-case["n"] // case["block"])

    def call() -> None:
        _ = (image, values, params)  # alive as long as the launcher
        lib.mgpuLaunchKernel(function, grid, 1, 1, case["block"], 1, 1, 0, runtime.stream,
                             params, None, len(values))
        lib.mgpuStreamSynchronize(runtime.stream)

    return call


def worker(case_name: str, options: Options, result_file: Path) -> int:
    """Run one case in this process; its result goes to ``result_file``."""
    case = next(c for c in load_manifest(options.bundle)["cases"] if c["name"] == case_name)
    result: Json = {"name": case_name}
    try:
        run_case(case, options, result)
    except Exception as exc:  # reported in the result, not raised
        result["status"] = "ERROR"
        result["error"] = f"{type(exc).__name__} at stage {result.get('stage')!r}: {exc}"
        print(f"devicecheck worker: {case_name}: {result['error']}", file=sys.stderr)
    result_file.write_text(json.dumps(result))
    return 0


# -- preflight: is there a usable GPU, driver and runtime? -------------------------------

CU_DEVICE_ATTRIBUTES = {
    "compute_capability_major": 75, "compute_capability_minor": 76, "unified_addressing": 41,
    "managed_memory": 83, "pageable_memory_access": 88,
    "can_use_host_pointer_for_registered_mem": 91,
    "pageable_memory_access_uses_host_page_tables": 100,
}


def cu_error_name(cuda: ctypes.CDLL, code: int) -> str:
    name = ctypes.c_char_p()
    try:
        cuda.cuGetErrorName(code, ctypes.byref(name))
    except (AttributeError, OSError):
        return "?"
    return (name.value or b"?").decode()


def gpu_facts(libdir: Path) -> Json:
    """The driver, the first GPU and its attributes; "ok" when the bundled runtime makes a
    stream on it, else "error" says what is missing."""
    info: Json = {"ok": False}
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        info["error"] = (f"cannot load libcuda.so.1 (the NVIDIA driver library): {exc}. "
                         "No NVIDIA driver on this machine, or it is not on the loader path.")
        return info
    code = cuda.cuInit(0)
    if code != 0:
        info["error"] = f"cuInit(0) failed with CUresult {code} ({cu_error_name(cuda, code)})"
        return info
    driver_version, count = ctypes.c_int(), ctypes.c_int()
    cuda.cuDriverGetVersion(ctypes.byref(driver_version))
    cuda.cuDeviceGetCount(ctypes.byref(count))
    major, minor = divmod(driver_version.value, 1000)
    info["driver_cuda_version"] = f"{major}.{minor // 10}"
    info["device_count"] = count.value
    if count.value < 1:
        info["error"] = "cuDeviceGetCount: no CUDA device visible"
        return info
    device = ctypes.c_int()
    cuda.cuDeviceGet(ctypes.byref(device), 0)
    name = ctypes.create_string_buffer(256)
    cuda.cuDeviceGetName(name, 256, device)
    info["device0"] = name.value.decode(errors="replace")
    for key, attribute in CU_DEVICE_ATTRIBUTES.items():
        value = ctypes.c_int(-1)
        cuda.cuDeviceGetAttribute(ctypes.byref(value), attribute, device)
        info[key] = value.value
    info["compute_capability"] = (f"{info['compute_capability_major']}."
                                  f"{info['compute_capability_minor']}")
    try:
        runtime = Runtime(libdir / "libmlir_cuda_runtime.so")
    except OSError as exc:
        info["error"] = f"the bundled libmlir_cuda_runtime.so does not load: {exc}"
        return info
    if not runtime.stream:
        info["error"] = ("the bundled libmlir_cuda_runtime.so loads but mgpuStreamCreate "
                         "gives no stream (its CUDA errors are in preflight's stderr)")
        return info
    info["ok"] = True
    return info


def preflight(libdir: Path, result_file: Path) -> int:
    result_file.write_text(json.dumps(gpu_facts(libdir)))
    return 0


# -- the orchestrator --------------------------------------------------------------------


def spawn(argv: list[str], timeout: float, env: dict[str, str]) -> tuple[int, str, str, float]:
    """This script with ``argv`` in a process of its own under ``timeout``: (exit status,
    stdout, stderr, wall seconds); 124 when it ran out of time."""
    started = time.perf_counter()
    command = [sys.executable, str(Path(__file__).resolve()), *argv]
    if shutil.which("timeout"):
        command = ["timeout", "-k", "5", str(int(timeout)), *command]
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env,
                              timeout=timeout + 15, check=False)
        code, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        code, out, err = 124, str(exc.stdout or ""), str(exc.stderr or "")
    return code, out, err, time.perf_counter() - started


def run_one(case: Json, options: Options, env: dict[str, str], tmp: Path, timeout: float
            ) -> Json:
    """One case in a worker process: its result, or what became of the worker."""
    result_file = tmp / f"{case['name']}.{options.align}.json"
    result_file.unlink(missing_ok=True)
    argv = ["--worker", case["name"], "--mode", options.mode, "--bundle", str(options.bundle),
            "--libdir", str(options.libdir), "--align", str(options.align),
            "--min-time", str(options.min_time), "--result", str(result_file)]
    if options.sabotage:
        argv += ["--sabotage", options.sabotage]
    code, out, err, wall = spawn(argv, timeout, env)
    if result_file.exists():
        result: Json = json.loads(result_file.read_text())
    elif code in (124, 137):
        result = {"name": case["name"], "status": "TIMEOUT",
                  "error": f"no result within {int(timeout)}s (killed by timeout)"}
    else:
        signal = -code if code < 0 else (code - 128 if code > 128 else None)
        result = {"name": case["name"], "status": "CRASH",
                  "error": f"worker exited with status {code}"
                           + (f" (signal {signal})" if signal else "")}
    result["wall_s"] = round(wall, 2)
    result["exit_status"] = code
    errors = CUDA_ERROR.findall(err)
    if errors:
        result["cuda_errors"] = sorted({f"{call.split('(')[0]}: {name}" for call, name in errors})
    result["stderr_tail"] = err[-2000:]
    result["stdout_tail"] = out[-500:]
    return result


def case_line(case: Json, result: Json) -> str:
    """One line per case: error, bound, status, expectation, timing, CUDA errors."""
    status = result.get("status", "ERROR")
    err = result.get("err_first")
    if result.get("err_last") is not None and err is not None:
        err = max(err, result["err_last"])
    expected = "PASS" if case["expect"] == "pass" else "FAIL"
    verdict = "ok-rejected" if expected == "FAIL" else "ok"
    if status != expected:
        verdict = "UNEXPECTED"
    shown_err = "n/a" if err is None else f"{err:.3g}"
    median = result.get("median_ms")
    timing = "       n/a" if median is None else f"{median:8.3f}ms"
    extra = ""
    if result.get("cuda_errors"):
        names = result["cuda_errors"]
        more = f",+{len(names) - 3} more" if len(names) > 3 else ""
        extra += f" cuda_errors={','.join(names[:3])}{more}"
    if result.get("error"):
        extra += f" error={result['error'][:160]}"
    if result.get("retry_page_aligned"):
        retry = result["retry_page_aligned"]
        extra += f" [retry page-aligned: {retry.get('status')} err={retry.get('err_first')}]"
    return (f"{case['name']:38s} err={shown_err:>9s} bound={case['bound']:.3g} {status:7s} "
            f"expect={expected:4s} {verdict:10s} t={timing} "
            f"wall={result.get('wall_s', 0):5.1f}s{extra}")


def summarize(results: list[Json]) -> Json:
    real = [r for r in results if r["kind"] == "xtc" and r["expect"] == "pass"]
    faulty = [r for r in results if r["expect"] == "fail"]
    return {
        "real_cases": len(real),
        "real_pass": sum(r.get("status") == "PASS" for r in real),
        "real_not_pass": [r["name"] for r in real if r.get("status") != "PASS"],
        "faulty_cases": len(faulty),
        "faulty_not_rejected": [r["name"] for r in faulty if r.get("status") != "FAIL"],
        "control": [r.get("status") for r in results if r["kind"] == "control"],
    }


def verdict_of(summary: Json, mode: str) -> str:
    real, passed = summary["real_cases"], summary["real_pass"]
    faulty, missed = summary["faulty_cases"], summary["faulty_not_rejected"]
    control = "" if mode == "host" else f"; control kernel {summary['control'][0]}"
    if not summary["real_not_pass"] and not missed:
        return (f"ALL GOOD: {passed}/{real} XTC kernels correct, "
                f"{faulty}/{faulty} faulty cases rejected{control}")
    wrong = summary["real_not_pass"]
    return (f"PROBLEMS: {passed}/{real} XTC kernels correct"
            + (f" (not: {', '.join(wrong)})" if wrong else "")
            + (f"; faulty cases NOT rejected: {', '.join(missed)}" if missed
               else f"; {faulty}/{faulty} faulty cases rejected")
            + control)


def orchestrate(options: Options, out_path: Path, only: list[str] | None, case_timeout: float,
                deadline_s: float, tmp_dir: str | None) -> int:
    started = time.perf_counter()
    try:
        manifest = load_manifest(options.bundle)
    except (OSError, ValueError) as exc:
        print(f"devicecheck: cannot read {options.bundle / 'manifest.json'}: {exc}",
              file=sys.stderr)
        return 2
    if options.mode == "gpu" and manifest.get("selftest_only"):
        print(f"devicecheck: {options.bundle} was built with --selftest-only: no GPU kernels",
              file=sys.stderr)
        return 2
    tmp = Path(tmp_dir or tempfile.mkdtemp(prefix="devicecheck."))
    tmp.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        filter(None, [str(options.libdir), env.get("LD_LIBRARY_PATH")]))
    report: Json = {
        "mode": options.mode, "host": platform.node(), "python": sys.version.split()[0],
        "numpy": np.__version__, "cpu": cpu_model(), "manifest_built": manifest.get("built"),
        "versions": manifest.get("versions"), "arch": manifest.get("arch"),
        "tolerance": manifest.get("tolerance"),
    }
    if options.sabotage:
        report["sabotage"] = options.sabotage
    out_path.parent.mkdir(parents=True, exist_ok=True)

    def finish(code: int, verdict: str) -> int:
        report.update(verdict=verdict, exit_status=code,
                      elapsed_s=round(time.perf_counter() - started, 1))
        out_path.write_text(json.dumps(report, indent=1) + "\n")
        print(f"devicecheck [{options.mode}]: {verdict}")
        print(f"devicecheck [{options.mode}]: results in {out_path} ({report['elapsed_s']}s)")
        return code

    cases: list[Json] = manifest["cases"]
    if only:
        unknown = set(only) - {c["name"] for c in cases}
        if unknown:
            print(f"devicecheck: no such cases: {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        cases = [c for c in cases if c["name"] in only or c["kind"] == "control"]
    if options.mode == "gpu":
        preflight_file = tmp / "preflight.json"
        preflight_file.unlink(missing_ok=True)
        code, _, err, _ = spawn(["--preflight", "--libdir", str(options.libdir),
                                 "--result", str(preflight_file)], 60, env)
        facts: Json = (json.loads(preflight_file.read_text()) if preflight_file.exists() else
                       {"ok": False,
                        "error": f"preflight crashed or hung (status {code}): {err[-500:]}"})
        if err.strip():
            facts["stderr"] = err[-1000:]
        report["preflight"] = facts
        print("devicecheck preflight: " + json.dumps(facts))
        if not facts.get("ok"):
            print(f"devicecheck: NO USABLE GPU: {facts.get('error')}", file=sys.stderr)
            return finish(3, f"INFRASTRUCTURE: {facts.get('error')}")
        if facts.get("compute_capability") != "9.0":
            print(f"devicecheck: warning: compute capability {facts.get('compute_capability')},"
                  f" kernels are built for {manifest.get('arch')}", file=sys.stderr)
        cases = sorted(cases, key=lambda c: c["kind"] != "control")  # is the runtime path sound?
    else:
        cases = [c for c in cases if c["kind"] != "control"]

    results: list[Json] = []
    report["cases"] = results
    deadline = started + deadline_s
    for case in cases:
        left = deadline - time.perf_counter()
        if left < 8:
            result: Json = {"name": case["name"], "status": "SKIPPED",
                            "error": "overall deadline reached"}
        else:
            result = run_one(case, options, env, tmp, min(case_timeout, left - 3))
            host_placed = any(not op["on_device"] for op in case["operands"])
            suspicious = result.get("status") != "PASS" or result.get("cuda_errors")
            if (options.mode == "gpu" and case["kind"] == "xtc" and case["expect"] == "pass"
                    and host_placed and suspicious and deadline - time.perf_counter() > 15):
                # XTC registers 256-aligned host buffers that may share pages: one rerun on
                # page-aligned buffers tells such an evaluator effect from wrong code.
                retry = run_one(case, replace(options, align=PAGE_ALIGN), env, tmp,
                                min(case_timeout, deadline - time.perf_counter() - 3))
                result["retry_page_aligned"] = {key: retry.get(key) for key in (
                    "status", "err_first", "err_last", "cuda_errors", "error", "median_ms")}
        result.update(expect=case["expect"], bound=case["bound"], kind=case["kind"],
                      what=case.get("what"))
        results.append(result)
        print(case_line(case, result), flush=True)
        out_path.write_text(json.dumps({**report, "verdict": "INCOMPLETE (still running)"},
                                       indent=1) + "\n")

    summary = summarize(results)
    report["summary"] = summary
    if not any(r.get("status") in ("PASS", "FAIL") for r in results):
        return finish(4, "INFRASTRUCTURE: no case produced a result "
                         "(all crashed, timed out or errored)")
    if options.mode == "gpu" and summary["control"] != ["PASS"]:
        control = next((r for r in results if r["kind"] == "control"), None)
        why = "absent" if control is None else control.get("error") or control.get("status")
        return finish(4, "INFRASTRUCTURE: the control kernel (an nvcc cubin launched through "
                         "the bundled libmlir_cuda_runtime) did not pass, so the XTC results "
                         f"are not meaningful: {why}")
    return finish(0, verdict_of(summary, options.mode))


def cpu_model() -> str:
    try:
        for text in Path("/proc/cpuinfo").read_text().splitlines():
            if text.startswith("model name"):
                return text.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def verify_libs(bundle: Path, libdir: Path) -> int:
    """The unpacked libraries are those build.py bundled (sha256): 0, else 2."""
    ok = True
    for lib in load_manifest(bundle)["libs"]:
        path = libdir / lib["name"]
        if not path.is_file():
            print(f"devicecheck: missing {path}", file=sys.stderr)
            ok = False
            continue
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        if digest.hexdigest() != lib["sha256"]:
            print(f"devicecheck: {path} sha256 mismatch", file=sys.stderr)
            ok = False
        else:
            print(f"devicecheck: {lib['name']} ok ({lib['size'] / 2**20:.1f} MiB, "
                  "sha256 verified)")
    return 0 if ok else 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--mode", choices=["gpu", "host"], default="gpu")
    parser.add_argument("--bundle", type=Path, default=HERE / "build",
                        help="what build.py wrote (default: %(default)s)")
    parser.add_argument("--libdir", type=Path, default=None,
                        help="the unpacked libraries: libmlir_cuda_runtime.so, libLLVM.so "
                             "(gpu), libomp.so (host); default: BUNDLE/lib")
    parser.add_argument("--out", type=Path, default=None,
                        help="the JSON results (default: $OUT or BUNDLE/out, /nvgpu-check.json)")
    parser.add_argument("--only", default=None, help="comma-separated case names")
    parser.add_argument("--case-timeout", type=float, default=30.0)
    parser.add_argument("--deadline", type=float, default=110.0, help="seconds for all cases")
    parser.add_argument("--min-time", type=float, default=0.2, help="seconds of timed calls")
    parser.add_argument("--tmp", default=None, help="where workers leave their results")
    parser.add_argument("--sabotage", choices=SABOTAGES, default=None,
                        help="host mode only: break the driver on purpose (self-test check)")
    parser.add_argument("--verify-libs", metavar="DIR", type=Path)
    parser.add_argument("--worker", dest="case", help=argparse.SUPPRESS)
    parser.add_argument("--preflight", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--align", type=int, default=XTC_ALIGN, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.sabotage and args.mode != "host":
        parser.error("--sabotage breaks the driver on purpose: host mode only")
    bundle: Path = args.bundle.resolve()
    libdir: Path = (args.libdir or bundle / "lib").resolve()
    if args.verify_libs:
        return verify_libs(bundle, args.verify_libs)
    if args.preflight:
        return preflight(libdir, args.result)
    options = Options(args.mode, bundle, libdir, args.align, args.min_time, args.sabotage)
    if args.case:
        return worker(args.case, options, args.result)
    out = args.out or Path(os.environ.get("OUT") or bundle / "out") / "nvgpu-check.json"
    only = args.only.split(",") if args.only else None
    return orchestrate(options, out, only, args.case_timeout, args.deadline, args.tmp)


if __name__ == "__main__":
    sys.exit(main())
