"""The per-case cost of a clean worker: host cases' target work through a worker that
tidies after each case (ends the processes it left, compares its state fingerprint)
against the same worker without tidying (plain reuse), side by side, alternating, several
rounds. Goal (issue 20): at most 1.05. Also the tidying's own time per case.

    .venv/bin/python benchmarks/worker_hygiene.py [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from functools import partial
from pathlib import Path

from pytest_xtc.conformance import builtin_cases
from pytest_xtc.core.adapter import TargetSpec
from pytest_xtc.core.cases import graphs, values
from pytest_xtc.core.execution.settings import Settings
from pytest_xtc.core.execution.work import WorkRequest, target_work
from pytest_xtc.core.outcome import Phase
from pytest_xtc.core.workers import hygiene, isolation
from pytest_xtc.targets.host import HostTarget

PICK = ("matmul-float32-13x11x7-", "relu-float32-5x7-", "matmul-float32-31x37x29-")


def requests(workdir: Path) -> list[WorkRequest]:
    settings = Settings(perf=False)
    chosen = [c for c in builtin_cases() if c.values == "random" and c.key.startswith(PICK)]
    made = []
    for n, case in enumerate(chosen):
        inputs = case.make_inputs(case.seed(0))
        outputs = [values.unwritten(o.shape, o.dtype) for o in graphs.outputs(case.graph)]
        made.append(WorkRequest(case, workdir / str(n), inputs, outputs, True, settings))
    return made


def one_pass(worker: isolation.Worker, work: list[WorkRequest]) -> float:
    limits = {Phase.COMPILE.value: 120.0, Phase.RUN.value: 60.0, Phase.WAIT_DEVICE.value: 60.0}
    start = time.perf_counter()
    for request in work:
        done = worker.call(request, limits, Phase.COMPILE.value)
        assert not done.failure, done.failure
    return (time.perf_counter() - start) / len(work)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    adapter = HostTarget(TargetSpec("host", "host", None, {}))
    work = requests(Path(tempfile.mkdtemp(prefix="xtc-hygiene-")))
    adapter.prepare(work[0].workdir.parent / "prepare")
    handler = partial(target_work, adapter, in_worker=True)
    workers = {tidy: isolation.Worker(handler, clean=tidy) for tidy in (True, False)}
    times: dict[bool, list[float]] = {True: [], False: []}
    try:
        for tidy in (True, False):
            one_pass(workers[tidy], work[:2])  # fork and warm
        for _ in range(rounds):
            for tidy in (True, False):
                times[tidy].append(one_pass(workers[tidy], work))
    finally:
        for worker in workers.values():
            worker.stop()
    start = time.perf_counter()
    for _ in range(200):
        hygiene.changes(hygiene.fingerprint(), hygiene.fingerprint())
    fingerprint_s = (time.perf_counter() - start) / 400
    clean, plain = statistics.median(times[True]), statistics.median(times[False])
    print(f"{len(work)} host cases' target work, median of {rounds} rounds per case "
          "(machine shared: figures are noisy)")
    print(f"  plain worker reuse     {1000 * plain:8.1f} ms/case")
    print(f"  clean worker (tidied)  {1000 * clean:8.1f} ms/case")
    print(f"  ratio                  {clean / plain:8.3f}   (goal: at most 1.05)")
    print(f"  one state fingerprint  {1e6 * fingerprint_s:8.0f} us")


if __name__ == "__main__":
    main()
