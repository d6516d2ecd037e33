"""The Kalray toolchain and XTC's MPPA runtime, as the mppa adapters find and drive them.

XTC pitfalls handled here (XTC 0.3.2):

- ``xtc.runtimes.accelerator.mppa`` calls ``os.getlogin()`` at import (for a default work
  dir the adapter never uses); without a controlling terminal that raises ``OSError``. The
  import is retried with the user name from ``getpass`` instead (:func:`import_runtime`).
- ``MppaConfig`` reads ``PLATFORM`` from the environment and calls ``exit(1)`` on an unknown
  value: :func:`platform_env` sets ``PLATFORM`` around every XTC call and turns any
  ``SystemExit`` into an error.
"""

from __future__ import annotations

import getpass
import importlib
import importlib.util
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

RUNTIME_MODULE = "xtc.runtimes.accelerator.mppa"
#: Launched by XTC through the shell (so found on PATH) for each simulated platform.
SIMULATORS = {"iss": "kvx-cluster", "qemu": "kvx-qemu-offload-bridge"}
_import_lock = threading.Lock()


def find_toolchain(versions: dict[str, str]) -> str:
    """Why the Kalray toolchain (``KALRAY_TOOLCHAIN_DIR`` with ``bin/kvx-cos-gcc``) or the
    ``mlir_mppa`` and ``mlir_sdist`` modules are missing, or "" with what was found added
    to ``versions``."""
    toolchain = os.environ.get("KALRAY_TOOLCHAIN_DIR")
    if not toolchain:
        return "KALRAY_TOOLCHAIN_DIR is not set (needs the Kalray toolchain with kvx-cos-gcc)"
    gcc = Path(toolchain) / "bin" / "kvx-cos-gcc"
    if not gcc.is_file():
        return f"{gcc} not found (KALRAY_TOOLCHAIN_DIR must hold the Kalray toolchain)"
    ok, out = command([str(gcc), "--version"])
    if not ok:
        return f"{gcc} --version failed: {out}"
    versions["kvx-cos-gcc"] = out
    for name in ("mlir_mppa", "mlir_sdist"):
        location = module_dir(name)
        if location is None:
            return f"Python module {name} not found (XTC's MPPA backend needs it)"
        versions[name] = str(location)
    tools = Path(versions["mlir_mppa"]) / "bin"
    for tool in ("mppa-opt", "mppa-translate"):
        if not (tools / tool).is_file():
            return f"{tools / tool} not found (mlir_mppa is incomplete)"
    return ""


def find_simulator(platform: str) -> tuple[str, str]:
    """(why the simulator of ``platform`` (iss, qemu) is missing or "", where it lies)."""
    simulator = SIMULATORS[platform]
    found = shutil.which(simulator)
    if found is None:
        return (f"{simulator} not found on PATH (XTC runs the MPPA {platform} simulator "
                "with it; add $KALRAY_TOOLCHAIN_DIR/bin to PATH)"), ""
    return "", found


def find_board(ordinal: int) -> tuple[str, str]:
    """(why MPPA board ``ordinal`` cannot be used or "", kvx-board-diag's first line)."""
    diag = shutil.which("kvx-board-diag")
    if diag is None:
        return "kvx-board-diag not found on PATH (platform hw needs it to find a board)", ""
    ok, out = command([diag, "--list-board"], timeout=60.0, first_line=False)
    if not ok:
        return f"kvx-board-diag --list-board failed: {out}", ""
    if "No Available board" in out or not out.strip():  # XTC's own test
        return "kvx-board-diag reports no MPPA board", ""
    if ordinal != 0:
        return (
            f"MPPA board {ordinal} cannot be used: XTC's MppaDevice drives board 0 only "
            "(its device_id() is 0)", ""
        )
    return "", out.strip().splitlines()[0]


def command(argv: list[str], timeout: float = 30.0, first_line: bool = True) -> tuple[bool, str]:
    """(whether ``argv`` succeeded, its output or why not)."""
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return False, f"{type(exc).__name__}: {exc}"
    out = (done.stdout or done.stderr).strip()
    if done.returncode != 0:
        return False, f"exit status {done.returncode}: {out[:200]}"
    return True, out.splitlines()[0] if first_line and out else out


def module_dir(name: str) -> Path | None:
    """Where module ``name`` lies, found without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(spec.origin).parent if spec.origin else None


def code_arch() -> str:
    """The arch XTC's MPPA target compiles for (kv3-2 in XTC 0.3.2, whatever MppaConfig says)."""
    from xtc.backends.mlir.MlirTarget.MlirMppaTarget import MlirMppaTarget

    return str(MlirMppaTarget.__new__(MlirMppaTarget).arch())  # needs no state


def import_runtime() -> ModuleType:
    """XTC's MPPA runtime module; ImportError with the cause when it cannot load.

    It calls ``os.getlogin()`` at import, which fails without a controlling terminal: the
    import is then retried with ``getpass.getuser()`` standing in for it.
    """
    with _import_lock:
        try:
            return importlib.import_module(RUNTIME_MODULE)
        except OSError as exc:
            first = exc
        except SystemExit as exc:
            raise ImportError(f"importing {RUNTIME_MODULE} called exit({exc.code})") from exc
        try:
            user = getpass.getuser()
        except Exception as exc:
            raise ImportError(
                f"{RUNTIME_MODULE} calls os.getlogin() at import, which failed ({first}), "
                f"and getpass.getuser() found no user name either ({exc})"
            ) from first
        login = os.getlogin
        os.getlogin = lambda: user
        try:
            return importlib.import_module(RUNTIME_MODULE)
        except (OSError, SystemExit) as exc:
            raise ImportError(f"{RUNTIME_MODULE} does not import: {exc!r}") from exc
        finally:
            os.getlogin = login


@contextmanager
def platform_env(platform: str) -> Iterator[None]:
    """``PLATFORM`` set for XTC's MppaConfig, ``CLEAN_WORK_DIR`` off (it would remove
    XTC's default work dir), and XTC's ``exit(1)`` turned into an error."""
    saved = {name: os.environ.get(name) for name in ("PLATFORM", "CLEAN_WORK_DIR")}
    os.environ["PLATFORM"] = platform
    os.environ.pop("CLEAN_WORK_DIR", None)
    try:
        yield
    except SystemExit as exc:
        raise RuntimeError(f"XTC's MPPA code called exit({exc.code})") from exc
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def embedded(device: Any, platform: str) -> Any:
    """XTC's MppaDevice ``device`` on the embedded road (``toolchains/embedded.py``):
    ``flash_module`` loads the compiled module the MPPA runs, ``call`` runs it on numpy
    operands through XTC's MPPA evaluator (its ISS, QEMU or board; one call per
    measurement, no minimum duration: what that evaluator takes), ``PLATFORM`` set
    around it. The class is made here, at first use: importing this module needs no XTC."""
    from pytest_xtc.core.adapter import Timing
    from pytest_xtc.core.xtc import xtc_env
    from pytest_xtc.targets.toolchains.embedded import EmbeddedRuntime

    class MppaEmbedded(EmbeddedRuntime):
        def __init__(self) -> None:
            super().__init__()
            self.xtc_device, self.platform, self.module = device, platform, None

        def flash_module(self, module: Any, inputs: int) -> None:
            """Flash XTC's compiled module (its library holds the MPPA image)."""
            self.flash(str(module.file_name), str(module.payload_name))
            self.module, self.inputs = module, inputs

        def target_name(self) -> str:
            return "mppa"

        def device_name(self) -> str:
            return f"MPPA ({self.platform})"

        def device_arch(self) -> str:
            return str(getattr(self.xtc_device.config, "arch", "kv3-2"))

        def call(self, operands: Any, timing: Timing, limit_s: float | None = None) -> list[float]:
            self.image()  # refuses a device nothing was flashed into
            ins, outs = list(operands[: self.inputs]), list(operands[self.inputs :])
            with platform_env(self.platform):
                result = xtc_env.evaluate(self.module, ins, outs, Timing(timing.repeat, 1, 0))
            return list(result.times)

    return MppaEmbedded()
