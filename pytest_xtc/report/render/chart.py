"""``perf.svg`` of a bundle: the median GFLOP/s of the kernels against numpy's for the
same computation, per target and op, split by dtype and size class (so that a median
never mixes a 1x1 relu with a 128x256x192 matmul), on a logarithmic axis (so that small
bars stay visible beside large ones).

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


def render(records: Iterable[CaseRecord]) -> str | None:
    """The chart as SVG text, or None when no record has performance figures or when
    matplotlib is missing (then with a warning)."""
    data = gflops_by_group(records)
    if not data:
        return None
    if importlib.util.find_spec("matplotlib") is None:
        warnings.warn(MISSING, stacklevel=2)
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(data)
    labels = [visible(k) for k in keys]  # case ids come from case files
    width = 0.4
    x = range(len(labels))
    fig, ax = plt.subplots(figsize=(max(4.0, 0.6 * len(labels) + 2), 4.5))
    ax.bar([i - width / 2 for i in x], [data[k][0] for k in keys], width, label="kernel")
    ax.bar([i + width / 2 for i in x], [data[k][1] for k in keys], width, label="numpy")
    ax.set_yscale("log")
    ax.set_xticks(list(x), labels, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("median GFLOP/s (log scale; higher is faster)")
    ax.set_title("Kernels against numpy, per target, op, dtype and size class")
    ax.legend()
    fig.tight_layout()
    out = io.StringIO()
    plt.rcParams["svg.hashsalt"] = "pytest-xtc"  # the same figures give the same bytes
    fig.savefig(out, format="svg", metadata={"Date": None})
    plt.close(fig)
    return out.getvalue()
