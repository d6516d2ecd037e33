"""XTC's ``EmbeddedDevice`` (``xtc/itf/runtime/embedded.py``; XTC 0.3.2 has no
implementation of it) for a processor reached through a runner: the base the ``aarch64``
and ``mppa`` adapters share, and the one an embedded vendor copies (docs/vendor-guide.md,
"An embedded target").

An embedded device does not share the caller's memory: XTC's host-style calls (a C
function pointer, an array of pointers into this process) mean nothing there. Here
``flash(image)`` loads the image the device runs (a kernel library, its entry named),
and ``evaluate`` / ``evaluate_perf`` take the operands as numpy arrays, which the
subclass's :meth:`EmbeddedRuntime.call` carries to the device and back. CNDArrays (XTC's
tensors in device memory) are refused: tensors live on the caller's side.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from xtc.itf.runtime.embedded import EmbeddedDevice

from pytest_xtc.core.adapter import Timing


class NotOnEmbedded(NotImplementedError):
    """What XTC's interface offers that an embedded device reached by a runner cannot."""


class EmbeddedRuntime(EmbeddedDevice):
    """XTC's ``EmbeddedDevice``: flash an image, then evaluate its entry on numpy operands
    (inputs, then outputs) through :meth:`call`."""

    def __init__(self) -> None:
        self._image: Path | None = None
        self._entry = ""

    def flash(self, image_path: str, entry: str = "entry") -> None:
        """Load ``image_path`` (its entry symbol ``entry``) as what the device runs."""
        image = Path(image_path)
        if not image.is_file():
            raise FileNotFoundError(f"flash: {image} is not a file")
        self._image, self._entry = image, entry

    def image(self) -> tuple[Path, str]:
        """The flashed image and its entry; RuntimeError when nothing was flashed."""
        if self._image is None:
            raise RuntimeError(f"{self.device_name()}: nothing flashed (call flash first)")
        return self._image, self._entry

    @abstractmethod
    def call(self, operands: Sequence[np.ndarray], timing: Timing,
             limit_s: float | None = None) -> list[float]:
        """Run the flashed entry on ``operands`` as ``timing`` says; what the device wrote
        is in ``operands`` after. Returns the seconds per call, the device's clock."""

    def device_id(self) -> int:
        return 0

    # -- XTC's evaluators, on numpy operands -------------------------------------------------

    def evaluate(self, results: Any, repeat: int, number: int, nargs: int, cfunc: Any,
                 args: Any) -> None:
        """XTC's ``evaluate``: ``args`` are the ``nargs`` operands (numpy arrays); the
        times go into ``results``. ``cfunc`` must be None or the flashed entry's name."""
        times = self.evaluate_perf([], repeat, number, 0, cfunc, args, nargs)
        for n, seconds in enumerate(times):
            results[n] = seconds

    def evaluate_perf(self, pmu_events: list[str], repeat: int, number: int,
                      min_repeat_ms: int, cfunc: Any, args: Any, nargs: int) -> list[float]:
        if pmu_events:
            raise NotOnEmbedded(f"{self.device_name()}: no PMU counters ({pmu_events})")
        if cfunc not in (None, self.image()[1]):
            raise NotOnEmbedded(f"{self.device_name()}: runs its flashed entry "
                                f"{self.image()[1]!r}, not {cfunc!r}")
        operands = list(args)[:nargs]
        if not all(isinstance(a, np.ndarray) for a in operands):
            raise NotOnEmbedded(f"{self.device_name()}: operands must be numpy arrays (the "
                                "device does not share this process's memory)")
        return self.call(operands, Timing(repeat, number, min_repeat_ms))

    def evaluate_packed(self, *args: Any) -> None:
        raise NotOnEmbedded(f"{self.device_name()}: packed calls are not supported")

    def evaluate_packed_perf(self, *args: Any) -> None:
        raise NotOnEmbedded(f"{self.device_name()}: packed calls are not supported")

    def cndarray_new(self, *args: Any) -> Any:
        raise NotOnEmbedded(f"{self.device_name()}: tensors live on the caller's side")

    def cndarray_del(self, handle: Any) -> None:
        raise NotOnEmbedded(f"{self.device_name()}: tensors live on the caller's side")

    def cndarray_copy_from_data(self, handle: Any, data_handle: Any) -> None:
        raise NotOnEmbedded(f"{self.device_name()}: tensors live on the caller's side")

    def cndarray_copy_to_data(self, handle: Any, data_handle: Any) -> None:
        raise NotOnEmbedded(f"{self.device_name()}: tensors live on the caller's side")

    def evaluate_flops(self, dtype_name: str | bytes) -> float:
        return 0.0  # not measured on the device
