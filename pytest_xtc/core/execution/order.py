"""Order dependence: a passed case is run again right after a neighbour unlike it (another
dtype, another op, another shape: a seeded choice from a small pool), the neighbour and the
case again in one worker (every other case has one of its own), and its outputs' digest
must not change. No pytest.

A kernel or adapter that keeps state from the case before (a dtype, a scratch buffer sized
once) is wrong in one order and right in another; the run's own order is one neighbourhood,
the neighbour's the second. Cost per case: the neighbour (a tiny case) and the case again,
each called untimed. The neighbour's own verdict is not this case's business.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from pytest_xtc.core.adapter import ONCE
from pytest_xtc.core.cases.case import Case, case_bytes
from pytest_xtc.core.execution.settings import Settings
from pytest_xtc.core.outcome import Outcome, Status

RunFn = Callable[[Case, Path, Settings], Outcome]

_previous: dict[str, str] = {}  # target -> the case run last in this process
_unusable: dict[str, set[str]] = {}  # target -> neighbours that did not run there
TRIES = 6  # neighbours tried, at most, for one case


def pool(cases: Sequence[Case]) -> tuple[Case, ...]:
    """The neighbours: per op family and dtype, the smallest case with random inputs."""
    smallest: dict[tuple[str, str], Case] = {}
    for case in cases:
        key = (case.op, case.dtype)
        if case.values == "random" and (
            key not in smallest or case_bytes(case) < case_bytes(smallest[key])
        ):
            smallest[key] = case
    return tuple(smallest[k] for k in sorted(smallest))


def neighbours(case: Case, candidates: Sequence[Case], seed: int, previous: str = ""
               ) -> list[Case]:
    """The candidates, most unlike ``case`` first (dtype, then op, then shape), in a seeded
    order among equals; never the case itself nor the one it ran after."""
    def unlike(other: Case) -> tuple[bool, bool, bool]:
        return (other.dtype != case.dtype, other.op != case.op, other.shape != case.shape)

    usable = [c for c in candidates if c.id not in (case.id, previous)]
    random.Random(seed).shuffle(usable)
    return sorted(usable, key=unlike, reverse=True)


def neighbour(case: Case, candidates: Sequence[Case], seed: int, previous: str = ""
              ) -> Case | None:
    """The first of :func:`neighbours`, or None."""
    found = neighbours(case, candidates, seed, previous)
    return found[0] if found else None


def followed(target: str, case_id: str) -> str:
    """Note that ``case_id`` ran on ``target``; the case that ran before it ('' if none)."""
    before = _previous.get(target, "")
    _previous[target] = case_id
    return before


def _run_neighbour(target: str, case: Case, settings: Settings, previous: str, workdir: Path,
                   run: RunFn, quiet: Settings) -> Case | None:
    """Run the first neighbour whose kernel runs on the target (one that does not, being
    unsupported or failing to compile, is not tried again); the one that ran, or None."""
    seed = case.seed(settings.base_seed, 7)
    unusable = _unusable.setdefault(target, set())
    for n, other in enumerate(neighbours(case, settings.order, seed, previous)):
        if other.id in unusable or n >= TRIES:
            continue
        if run(other, workdir / f"order-neighbour-{n}", quiet).calls:
            return other
        unusable.add(other.id)
    return None


def check(
    outcome: Outcome, case: Case, workdir: Path, settings: Settings, run: RunFn, previous: str
) -> Outcome:
    """``outcome`` (a passed case's) failed when the case, run again right after a
    neighbour, gives other outputs (or fails); the message names both orders."""
    quiet = replace(settings, order=(), timing=ONCE, perf=False, peak=False)
    # the neighbour and the case again share one worker, on purpose (every other case
    # has its own): the state the neighbour leaves is what this check looks for
    pair = replace(quiet, keep_worker=True)
    other = _run_neighbour(outcome.target, case, settings, previous, workdir, run, pair)
    if other is None or outcome.output_digest is None:
        return outcome
    again = run(case, workdir / "order-again", replace(quiet, kept_worker=True))
    first = f"after {previous}" if previous else "first on its worker"
    if again.status is not Status.PASSED:
        problem = f"passed {first}, but not right after {other.id}: {again.message}"
    elif again.output_digest != outcome.output_digest:
        problem = (f"outputs differ with the order of cases: {first}, digest "
                   f"{(outcome.output_digest or '')[:12]}; right after {other.id}, digest "
                   f"{(again.output_digest or '')[:12]}")
    else:
        outcome.checks = {**(outcome.checks or {}), "order": {"after": other.id}}
        return outcome
    outcome.status = Status.FAILED
    outcome.message = f"order dependence (seed {outcome.seed}): {problem}"
    return outcome
