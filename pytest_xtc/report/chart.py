"""``perf.svg`` of a bundle: per target and op, the median GFLOP/s of the kernels against
numpy's for the same computation."""

from __future__ import annotations

import io
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

PLOT = "perf.svg"


def gflops_by_op(records: Iterable[Mapping[str, Any]]) -> dict[str, tuple[float, float]]:
    """``"<target> <op>"`` -> (median kernel GFLOP/s, median numpy GFLOP/s), over the cases
    whose records have both."""
    found: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for record in records:
        perf = record.get("perf") or {}
        if perf.get("gflops") and perf.get("numpy_gflops"):
            op = record["case"].split("-")[0]
            found[f"{record['target']} {op}"].append((perf["gflops"], perf["numpy_gflops"]))
    return {
        key: (statistics.median(k for k, _ in pairs), statistics.median(n for _, n in pairs))
        for key, pairs in sorted(found.items())
    }


def render(records: Iterable[Mapping[str, Any]]) -> str | None:
    """The chart as SVG text, or None when no record has performance figures."""
    data = gflops_by_op(records)
    if not data:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(data)
    width = 0.4
    x = range(len(labels))
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(labels)), 3.5))
    ax.bar([i - width / 2 for i in x], [data[k][0] for k in labels], width, label="kernel")
    ax.bar([i + width / 2 for i in x], [data[k][1] for k in labels], width, label="numpy")
    ax.set_xticks(list(x), labels, rotation=30, ha="right")
    ax.set_ylabel("median GFLOP/s")
    ax.set_title("Kernels against numpy, per target and op")
    ax.legend()
    fig.tight_layout()
    out = io.StringIO()
    plt.rcParams["svg.hashsalt"] = "pytest-xtc"  # the same figures give the same bytes
    fig.savefig(out, format="svg", metadata={"Date": None})
    plt.close(fig)
    return out.getvalue()
