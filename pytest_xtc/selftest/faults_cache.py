"""Faulty host variants whose kernel cache leaves one dimension out of its key (issue 33):
a case gets the kernel compiled for a twin that differs only there. Real XTC kernels."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pytest_xtc.core.adapter import Artifact
from pytest_xtc.core.cases import twins
from pytest_xtc.core.cases.case import Case
from pytest_xtc.targets.host import HostTarget


class CacheWithoutAttributes(HostTarget):
    """Compiled kernels are cached by the graph's ops, shapes, dtype and schedule, not its
    attributes: a case whose twin (the same graph, other attributes) compiled first in
    this process gets the twin's kernel."""

    LEFT_OUT: ClassVar[str] = "attributes"
    kept: ClassVar[dict[str, Artifact]] = {}

    def compile(self, case: Case, workdir: Path) -> Artifact:
        key = twins.structure(case, self.LEFT_OUT)
        if key not in self.kept:
            self.kept[key] = super().compile(case, workdir)
        return self.kept[key]


class CacheWithoutDtype(CacheWithoutAttributes):
    """Compiled kernels are cached by the graph's ops, attributes, shapes and schedule, not
    its dtype: a float64 case gets the float32 kernel compiled first in this process."""

    LEFT_OUT = "dtype"
    kept: ClassVar[dict[str, Artifact]] = {}


class CacheWithoutShapes(CacheWithoutAttributes):
    """Compiled kernels are cached by the graph's ops, attributes, dtype and schedule, not
    its operands' shapes (as a cache keyed by the op's name and parameters would be)."""

    LEFT_OUT = "shapes"
    kept: ClassVar[dict[str, Artifact]] = {}
