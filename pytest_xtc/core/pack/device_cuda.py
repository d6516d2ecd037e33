"""``cuda-bare`` kernels for the device runner (device_case.py loads this file beside it):
Python 3, numpy and ctypes only. The calls XTC's GPU evaluator makes, in its order
(xtc/runtimes/accelerator/gpu/GPUDevice.py, xtc/targets/accelerator/gpu/GPUEvaluator.py,
as devicecheck/nvgpu/run_kernels.py first made them on an H200):

1. XTC's CUDA runtime library (``libmlir_cuda_runtime.so``, loaded by the runner after the
   libLLVM it needs; it needs the driver's ``libcuda.so.1``): ``mgpuStreamCreate``;
2. every device-placed operand: ``mgpuMemAlloc(n, stream, true)``, ``mgpuMemcpy`` of its
   bytes, ``mgpuStreamSynchronize``; every host-placed one: ``mgpuMemHostRegister``;
3. the kernel library (its constructor loads the GPU binary), its entry called with bare
   pointers, inputs then outputs; a stream synchronization after each call;
4. device operands copied back (outputs, and what the kernel left of its inputs),
   host ones unregistered, device memory freed.

Times are wall-clock seconds per call around the entry and the synchronization (XTC's host
runtime, which times host kernels, is not built for the GPU machine).
"""

from __future__ import annotations

import ctypes
import time
from pathlib import Path
from typing import Any

RUNTIME = "libmlir_cuda_runtime"  # the runtime library the kernel calls (by file name)


class Unavailable(RuntimeError):
    """No usable GPU or driver: the device runner reports it as the machine's, not the
    target's (an infrastructure error)."""


class CudaKernel:
    def __init__(self, case_dir: Path, call: dict[str, Any], loaded: list[ctypes.CDLL]) -> None:
        names = [Path(n).name for n in call["runtime"]]
        found = [i for i, n in enumerate(names) if n.split("-", 1)[-1].startswith(RUNTIME)]
        if not found:
            raise ValueError(f"no {RUNTIME} among the case's runtime libraries {names}")
        lib = loaded[found[-1]]  # loaded after libLLVM, which it needs
        lib.mgpuStreamCreate.argtypes, lib.mgpuStreamCreate.restype = [], ctypes.c_void_p
        lib.mgpuMemAlloc.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_bool]
        lib.mgpuMemAlloc.restype = ctypes.c_void_p
        lib.mgpuMemFree.argtypes, lib.mgpuMemFree.restype = [ctypes.c_void_p] * 2, None
        lib.mgpuMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64,
                                   ctypes.c_void_p]
        lib.mgpuMemcpy.restype = None
        lib.mgpuStreamSynchronize.argtypes = [ctypes.c_void_p]
        lib.mgpuStreamSynchronize.restype = None
        self.lib, self.places = lib, call["placements"]
        self.stream = lib.mgpuStreamCreate()
        if not self.stream:
            raise Unavailable("mgpuStreamCreate gave no stream (no usable GPU or driver)")
        kernel = ctypes.CDLL(str(case_dir / call["library"]))
        address = ctypes.cast(getattr(kernel, call["entry"]), ctypes.c_void_p).value
        if not address:
            raise RuntimeError(f"{call['entry']}: no such entry in {call['library']}")
        self.kernel, self.address = kernel, address

    def _copy(self, dst: int, src: int, nbytes: int) -> None:
        self.lib.mgpuMemcpy(dst, src, nbytes, self.stream)
        self.lib.mgpuStreamSynchronize(self.stream)

    def __call__(self, operands: list[Any], timing: dict[str, Any]) -> list[float]:
        if len(self.places) != len(operands):
            raise ValueError(f"{len(operands)} operands, {len(self.places)} placements")
        pointers, device, host = [], [], []
        try:
            for operand, place in zip(operands, self.places, strict=True):
                view = operand.view
                if place == "device":
                    pointer = self.lib.mgpuMemAlloc(view.nbytes, self.stream, True)
                    if not pointer:
                        raise RuntimeError(f"mgpuMemAlloc({view.nbytes}) returned NULL")
                    device.append((pointer, view))
                    self._copy(pointer, view.ctypes.data, view.nbytes)
                else:
                    pointer = view.ctypes.data
                    self.lib.mgpuMemHostRegister(ctypes.c_void_p(pointer),
                                                 ctypes.c_int64(view.nbytes))
                    host.append(pointer)
                pointers.append(pointer)
            entry = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * len(pointers))(self.address)
            args = [ctypes.c_void_p(p) for p in pointers]
            times = []
            for _ in range(int(timing["repeat"])):
                start = time.perf_counter()
                for _ in range(int(timing["number"])):
                    entry(*args)
                self.lib.mgpuStreamSynchronize(self.stream)
                times.append((time.perf_counter() - start) / int(timing["number"]))
            for pointer, view in device:
                self._copy(view.ctypes.data, pointer, view.nbytes)
            return times
        finally:
            for pointer in host:
                self.lib.mgpuMemHostUnregister(ctypes.c_void_p(pointer))
            for pointer, _ in device:
                self.lib.mgpuMemFree(pointer, self.stream)

