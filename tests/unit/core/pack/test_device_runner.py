"""The device runner is several files (``device_*.py``): a pack carries them all in
``runner/`` and they load from there alone, with no package and no import path
(``python3 -I``), writing nothing into the pack."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pytest_xtc.core.pack import device_runner, writer


def empty_pack(root: Path) -> Path:
    pack = root / "pack"
    writer.finish(pack, {})
    return pack


def run_isolated(pack: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-I", str(pack / "runner" / "device_runner.py"),
                           str(pack)], capture_output=True, text=True, timeout=60, cwd=pack)


def test_a_packed_runner_loads_its_own_files_isolated(tmp_path: Path) -> None:
    pack = empty_pack(tmp_path)
    shipped = sorted(p.name for p in (pack / "runner").iterdir())
    assert {"device_runner.py", "device_pack.py", "device_case.py"} <= set(shipped)
    ran = run_isolated(pack)
    assert ran.returncode == 4, ran.stderr  # a pack of no case: no case gave a result
    run = json.loads((pack / "results" / device_runner.RUN).read_text())
    assert sorted(run["runner_sha256"]) == shipped
    assert not list(pack.rglob("__pycache__"))


def test_a_runner_missing_one_of_its_files_does_not_run(tmp_path: Path) -> None:
    """Copied as a single file (device_runner.py alone) the runner stops; it never falls
    back on an installed pytest_xtc's modules."""
    pack = empty_pack(tmp_path)
    (pack / "runner" / "device_case.py").unlink()
    ran = run_isolated(pack)
    assert ran.returncode == 1 and "device_case" in ran.stderr, ran.stderr
    assert not (pack / "results").exists()
