"""A deliberately wrong host target, wrong only for some tilings: when a tile step's
innermost tile size is odd (3, 5, ...), the kernel runs (a real XTC kernel) and then its
last output element is off by one. Exploration must catch it and shrinking must reduce it
to a case of a few elements (tests/unit/exploration/test_explore.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from pytest_xtc.core.adapter import ONCE, Artifact, RunResult, Timing
from pytest_xtc.core.cases import Case
from pytest_xtc.targets.host import HostTarget


def odd_inner_tile(case: Case) -> bool:
    for primitive, args in case.schedule.steps:
        if primitive in ("tile", "strip_mine") and len(args) > 1:
            tiles = args[1]
            if isinstance(tiles, Mapping) and tiles:
                inner = list(tiles.values())[-1]
                if inner > 1 and inner % 2 == 1:
                    return True
    return False


class OddInnerTile(HostTarget):
    def compile(self, case: Case, workdir: Path) -> Artifact:
        artifact = super().compile(case, workdir)
        artifact.handle = (artifact.handle, odd_inner_tile(case))
        return artifact

    def run(
        self,
        artifact: Artifact,
        inputs: Sequence[np.ndarray],
        outputs: Sequence[np.ndarray],
        timing: Timing = ONCE,
    ) -> RunResult:
        module, odd = artifact.handle
        result = super().run(Artifact(artifact.directory, module), inputs, outputs, timing)
        if odd:
            for out in outputs:
                out.flat[-1] += 1
        return result
