"""How a case failed, as shrinking compares it: the stage and the failure's kind. No pytest.

The runner records the kind where it classifies the failure (:attr:`Outcome.kind`); only
records written before it did are read from their message text
(:func:`kind_from_legacy_message`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_xtc.core.outcome import Outcome, Phase, Status


@dataclass(frozen=True)
class Kind:
    """How a case failed: its stage (compile, placement, run) and the kind of error."""

    stage: str
    kind: str

    def __str__(self) -> str:
        return f"{self.stage}: {self.kind}"


def failure_kind(outcome: Outcome) -> Kind | None:
    """The kind of a failed (or errored) outcome; None for one that did not fail. The
    outcome's recorded :attr:`~Outcome.kind` decides; its message text only when it has
    none (a record written before kinds were recorded)."""
    if outcome.status not in (Status.FAILED, Status.ERROR):
        return None
    stage = Phase(outcome.phase).stage
    if outcome.kind is not None:
        return Kind(stage, str(outcome.kind))
    return Kind(stage, kind_from_legacy_message(outcome.message))


def kind_from_legacy_message(message: str) -> str:
    """The failure's kind read back from the runner's message text, for records written
    before the runner recorded kinds as data (spelled as :class:`FailureKind` prints)."""
    if message.startswith("wrong results"):
        return "wrong results"
    if message.startswith("timed out") or "timed out after" in message:
        return "timeout"
    signal = re.search(r"killed by signal (SIG[A-Z0-9]+)", message)
    if signal:
        return f"signal {signal[1]}"
    code = re.search(r"exited with code (\d+)", message)
    if code:
        return f"exit code {code[1]}"
    raised = re.search(r"(?:failed|raised)(?: [^:]*)?: ([A-Za-z_][\w.]*)(?::|\s|$)", message)
    if raised:
        return raised[1]
    return message.split(":")[0][:60] or "failure"
