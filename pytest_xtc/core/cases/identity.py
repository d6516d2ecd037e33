"""A case's identity on a target, :class:`CaseRef`: the one place that writes
``<target>-<case id>`` (test ids, rerun lines, report keys, work folders). No pytest."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class CaseRef:
    """A case (its id: :attr:`pytest_xtc.core.cases.case.Case.id`) on a target (its
    selection name, ``nvgpu[1]`` included). Printed as ``<target>-<case id>``, the test id
    pytest shows and ``--xtc-case`` accepts."""

    target: str
    case: str

    def __str__(self) -> str:
        return f"{self.target}-{self.case}"


def test_id(target: str, case_id: str) -> str:
    """``<target>-<case id>``."""
    return str(CaseRef(target, case_id))


test_id.__test__ = False  # type: ignore[attr-defined]  # a name pytest would collect
