"""The shrinking loop: a deterministic greedy search for the smallest candidate that
still fails the same way, within a budget of attempts and seconds. No pytest."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_xtc.core.adapter import TargetAdapter
from pytest_xtc.core.cases.case import Case
from pytest_xtc.core.cases.identity import test_id
from pytest_xtc.core.execution.settings import Settings
from pytest_xtc.core.outcome import Outcome
from pytest_xtc.exploration.shrink.candidates import candidates
from pytest_xtc.exploration.shrink.casefile import (
    SCHEDULE_NAME,
    State,
    describe,
    graph_name,
    rerun_command,
    write_case_file,
)
from pytest_xtc.exploration.shrink.kinds import Kind, failure_kind
from pytest_xtc.report.replay import safe_name

DEFAULT_ATTEMPTS = 200
DEFAULT_SECONDS = 300.0

RunFn = Callable[[Case, Path], Outcome]


@dataclass(frozen=True)
class Budget:
    attempts: int = DEFAULT_ATTEMPTS
    seconds: float = DEFAULT_SECONDS


@dataclass
class Result:
    """What shrinking one failing case gave."""

    case: str  # the original case id
    target: str
    kind: Kind | None
    reproduced: bool  # the original case, as a case file, failed the same way
    before: str
    after: str = ""
    file: Path | None = None
    case_id: str = ""  # the id of the shrunk case (in its file)
    command: str = ""  # one line that reruns it
    attempts: int = 0
    seconds: float = 0.0
    message: str = ""  # the shrunk case's failure
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        if not self.reproduced:
            return (f"{test_id(self.target, self.case)}: not shrunk: as a case file it does "
                    f"not fail the same way ({self.kind}); {'; '.join(self.notes)}")
        return (f"{test_id(self.target, self.case)} ({self.kind}) shrunk from {self.before} to "
                f"{self.after} in {self.attempts} attempts ({self.seconds:.1f} s): "
                f"{self.file}\nrerun: {self.command}")

    def to_dict(self) -> dict[str, Any]:
        return {"case": self.case, "target": self.target, "kind": str(self.kind),
                "reproduced": self.reproduced, "before": self.before, "after": self.after,
                "file": str(self.file) if self.file else None, "case_id": self.case_id,
                "command": self.command, "attempts": self.attempts,
                "seconds": round(self.seconds, 3), "message": self.message}


class _Trials:
    """Runs candidates as case files and counts them: a candidate is kept when it fails
    the same way (:func:`failure_kind`) as the original."""

    def __init__(self, case: Case, kind: Kind, scratch: Path, run: RunFn) -> None:
        self.case, self.kind, self.scratch, self.run = case, kind, scratch, run
        self.name = graph_name(case)
        self.attempts = 0
        self.start = time.monotonic()

    def seconds(self) -> float:
        return time.monotonic() - self.start

    def spent(self, budget: Budget) -> bool:
        return self.attempts >= budget.attempts or self.seconds() >= budget.seconds

    def fails_the_same(self, candidate: State) -> tuple[bool, str]:
        """Whether ``candidate`` fails the same way, and its failure's message."""
        self.attempts += 1
        try:
            loaded = write_case_file(self.scratch / "candidate.yaml", candidate, self.case,
                                     self.name)
        except Exception as exc:  # a candidate the case-file reader refuses
            return False, f"{type(exc).__name__}: {exc}"
        got = self.run(loaded, self.scratch / f"attempt-{self.attempts}")
        return failure_kind(got) == self.kind, got.message


def _search(state: State, trials: _Trials, budget: Budget, result: Result) -> State:
    """The greedy loop: take the first smaller candidate that fails the same way, start
    over from it; stop when none does or the budget is spent."""
    improved = True
    while improved:
        improved = False
        for candidate in candidates(state, trials.case):
            if trials.spent(budget):
                result.notes.append("budget spent")
                return state
            if candidate.size() >= state.size():
                continue
            same, message = trials.fails_the_same(candidate)
            if same:
                state, result.message, improved = candidate, message, True
                break
    return state


def shrink(
    adapter: TargetAdapter,
    case: Case,
    outcome: Outcome,
    out_dir: Path,
    settings: Settings | None = None,
    budget: Budget = Budget(),
    extra_args: Sequence[str] = (),
    workdir: Path | None = None,
    run: RunFn | None = None,
) -> Result:
    """Shrink one failing case of ``adapter`` into ``out_dir/<target>-<case>.yaml``;
    ``run`` (default: the runner, on ``adapter`` with ``settings``) runs each candidate."""
    from pytest_xtc.core.execution.runner import run_case

    settings = replace(settings or Settings(), perf=False, peak=False)
    kind = failure_kind(outcome)
    state = State(copy.deepcopy(case.graph),
                  replace(case.schedule, name=SCHEDULE_NAME, refused=""))
    result = Result(case.id, adapter.name, kind, False, describe(state))
    if kind is None:
        result.notes.append("the case did not fail")
        return result
    file = Path(out_dir) / f"{safe_name(test_id(adapter.name, case.id))}.yaml"
    scratch = Path(workdir or Path(out_dir) / ".shrink") / file.stem
    trials = _Trials(case, kind, scratch,
                     run or (lambda c, d: run_case(adapter, c, d, settings)))
    same, message = trials.fails_the_same(state)
    if not same:
        result.notes.append(f"as a case file it gave: {message[:300]}")
        result.attempts, result.seconds = trials.attempts, trials.seconds()
        return result
    result.reproduced, result.message = True, message
    state = _search(state, trials, budget, result)
    header = (f"Shrunk by pytest-xtc from {test_id(adapter.name, case.id)} ({kind}):\n"
              f"from {result.before}\nto {describe(state)}")
    shrunk = write_case_file(file, state, case, trials.name, header)
    result.after, result.file, result.case_id = describe(state), file, shrunk.id
    result.command = rerun_command(adapter.name, file, test_id(adapter.name, shrunk.id),
                                   settings.base_seed, extra_args)
    result.attempts, result.seconds = trials.attempts, trials.seconds()
    return result
