"""Host through the split (docs/split-run.md) against a local run, side by side in one run.

Run: ``python benchmarks/split_run.py [-k EXPR] [-n WORKERS]`` (default: the whole host
catalog, no -k; -n is passed to the pytest sessions, pytest-xdist). It runs, one after
the other, in a scratch folder:

1. a local run: ``pytest --xtc-target=host``;
2. the pack: ``pytest --xtc-target=host --xtc-pack=DIR`` (compile and pack, nothing runs);
3. the device runner on it, under ``python -S -s`` with numpy alone on its import path
   (no XTC, MLIR, pytest or pytest_xtc importable);
4. the judge: ``pytest --xtc-target=host --xtc-from-pack=DIR``.

Then it prints each phase's seconds beside the local run's, the pack's size, and
``same status: X of Y``: Y the cases of the local run, X those whose JUnit status (passed,
failed, skipped, xfailed, with the skip's reason kind) is the same judged from the pack.
Every case that differs is listed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np


def session(cwd: Path, junit: Path, extra: list[str], args: argparse.Namespace) -> float:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
               "--xtc-target=host", f"--junitxml={junit}", *extra]
    if args.k:
        command += ["-k", args.k]
    if args.n:
        command += ["-n", args.n]
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def junit_statuses(path: Path) -> dict[str, str]:
    """Each conformance case's status: passed, failed, error, xfailed, skipped."""
    found: dict[str, str] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name", "")
        if not name.startswith("test_conformance["):
            continue
        status = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                status = child.tag
            elif child.tag == "skipped":
                status = "xfailed" if child.get("type") == "pytest.xfail" else "skipped"
        found[name] = status
    return found


def numpy_only(root: Path) -> Path:
    folder = root / "numpy-only"
    folder.mkdir()
    site = Path(np.__file__).resolve().parent.parent
    for name in ("numpy", "numpy.libs"):
        if (site / name).exists():
            (folder / name).symlink_to(site / name)
    return folder


def size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="a pytest -k expression (default: all)")
    parser.add_argument("-n", default="", help="pytest-xdist workers for the sessions")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="split-run-") as scratch:
        root = Path(scratch)
        cwd, pack = root / "session", root / "pack"
        cwd.mkdir()
        local_s = session(cwd, root / "local.xml", [], args)
        pack_s = session(cwd, root / "pack.xml", [f"--xtc-pack={pack}"], args)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env["PYTHONPATH"] = str(numpy_only(root))
        start = time.perf_counter()
        ran = subprocess.run([sys.executable, "-S", "-s", str(pack / "runner/device_runner.py"),
                              str(pack)], env=env, capture_output=True, text=True)
        runner_s = time.perf_counter() - start
        if ran.returncode != 0:
            print(f"the device runner failed (status {ran.returncode}): {ran.stderr[-500:]}")
        judge_s = session(cwd, root / "judged.xml", [f"--xtc-from-pack={pack}"], args)
        local = junit_statuses(root / "local.xml")
        judged = junit_statuses(root / "judged.xml")
        same = sum(1 for name, status in local.items() if judged.get(name) == status)
        for name, status in sorted(local.items()):
            if judged.get(name) != status:
                print(f"differs: {name}: local {status}, from the pack {judged.get(name)}")
        split_s = pack_s + runner_s + judge_s
        print(f"selection: {args.k or 'the whole host catalog'}; pack "
              f"{size(pack) / 2**20:.1f} MiB (results included)")
        print(f"local run {local_s:.1f} s | pack {pack_s:.1f} s, runner {runner_s:.1f} s, "
              f"judge {judge_s:.1f} s: split {split_s:.1f} s ({split_s / local_s:.2f} x local)")
        print(f"same status: {same} of {len(local)}")
        return 0 if same == len(local) and local else 1


if __name__ == "__main__":
    sys.exit(main())
