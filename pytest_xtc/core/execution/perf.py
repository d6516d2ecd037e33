"""Performance records of passed cases: kernel times, GFLOP/s, numpy's time, peak. No pytest.

A record is a flat dict of plain numbers (xdist ships it, bundles keep it as JSON):

* the method: ``repeat``, ``number``, ``min_repeat_ms`` (XTC's evaluator settings), and
  ``start_number``: the calls per measurement the kernel's timing loop started from (the
  method's ``number``, raised by :func:`aimed` so that a first try lasts ``min_repeat_ms``);
* the kernel's seconds per call over the repeats: ``median_s``, ``min_s``, ``max_s``,
  ``mean_s``, ``iqr_s``, ``rel_std`` (sample std / mean), ``rounds``;
* ``flops`` (2*M*N*K per matmul, 2*N*OH*OW*F*R*S*C per conv2d; None without either),
  ``gflops`` (of the median time);
* numpy's forward evaluation of the same graph, same inputs, in the case's dtype, on the
  host, timed the same way: ``numpy_median_s`` ... ``numpy_rel_std``; ``numpy_gflops``;
  measured once per process for each graph and kind of values (``same_as``: the cases of
  one graph under other schedules or operand layouts, their inputs drawn alike), then
  reused, ``numpy_reused`` saying so: numpy's time does not depend on the schedule;
  ``numpy_threads``: 1 when its BLAS was held to one thread (threadpoolctl, which XTC's
  scikit-learn brings), else None (BLAS's default, which a busy core can slow a hundredfold);
  ``time_vs_numpy`` (kernel median / numpy median: below 1, the kernel is faster);
* ``peak_gflops`` and ``peak_fraction`` where the adapter reports a peak for the dtype;
* ``bytes``: the bytes any correct kernel moves (its outputs written, as many input bytes
  read), and ``invalid``: why the kernel's fastest time is physically impossible on the
  device (judging/plausibility.py), None when it is possible. An invalid record is shown
  as invalid, never as a figure.

Performance is recorded with its method; it never decides conformance.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Hashable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from typing import Any

import numpy as np

from pytest_xtc.core.adapter import TargetAdapter, Timing
from pytest_xtc.core.cases import graphs
from pytest_xtc.core.cases.graphs import GraphDict
from pytest_xtc.core.judging import plausibility, reference
from pytest_xtc.core.judging.plausibility import Ceilings
from pytest_xtc.ops.builder import Operand

#: What the plugin times by default: cheap enough to stay on (README, "Performance").
DEFAULT_TIMING = Timing(repeat=5, number=1, min_repeat_ms=1)

Clock = Callable[[], float]
#: How long a measurement's first try is aimed to last, in ``min_repeat_ms``: from one
#: call's time, a margin for that call's noise (a try that falls short is still doubled).
AIM = 1.5
MAX_NUMBER = 1 << 24  # XTC's C loop counts its calls in an int, doubling a short try


def flop_count(graph: GraphDict) -> int:
    """Floating-point operations of one evaluation of ``graph``, each op's own count
    (2*M*N*K per matmul, 2*N*OH*OW*F*R*S*C per conv2d, nothing for the others)."""
    known = graphs.operands(graph)
    return sum(
        node.op.flops([known[uid].shape for uid in node.args], node.attrs)
        for node in graphs.nodes(graph)
    )


def kernel_calls(timing: Timing) -> int:
    """Kernel calls one timed run makes at least (:func:`time_calls`): the warm-up, then
    ``repeat`` measurements of ``number`` calls (more only for a call shorter than
    ``min_repeat_ms``)."""
    warm_up = 1 if timing.number > 0 else 0
    return warm_up + max(timing.repeat, 1) * max(timing.number, 1)


def aimed(timing: Timing, seconds: Sequence[float]) -> Timing:
    """``timing`` with its ``number`` raised (never lowered) so that a measurement's first
    try lasts about :data:`AIM` times ``min_repeat_ms`` by the shortest of ``seconds``
    (single calls of the code timed, on the inputs timed). From one call, XTC's loop
    doubles its count until a try lasts ``min_repeat_ms``, in every repeat: for a fast
    kernel the tries that fall short cost as much again as the one kept. The measurement
    itself (calls per try, at least ``min_repeat_ms``, the median of ``repeat``) is the
    same. Unchanged without a minimum, a ``number`` or a positive time."""
    known = [s for s in seconds if math.isfinite(s) and s > 0]
    if timing.number < 1 or timing.min_repeat_ms <= 0 or not known:
        return timing
    wanted = math.ceil(AIM * timing.min_repeat_ms / 1000 / min(known))
    return replace(timing, number=max(timing.number, min(wanted, MAX_NUMBER)))


def time_calls(
    fn: Callable[[], object], timing: Timing, clock: Clock = time.perf_counter
) -> list[float]:
    """Seconds per call of ``fn``, measured as XTC's host evaluator measures a kernel: one
    warm-up call (none when ``number`` is 0), then ``repeat`` measurements of ``number``
    calls, the count doubled until a measurement lasts ``min_repeat_ms``; ``number`` is
    first :func:`aimed` by the warm-up call's time, as the kernel's by its checked call."""
    number = timing.number
    if number > 0:
        start = clock()
        fn()
        number = aimed(timing, [clock() - start]).number
    else:
        number = 1
    times = []
    for _ in range(max(timing.repeat, 1)):
        calls = number
        while True:
            start = clock()
            for _ in range(calls):
                fn()
            elapsed = clock() - start
            if elapsed * 1000 >= timing.min_repeat_ms:
                break
            calls *= 2
        times.append(elapsed / calls)
    return times


def spread(times: Sequence[float]) -> dict[str, float | int]:
    """Median, extremes, mean, interquartile range (numpy's linear quartiles) and relative
    sample standard deviation of ``times``."""
    data = [float(t) for t in times]
    q1, q3 = (float(q) for q in np.percentile(data, [25, 75]))
    mean = statistics.fmean(data)
    rel_std = statistics.stdev(data) / mean if len(data) > 1 and mean > 0 else 0.0
    return {
        "median_s": statistics.median(data),
        "min_s": min(data),
        "max_s": max(data),
        "mean_s": mean,
        "iqr_s": q3 - q1,
        "rel_std": rel_std,
        "rounds": len(data),
    }


#: numpy's times already measured in this process, by (``same_as``, timing, clock)
_numpy_times: dict[tuple[Hashable, Timing, Clock], tuple[dict[str, Any], int | None]] = {}
_blas: list[Any] = []  # threadpoolctl's controller, made once (finding the libraries is slow)


def one_blas_thread() -> tuple[AbstractContextManager[Any], int | None]:
    """A context holding numpy's BLAS to one thread, and that count (None: not held)."""
    if not _blas:
        try:
            from threadpoolctl import ThreadpoolController

            _blas.append(ThreadpoolController())
        except Exception:
            _blas.append(None)
    if _blas[0] is None:
        return nullcontext(), None
    return _blas[0].limit(limits=1, user_api="blas"), 1


_peaks: dict[tuple[str, str], float | None] = {}


def device_peak(adapter: TargetAdapter, dtype: str) -> float | None:
    """``adapter.peak_flops(dtype)`` as a positive FLOP/s figure, or None; asked once per
    target and dtype (a runtime may measure it), and a failure counts as no figure."""
    key = (adapter.name, dtype)
    if key not in _peaks:
        try:
            peak = adapter.peak_flops(dtype)
        except Exception:
            peak = None
        _peaks[key] = float(peak) if peak and math.isfinite(peak) and peak > 0 else None
    return _peaks[key]


_ceilings: dict[tuple[str, str], Ceilings | None] = {}


def ceilings(adapter: TargetAdapter, dtype: str, peak: float | None) -> Ceilings:
    """The device's physical ceilings for ``dtype``: ``adapter.physical_limits(dtype)``
    (asked once per target and dtype; a failure counts as none declared), else the
    declared ``peak`` times a margin and bounds no device reaches."""
    key = (adapter.name, dtype)
    if key not in _ceilings:
        try:
            declared = adapter.physical_limits(dtype)
        except Exception:
            declared = None
        _ceilings[key] = declared if isinstance(declared, Ceilings) else None
    return _ceilings[key] or plausibility.default_ceilings(peak)


def operand_bytes(graph: GraphDict) -> tuple[int, int]:
    """Bytes of the graph's inputs and of its outputs."""
    def size(operands: Sequence[Operand]) -> int:
        return sum(math.prod(o.shape) * np.dtype(o.dtype).itemsize for o in operands)

    return size(graphs.inputs(graph)), size(graphs.outputs(graph))


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def record(
    graph: GraphDict,
    inputs: Sequence[np.ndarray],
    times: Sequence[float],
    timing: Timing,
    peak_flops: float | None = None,
    clock: Clock = time.perf_counter,
    limits: Ceilings | None = None,
    same_as: Hashable | None = None,
    start_number: int | None = None,
) -> dict[str, Any]:
    """The performance record of a passed case whose kernel took ``times`` (seconds per
    call, one per repeat); numpy's forward evaluation of ``graph`` on ``inputs`` is timed
    here, with the same ``timing``, unless it was for an earlier record of this process
    with the same ``same_as`` (a key naming the graph and the kind of its inputs; None:
    timed here); ``limits``: the device's ceilings (None: the peak times a margin, and
    bounds no device reaches); ``start_number``: the kernel's loop's first count (None:
    the method's ``number``)."""
    flops = flop_count(graph) or None
    perf: dict[str, Any] = {
        "repeat": timing.repeat,
        "number": timing.number,
        "min_repeat_ms": timing.min_repeat_ms,
        "start_number": start_number or timing.number,
        "flops": flops,
    }
    kernel = spread(times) if times else {}
    perf.update(kernel)
    key = None if same_as is None else (same_as, timing, clock)
    known = None if key is None else _numpy_times.get(key)
    perf["numpy_reused"] = known is not None
    if known is not None:
        ours, perf["numpy_threads"] = known
    else:
        forward = reference.forward_fn(graph)
        limit, perf["numpy_threads"] = one_blas_thread()
        with limit:
            ours = spread(time_calls(lambda: forward(inputs), timing, clock))
        if key is not None:
            _numpy_times[key] = (ours, perf["numpy_threads"])
    perf.update({f"numpy_{key}": value for key, value in ours.items() if key != "rounds"})
    median, numpy_median = kernel.get("median_s"), ours["median_s"]
    gflops = _ratio(flops, median)
    perf["gflops"] = gflops / 1e9 if gflops is not None else None
    numpy_gflops = _ratio(flops, numpy_median)
    perf["numpy_gflops"] = numpy_gflops / 1e9 if numpy_gflops is not None else None
    perf["time_vs_numpy"] = _ratio(median, numpy_median)
    perf["peak_gflops"] = peak_flops / 1e9 if peak_flops else None
    perf["peak_fraction"] = _ratio(gflops, peak_flops)
    perf["bytes"] = plausibility.compulsory_bytes(*operand_bytes(graph))
    perf["invalid"] = plausibility.invalid(
        perf, limits or plausibility.default_ceilings(peak_flops))
    return perf
