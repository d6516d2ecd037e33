"""Why an ONNX op is not imported, and the table the command ends with."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from typing import Any

from pytest_xtc.report.render.text import table

#: ONNX ops with no XTC op (xtc-tools 0.3: matmul, conv2d, relu, pad, pad2d, unpad,
#: reshape, transpose; the last two not in its MLIR backend).
NO_XTC_OP = {
    **dict.fromkeys(("Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Neg", "Where", "Equal"),
                    "no elementwise arithmetic in XTC"),
    **dict.fromkeys(("MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"),
                    "no pooling op in XTC"),
    **dict.fromkeys(("BatchNormalization", "LayerNormalization", "InstanceNormalization",
                     "GroupNormalization"), "no normalization op in XTC"),
    **dict.fromkeys(("Softmax", "LogSoftmax"), "no softmax in XTC"),
    **dict.fromkeys(("Gelu", "Erf", "Tanh", "Sigmoid", "Exp", "HardSigmoid", "LeakyRelu"),
                    "no such activation in XTC (relu only)"),
    **dict.fromkeys(("ReduceMean", "ReduceSum", "ReduceMax"), "no reduction op in XTC"),
    **dict.fromkeys(("Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze"),
                    "data layout only: XTC's MLIR backend has no reshape or transpose"),
    **dict.fromkeys(("Gather", "Slice", "Concat", "Split", "Shape", "Cast", "Expand"),
                    "no indexing or shape op in XTC"),
    "Constant": "a constant, no computation",
    "Identity": "a copy, no computation",
    "Dropout": "identity at inference, no computation",
}


def reason(op: str) -> str:
    return NO_XTC_OP.get(op, "no XTC op")


def _rows(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """The report's table renderer, unwrapped (file names are copied from it whole)."""
    return table(header, [list(map(str, r)) for r in rows], width=sys.maxsize).splitlines()


def format_report(model: str, imported: Sequence[tuple[str, str, str, int]],
                  skipped: Sequence[tuple[str, str]]) -> str:
    """``imported``: (file, op chain, shape, count) per case file; ``skipped``: (op,
    reason) per node not imported."""
    nodes = sum(row[3] for row in imported)
    lines = [f"{model}: {nodes} layers imported as {len(imported)} case files"]
    lines += _rows(("file", "op chain", "shape", "count"), imported)
    counted = Counter(skipped)
    lines.append(f"not imported: {sum(counted.values())} nodes")
    if counted:
        rows = [(op, n, why) for (op, why), n in sorted(counted.items(), key=lambda r: -r[1])]
        lines += _rows(("op", "count", "reason"), rows)
    return "\n".join(lines)
