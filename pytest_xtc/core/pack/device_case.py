"""One case of a pack, in a process of its own (``device_runner.py --one``; Python 3 and
numpy only, copied into every pack's ``runner/``): its call protocol done as XTC's
evaluators do it, its operands inside guard bands, what it gave into its results folder."""

from __future__ import annotations

import ctypes
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING or __package__:  # imported from pytest_xtc.core.pack
    from .device_pack import PROGRESS, UNPACKED, Json, library, load_json
else:  # run from a pack's runner/ folder (device_runner.py put it on the path)
    from device_pack import PROGRESS, UNPACKED, Json, library, load_json

UNWRITTEN = {"float16": (np.uint16, 0x7D5A), "float32": (np.uint32, 0x7FA5A5A5),
             "float64": (np.uint64, 0x7FF5A5A5A5A5A5A5)}  # core/cases/values.py's sentinel
ALIGN, MIN_BAND, MAX_BAND = 256, 4096, 1 << 20  # core/execution/guard.py's bands
AARCH64 = "aarch64-bare"  # device_aarch64.py: run by device_call, under QEMU off AArch64


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

