"""Split runs in the runner's terms (docs/split-run.md). No pytest.

- packing (``Settings.pack_dir``): a compiled case, exported by its adapter, is written
  into the pack with its inputs and call protocol (or its compile failure, judged later as
  such); it is not run here;
- judging (``Settings.from_pack``): a case's :class:`Work` is read from the pack's results
  instead of being made: the same checks then judge it; results that do not belong to the
  pack are refused (an error naming why), never judged;
- remote (``Settings.run_on``): the case is packed alone and run at once through an execnet
  gateway by the same device runner, then judged as from a pack.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from pytest_xtc.core.adapter import Timing
from pytest_xtc.core.cases import graphs
from pytest_xtc.core.cases.case import Case
from pytest_xtc.core.execution.settings import Settings
from pytest_xtc.core.execution.work import TIMED_RUN, Call, Work, WorkRequest
from pytest_xtc.core.outcome import Failure, FailureKind, Phase
from pytest_xtc.core.pack import writer
from pytest_xtc.core.pack.device_inputs import input_digest
from pytest_xtc.core.pack.results import PackResults, Refused

_opened: dict[str, PackResults] = {}
_FAILURES = {"timeout": Failure.TIMEOUT, "signal": Failure.SIGNAL, "exit": Failure.EXIT_CODE,
             "error": Failure.EXCEPTION}


def opened(pack: str) -> PackResults:
    """The pack ``pack`` with its results, checked once per process (PackError)."""
    if pack not in _opened:
        _opened[pack] = PackResults(Path(pack))
    return _opened[pack]


def save(pack: Path, target: str, case: Case, request: WorkRequest, done: Work,
         limits: Mapping[str, float]) -> None:
    """Write ``case`` into ``pack``: its exported kernel, inputs and protocol, or the
    failure that kept it from being compiled."""
    record: dict[str, Any] = {"compile_s": done.compile_s}
    if done.failure:
        record.update(failure=done.failure, phase=done.phase.value,
                      infrastructure=done.infrastructure,
                      kind=[done.kind.what.value, done.kind.detail] if done.kind else None)
    names = [o.name for o in graphs.inputs(case.graph)]
    outputs = [(o.name, tuple(o.shape), str(o.dtype)) for o in graphs.outputs(case.graph)]
    calls = [limits[Phase.RUN.value]] * (1 + len(request.more)) + [limits[TIMED_RUN]]
    seeds = [case.seed(request.settings.base_seed, n) for n in range(1 + len(request.more))]
    timings = [asdict(Timing())] * (1 + len(request.more)) + [asdict(request.settings.timing)]
    writer.write_case(pack, case.id, target, list(zip(names, request.inputs, strict=True)),
                      request.more, {"values": case.values, "seeds": seeds}, outputs,
                      timings, calls, None if done.failure else done.export, record)


def from_pack(results: PackResults, case: Case, input_sets: list[list[np.ndarray]],
              settings: Settings, target: str) -> Work:
    """``case``'s work on ``target`` as the pack's runner did it, or why it is refused."""
    line = results.record(target, case.id)
    if line is None:
        return _refused(f"the pack holds no such case for {target} (packed from another "
                        "selection or target?)")
    if line.get("failure"):
        kind = line.get("kind")
        return Work(Phase(line["phase"]), line["failure"],
                    FailureKind(Failure(kind[0]), kind[1]) if kind else None,
                    bool(line.get("infrastructure")), float(line.get("compile_s", 0.0)))
    if line.get("inputs_sha256") != [input_digest(s) for s in input_sets]:
        return _refused("the pack's inputs are not this session's (another --xtc-seed, "
                        "or another catalog version)")
    try:
        result = results.result(line)
    except Refused as exc:
        return _refused(str(exc))
    done = Work(Phase.RUN, compile_s=float(line.get("compile_s", 0.0)))
    if result.status != "ok":
        what = _FAILURES.get(result.status, Failure.EXCEPTION)
        done.failure = f"run failed on the device runner: {result.error}"
        done.kind = FailureKind(what, result.detail)
        done.infrastructure = result.infrastructure
        return done
    done.phase, done.guarded = Phase.CHECK, bool(results.call(line).get("guarded"))
    done.calls = [Call(c.inputs_left, c.outputs, c.guard) for c in result.calls]
    done.calls[-1].timed = True
    done.run_s, done.times = result.calls[0].wall_s, result.calls[-1].times
    if settings.repeat_check:
        done.second = done.calls[-1].outputs
    return done


def _refused(why: str) -> Work:
    return Work(Phase.RUN, f"refused: {why}", FailureKind(Failure.EXCEPTION, "Refused"), True)


def run_remote(case: Case, request: WorkRequest, done: Work, limits: Mapping[str, float],
               target: str, input_sets: list[list[np.ndarray]]) -> Work:
    """Pack ``case`` alone, run it through the session's execnet gateway, judge it."""
    if done.failure:
        return done
    from pytest_xtc.core.pack import remote

    with tempfile.TemporaryDirectory(prefix="pytest-xtc-remote-") as scratch:
        pack = Path(scratch) / "pack"
        writer.start(pack)
        save(pack, target, case, request, done, limits)
        writer.finish(pack, {})
        try:
            remote.run(request.settings.run_on, pack)
            results = PackResults(pack)
        except (writer.PackError, remote.RemoteError) as exc:
            return Work(Phase.RUN, f"remote run failed: {exc}", None, True, done.compile_s)
        return from_pack(results, case, input_sets, request.settings, target)
