"""``perf.svg`` of a bundle: the median GFLOP/s of the kernels against numpy's for the
same computation, per target and op, split by dtype and size class (so that a median
never mixes a 1x1 relu with a 128x256x192 matmul), on a logarithmic axis (so that small
bars stay visible beside large ones). Ops with no FLOP count (pad, transpose: data
movement) are in the chart too, in a panel of their own: the median of their time/numpy
per target, op and dtype (below 1: faster than numpy).

matplotlib is optional (the ``report`` extra: ``pip install './pytest-xtc[report]'`` from a
clone, or ``pip install matplotlib``): without it the chart is
left out, with a warning saying so; the rest of the bundle is written as usual.
"""

from __future__ import annotations

import importlib.util
import io
import re
import statistics
import warnings
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pytest_xtc.report.parts.records import CaseRecord
from pytest_xtc.report.render.text import visible

PLOT = "perf.svg"
MISSING = (
    f"{PLOT} not written: matplotlib is not installed (pip install matplotlib, or the "
    "report extra: pip install './pytest-xtc[report]' from a clone)"
)
#: Size classes by the flops of one kernel call: (upper bound, name).
SIZES = ((1e5, "small"), (1e7, "medium"), (float("inf"), "large"))


def size_class(flops: float | None) -> str:
    if not flops:
        return "-"
    return next(name for bound, name in SIZES if flops < bound)


def _dtype(case: str) -> str:
    found = re.search(r"-(float\d+|int\d+|bfloat16)-", f"-{case}-")
    return found.group(1) if found else "-"


def _medians(found: Mapping[str, list[tuple[float, float]]]) -> dict[str, tuple[float, float]]:
    return {
        key: (statistics.median(k for k, _ in pairs), statistics.median(n for _, n in pairs))
        for key, pairs in sorted(found.items())
    }


def _figures(records: Iterable[CaseRecord]) -> Iterator[tuple[CaseRecord, Mapping[str, Any], str]]:
    for record in records:
        perf = record.perf or {}
        if perf.get("gflops") and perf.get("numpy_gflops") and not perf.get("invalid"):
            yield record, perf, record.case.split("-")[0]


def gflops_by_op(records: Iterable[CaseRecord]) -> dict[str, tuple[float, float]]:
    """``"<target> <op>"`` -> (median kernel GFLOP/s, median numpy GFLOP/s), over the cases
    whose records have both."""
    found: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for record, perf, op in _figures(records):
        found[f"{record.target} {op}"].append((perf["gflops"], perf["numpy_gflops"]))
    return _medians(found)


def gflops_by_group(records: Iterable[CaseRecord]) -> dict[str, tuple[float, float]]:
    """``"<target> <op> <dtype> <size class>"`` -> (median kernel GFLOP/s, median numpy
    GFLOP/s): the chart's bars."""
    found: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for record, perf, op in _figures(records):
        key = f"{record.target} {op} {_dtype(record.case)} {size_class(perf.get('flops'))}"
        found[key].append((perf["gflops"], perf["numpy_gflops"]))
    return _medians(found)


def ratio_by_group(records: Iterable[CaseRecord]) -> dict[str, float]:
    """``"<target> <op> <dtype>"`` -> the median time/numpy of the cases with no FLOP
    count (their GFLOP/s unknown) and a valid performance record."""
    found: dict[str, list[float]] = defaultdict(list)
    for record in records:
        perf = record.perf or {}
        ratio = perf.get("time_vs_numpy")
        if perf.get("gflops") or perf.get("invalid") or not isinstance(ratio, (int, float)) \
                or not 0 < ratio < float("inf"):
            continue
        found[f"{record.target} {record.case.split('-')[0]} {_dtype(record.case)}"].append(ratio)
    return {key: statistics.median(found[key]) for key in sorted(found)}


_drawn: dict[str, str] = {}  # the last chart drawn, by its figures (a bundle draws it twice)


def render(records: Iterable[CaseRecord]) -> str | None:
    """The chart as SVG text, or None when no record has performance figures or when
    matplotlib is missing (then with a warning)."""
    records = list(records)
    data, ratios = gflops_by_group(records), ratio_by_group(records)
    if not data and not ratios:
        return None
    if importlib.util.find_spec("matplotlib") is None:
        warnings.warn(MISSING, stacklevel=2)
        return None
    figures = repr((sorted(data.items()), sorted(ratios.items())))
    if figures not in _drawn:
        _drawn.clear()
        _drawn[figures] = _draw(data, ratios)
    return _drawn[figures]


def _draw(data: Mapping[str, tuple[float, float]], ratios: Mapping[str, float]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [len(data)] * bool(data) + [len(ratios)] * bool(ratios)
    fig, axes = plt.subplots(1, len(panels), squeeze=False, width_ratios=[n + 2 for n in panels],
                             figsize=(max(4.5 * len(panels), 0.6 * sum(panels) + 3), 4.8))
    fig.suptitle("Kernels against numpy, per target, op, dtype (and size class)", fontsize=11)
    if data:
        _gflops(axes[0][0], data)
    if ratios:
        _ratios(axes[0][-1], ratios)
    fig.tight_layout()
    out = io.StringIO()
    plt.rcParams["svg.hashsalt"] = "pytest-xtc"  # the same figures give the same bytes
    fig.savefig(out, format="svg", metadata={"Date": None})
    plt.close(fig)
    return out.getvalue()


def _gflops(ax: Any, data: Mapping[str, tuple[float, float]]) -> None:
    keys = list(data)
    labels = [visible(k) for k in keys]  # case ids come from case files
    width = 0.4
    x = range(len(labels))
    ax.bar([i - width / 2 for i in x], [data[k][0] for k in keys], width, label="kernel")
    ax.bar([i + width / 2 for i in x], [data[k][1] for k in keys], width, label="numpy")
    ax.set_yscale("log")
    ax.set_xticks(list(x), labels, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("median GFLOP/s (log scale; higher is faster)")
    ax.set_title("GFLOP/s", fontsize=10)
    ax.legend()


def _ratios(ax: Any, ratios: Mapping[str, float]) -> None:
    keys = list(ratios)
    x = range(len(keys))
    ax.bar(list(x), [ratios[k] for k in keys], 0.6, color="#8250df")
    ax.axhline(1.0, color="#6e7781", linewidth=1, linestyle="--")
    ax.set_yscale("log")
    ax.set_xticks(list(x), [visible(k) for k in keys], rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("median time/numpy (log scale; below 1: faster)")
    ax.set_title("time/numpy, ops with no FLOP count", fontsize=10)
