"""The base of most faulty host variants: feed the kernel altered inputs, spoil its
results after it ran."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pytest_xtc.core.adapter import ONCE, Artifact, RunResult, Timing
from pytest_xtc.targets.host import HostTarget


class Tampered(HostTarget):
    """A host target whose kernel runs on what :meth:`feed` makes of its inputs, and whose
    results :meth:`spoil` then changes in place: the shape of most faults below."""

    def feed(self, inputs: Sequence[np.ndarray]) -> Sequence[np.ndarray]:
        return inputs

    def spoil(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        """Change the results (or the inputs) after the kernel ran."""

    def run(
        self,
        artifact: Artifact,
        inputs: Sequence[np.ndarray],
        outputs: Sequence[np.ndarray],
        timing: Timing = ONCE,
    ) -> RunResult:
        result = super().run(artifact, self.feed(inputs), outputs, timing)
        self.spoil(inputs, outputs)
        return result
