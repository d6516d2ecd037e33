"""Acceptance over the host catalog: the faults of a hostile kernel, all applied in the
first case of a run, leave every other case's verdict as a clean run gives it.

Two real host adapters, each through its isolated host as a session loads it: a clean one
and one whose first case, once compiled, empties the temporary folder (its own and the
session's, named: this script's ``TMPDIR``, a folder of its own holding every case's work
folder, as pytest's base temporary folder lies in the temporary folder) and fills it
(``--fill-mib`` MiB; both refused outside its own folder: core/workers/confinement.py),
calls libc ``setenv("PATH", "/nonexistent")``,
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

    .venv/bin/python benchmarks/pristine_catalog.py [--limit N] [--flood-mib M] [--fill-mib F]
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import sys
import tempfile
import time
from importlib.metadata import EntryPoint
from pathlib import Path

HERE = Path(__file__).resolve().parent
FAULTS = ("wipe_and_fill({fill}); ctypes.CDLL(None).setenv(b'PATH', b'/nonexistent', 1); "
          "tempfile.tempdir = tempfile.mkdtemp(); os.rmdir(tempfile.tempdir); "
          "subprocess.Popen = broken_popen; hold_address_space(); flood({mib}); "
          "reach_session(); forge_reply(os.putenv, ('PATH', '/nonexistent')); "
          "reach_siblings(); renice_siblings(); os.abort()")
REACH_SESSION = """

def wipe_and_fill(mib):
    import shutil
    session_tmp = os.environ["PRISTINE_SESSION_TMP"]
    for folder in (tempfile.gettempdir(), session_tmp):
        for name in os.listdir(folder):
            path = os.path.join(folder, name)
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
            except OSError:
                pass
    try:
        with open(os.path.join(session_tmp, "filler"), "wb") as out:
            for _ in range(mib):
                out.write(bytes(1 << 20))
    except OSError:
        pass

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
    parser.add_argument("--fill-mib", type=int, default=64)
    args = parser.parse_args()
    # the session's temporary folder: a folder of this run's, never the machine's (the
    # first case empties it)
    session_tmp = Path(tempfile.mkdtemp(prefix="pristine-catalog-tmp-"))
    clean_base = Path(tempfile.mkdtemp(prefix="pristine-catalog-clean-"))  # out of it
    os.environ["TMPDIR"] = os.environ["PRISTINE_SESSION_TMP"] = str(session_tmp)
    tempfile.tempdir = str(session_tmp)
    try:
        return _run(args, clean_base)
    finally:
        shutil.rmtree(session_tmp, ignore_errors=True)
        shutil.rmtree(clean_base, ignore_errors=True)


def _run(args: argparse.Namespace, clean_base: Path) -> int:
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
        "{fault}", FAULTS.format(mib=args.flood_mib, fill=args.fill_mib)) + REACH_SESSION
    (scratch / "pristine_every_fault.py").write_text(source)
    sys.path.insert(0, str(scratch))
    faulty = IsolatedAdapter(TargetSpec("host-faulty", "host"), EntryPoint(
        "host-faulty", "pristine_every_fault:Target", registry.GROUP), ahead)
    settings = Settings(perf=False)
    # each run's base folder, as pytest's base temp: the faulty run's in the temporary
    # folder its first case empties, the clean run's out of its reach
    bases = {"clean": clean_base, "faulty": scratch / "faulty"}
    bases["faulty"].mkdir()
    spent = {"clean": 0.0, "faulty": 0.0}
    counts: collections.Counter[str] = collections.Counter()
    differ = []
    try:
        for n, case in enumerate(cases):
            verdicts, said = {}, {"clean": "", "faulty": ""}
            for name, adapter in (("clean", clean), ("faulty", faulty)):
                start = time.perf_counter()
                try:  # as pytest's mktemp: in the run's base folder, made once
                    (bases[name] / str(n)).mkdir()
                except OSError:  # pytest's set-up fails: an infrastructure error
                    verdicts[name] = "error (the session's folder is gone)"
                    continue
                outcome = run_case(adapter, case, bases[name] / str(n), settings)
                spent[name] += time.perf_counter() - start
                verdicts[name] = outcome.status.value
                said[name] = outcome.message[:300]
            if n == 0:
                print(f"first case {case.id}: clean {verdicts['clean']}, "
                      f"faulty {verdicts['faulty']} (its own verdict is not compared)")
                continue
            counts[verdicts["clean"]] += 1
            if verdicts["clean"] != verdicts["faulty"]:
                differ.append(f"{case.id}: clean {verdicts['clean']} ({said['clean']}), after "
                              f"the faults {verdicts['faulty']} ({said['faulty']})")
    finally:
        clean.stop()
        faulty.stop()
    kept = (Path(os.environ["PRISTINE_SESSION_TMP"]) / "filler").exists()
    print(f"{len(cases) - 1} later cases; clean verdicts {dict(counts)}; "
          f"{len(differ)} differ after the faults; the session's temporary folder "
          f"{'filled' if kept else 'not filled'}")
    for line in differ:
        print("  " + line)
    print(" ".join(f"{k} {v / len(cases):.3f} s/case" for k, v in spent.items()))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
