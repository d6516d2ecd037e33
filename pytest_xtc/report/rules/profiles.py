"""Profiles: the parts of the suite a target can claim, the one each case belongs to, and
what a target must at least declare to claim each (:data:`MINIMUM`). No pytest.

A target whose declared capabilities (ops, dtypes, placements, recorded in the bundle)
meet none of a profile's minimum alternatives is *not applicable* to that profile: it can
never be conformant to it by declaring everything "not supported".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_xtc.core.cases import graphs
from pytest_xtc.core.cases.case import DEVICE, Case

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


#: What a target must declare to claim a profile: any one alternative, each naming ops,
#: dtypes and placements the target must all declare (a multi-op graph: all its ops).
MINIMUM: dict[str, list[dict[str, list[str]]]] = {
    CORE: [{"ops": ["matmul", "conv2d"], "dtypes": ["float32"], "placements": ["host"]}],
    DEVICE_MEMORY: [{"ops": [op], "placements": ["device"]}
                    for op in ("matmul", "conv2d", "relu", "pad", "pad2d", "unpad",
                               "transpose", "reshape")],
    EXTENDED: [
        {"ops": ["matmul"], "dtypes": ["float64"]},
        {"ops": ["matmul", "relu"]},  # matmul+relu and mlp graphs
        {"ops": ["conv2d", "relu"]},  # conv2d+relu
    ],
}


def _alternative(need: Mapping[str, Sequence[str]]) -> str:
    return " and ".join(f"{key} {', '.join(values)}" for key, values in need.items())


def applicable(profile: str, capabilities: Mapping[str, Any] | None) -> str | None:
    """Why ``capabilities`` (the bundle's record: ops, dtypes, placements) cannot claim
    ``profile``, or None when they meet one of its minimum alternatives."""
    if capabilities is None:
        return "the target's capabilities are unknown (capabilities() failed or not recorded)"
    for need in MINIMUM[profile]:
        if all(set(values) <= set(capabilities.get(key) or ()) for key, values in need.items()):
            return None
    declared = _alternative({k: sorted(capabilities.get(k) or ()) or ["none"]
                             for k in ("ops", "dtypes", "placements")})
    wanted = " or ".join(_alternative(n) for n in MINIMUM[profile])
    return f"declares {declared}; {profile} needs at least {wanted}"
