"""Acceptance over the host catalog: the faults of a hostile kernel, all applied in the
first case of a run, leave every other case's verdict as a clean run gives it.

Two real host adapters, each through its isolated host as a session loads it: a clean one
and one whose first case, once compiled, calls libc ``setenv("PATH", "/nonexistent")``,
sets ``tempfile.tempdir`` to a folder it deletes, replaces ``subprocess.Popen``, reserves
all but a few MiB of the address space, writes ``--flood-mib`` MiB to fd 1, sends SIGSTOP
then SIGKILL to this script's process (the session: refused by the fence), writes into
its reply pipe a frame whose unpickling would set its host's ``PATH`` (refused: replies
are not believed, core/workers/unpickling.py), stops and renices its host's other
children (the next case's worker, forked ahead: ``HostLimits.ahead``, as a serial session
on a machine of two cores or more has it; the stop is refused by the fence, the reniced
worker serves no case), then aborts.
Every host case of the catalog (``--limit`` to take fewer) runs on both, case by case in
the catalog's order; the script prints the count of cases, the verdicts by status, each
case whose verdicts differ, and the seconds per case of each run. Exit 1 if any differs.

    .venv/bin/python benchmarks/pristine_catalog.py [--limit N] [--flood-mib M]
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from importlib.metadata import EntryPoint
from pathlib import Path

HERE = Path(__file__).resolve().parent
FAULTS = ("ctypes.CDLL(None).setenv(b'PATH', b'/nonexistent', 1); "
          "tempfile.tempdir = tempfile.mkdtemp(); os.rmdir(tempfile.tempdir); "
          "subprocess.Popen = broken_popen; hold_address_space(); flood({mib}); "
          "reach_session(); forge_reply(os.putenv, ('PATH', '/nonexistent')); "
          "reach_siblings(); renice_siblings(); os.abort()")
REACH_SESSION = """

def reach_session():
    for number in (signal.SIGSTOP, signal.SIGKILL):
        try:
            os.kill(grandparent(), number)
        except OSError:
            pass


def reach_siblings():
    try:
        signal_siblings(signal.SIGSTOP)
    except OSError:
        pass
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=0, help="the first N host cases (0: all)")
    parser.add_argument("--flood-mib", type=int, default=256)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE.parent))
    from pytest_xtc.conformance import builtin_cases
    from pytest_xtc.core.adapter import TargetSpec
    from pytest_xtc.core.adapters import registry
    from pytest_xtc.core.execution.remote import HostLimits, IsolatedAdapter
    from pytest_xtc.core.execution.runner import Settings, run_case
    from pytest_xtc.core.execution.suite import cases_for
    from tests.unit.core.workers.test_children import ADAPTER

    scratch = Path(tempfile.mkdtemp(prefix="pristine-catalog-"))
    ahead = HostLimits(ahead=True)  # as a serial session on two cores or more
    clean = IsolatedAdapter(TargetSpec("host", "host"), EntryPoint(
        "host", "pytest_xtc.targets.host:HostTarget", registry.GROUP), ahead)
    cases = cases_for(clean, builtin_cases())
    if args.limit:
        cases = cases[: args.limit]
    source = ADAPTER.replace("{first!r}", repr(cases[0].id)).replace(
        "{fault}", FAULTS.format(mib=args.flood_mib)) + REACH_SESSION
    (scratch / "pristine_every_fault.py").write_text(source)
    sys.path.insert(0, str(scratch))
    faulty = IsolatedAdapter(TargetSpec("host-faulty", "host"), EntryPoint(
        "host-faulty", "pristine_every_fault:Target", registry.GROUP), ahead)
    settings = Settings(perf=False)
    spent = {"clean": 0.0, "faulty": 0.0}
    counts: collections.Counter[str] = collections.Counter()
    differ = []
    try:
        for n, case in enumerate(cases):
            verdicts = {}
            for name, adapter in (("clean", clean), ("faulty", faulty)):
                start = time.perf_counter()
                outcome = run_case(adapter, case, scratch / name / str(n), settings)
                spent[name] += time.perf_counter() - start
                verdicts[name] = outcome.status.value
            if n == 0:
                print(f"first case {case.id}: clean {verdicts['clean']}, "
                      f"faulty {verdicts['faulty']} (its own verdict is not compared)")
                continue
            counts[verdicts["clean"]] += 1
            if verdicts["clean"] != verdicts["faulty"]:
                differ.append(f"{case.id}: clean {verdicts['clean']}, after the faults "
                              f"{verdicts['faulty']}")
    finally:
        clean.stop()
        faulty.stop()
    print(f"{len(cases) - 1} later cases; clean verdicts {dict(counts)}; "
          f"{len(differ)} differ after the faults")
    for line in differ:
        print("  " + line)
    print(" ".join(f"{k} {v / len(cases):.3f} s/case" for k, v in spent.items()))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
