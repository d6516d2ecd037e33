"""Profiles: the parts of the suite a target can claim, and the one each case belongs to."""

from __future__ import annotations

import math

from pytest_xtc.core import graphs
from pytest_xtc.core.cases import DEVICE, Case

CORE, DEVICE_MEMORY, EXTENDED = "core", "device-memory", "extended"
PROFILES: dict[str, str] = {
    CORE: "float32, host operands, every op, small and medium shapes",
    DEVICE_MEMORY: "operands in device memory (targets declaring device placement)",
    EXTENDED: "float64, multi-op graphs (matmul+relu, conv2d+relu, mlp), large shapes",
}
#: A case whose operands hold more elements than this, all together, is "large".
LARGE_ELEMENTS = 1 << 16
#: Ops that only frame another op (conv2d pads its input) do not make a graph multi-op.
FRAMING_OPS = frozenset({"pad", "pad2d", "unpad"})


def elements(case: Case) -> int:
    operands = [*graphs.inputs(case.graph), *graphs.outputs(case.graph)]
    return sum(math.prod(o.shape) for o in operands)


def profile_of(case: Case) -> str:
    """The one profile a case belongs to: device memory first, then extended, else core."""
    if case.placement and DEVICE in case.placement.values():
        return DEVICE_MEMORY
    multi_op = len(set(case.ops) - FRAMING_OPS) > 1
    if case.dtype != "float32" or multi_op or elements(case) > LARGE_ELEMENTS:
        return EXTENDED
    return CORE
