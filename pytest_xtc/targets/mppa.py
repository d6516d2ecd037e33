"""``mppa``, ``mppa-iss``, ``mppa-qemu``, ``mppa-hw``: XTC's MLIR backend for the Kalray MPPA.

Needs the Kalray toolchain (``KALRAY_TOOLCHAIN_DIR`` with ``bin/kvx-cos-gcc``) and the
``mlir_mppa`` and ``mlir_sdist`` Python modules, none of them on the public package index.
XTC cannot compile for MPPA without them, so there is no compile-only tier.

XTC pitfalls handled here (XTC 0.3.2):

- ``xtc.runtimes.accelerator.mppa`` calls ``os.getlogin()`` at import (for a default work
  dir this adapter never uses); without a controlling terminal that raises ``OSError``. The
  import is retried with the user name from ``getpass`` instead, else the probe says why.
- ``MppaConfig`` reads ``PLATFORM`` from the environment and calls ``exit(1)`` on an unknown
  value: ``PLATFORM`` is set from the validated platform around every XTC call, and any
  ``SystemExit`` becomes an error.
- ``MppaDevice`` is one per process: its work dir (XTC's runtime library, the simulator's
  files) is fixed at first use, beside the case directories, and only one platform can be
  run per process (a second one probes unavailable, saying so).
"""

from __future__ import annotations

import getpass
import importlib
import importlib.util
import os
import platform as host_platform
import shutil
import subprocess
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from pytest_xtc.core.adapter import (
    ONCE,
    Artifact,
    Capabilities,
    OptionSpec,
    Probe,
    RunResult,
    TargetAdapter,
    TargetSpec,
    Tier,
    Timing,
)
from pytest_xtc.core.cases.case import DEVICE, HOST, Case
from pytest_xtc.core.execution import xtc_env

if TYPE_CHECKING:
    import numpy as np

PLATFORMS = ("iss", "qemu", "hw")
ARCHS = ("kv3-1", "kv3-2")
DEFAULT_PLATFORM = "hw"  # XTC's own default
DEFAULT_ARCH = "kv3-2"
RUNTIME_MODULE = "xtc.runtimes.accelerator.mppa"
#: Launched by XTC through the shell (so found on PATH) for each simulated platform.
SIMULATORS = {"iss": "kvx-cluster", "qemu": "kvx-qemu-offload-bridge"}
#: Seconds for (compile, run) of one case. Compiling is mppa-opt, two C compilers and two
#: links whatever the platform; the first run of a process also builds XTC's runtime and
#: boots the board or simulator. The ISS simulates instruction by instruction (a large
#: matmul on one PE takes minutes); QEMU is faster but still far from hardware.
TIME_LIMITS = {"hw": (300.0, 120.0), "qemu": (600.0, 900.0), "iss": (600.0, 3600.0)}
#: XTC's scheduler calls that map the kernel onto the MPPA: one cluster, one PE (as XTC's
#: own MPPA tests do); added after the case's target-neutral schedule.
MESH_STEPS: tuple[tuple[str, tuple[Any, ...]], ...] = (
    ("define_memory_mesh", ({"mx": 1, "my": 1},)),
    ("define_processor_mesh", ({"px": 1, "py": 1, "psx": 1, "psy": 1},)),
)
_import_lock = threading.Lock()


class MppaTarget(TargetAdapter):
    ordinals = True  # NAME[N]: device N
    options = (
        OptionSpec(
            "mppa-platform",
            f"MPPA platform of the 'mppa' target: iss, qemu or hw (default {DEFAULT_PLATFORM}); "
            "mppa-iss, mppa-qemu and mppa-hw name theirs",
            env="XTC_MPPA_PLATFORM", choices=PLATFORMS,
        ),
        OptionSpec(
            "mppa-arch", f"MPPA architecture (default {DEFAULT_ARCH})",
            env="XTC_MPPA_ARCH", choices=ARCHS,
        ),
        OptionSpec(
            "mppa-firmware", "MPPA firmware file name (default: XTC's, ocl_fw_l1.elf)",
            env="XTC_MPPA_FIRMWARE",
        ),
    )

    #: (platform, arch, firmware) of the process's MppaDevice, and the target that chose it.
    _claimed: tuple[tuple[str, str, str], str] | None = None

    def __init__(self, spec: TargetSpec) -> None:
        super().__init__(spec)
        self.platform, self._config_error = _platform(spec.base, spec.options.get("mppa-platform"))
        self.arch = spec.options.get("mppa-arch") or DEFAULT_ARCH
        self.firmware: str | None = spec.options.get("mppa-firmware") or None
        self.ordinal = spec.ordinal or 0
        self._device: Any = None

    # -- probing --------------------------------------------------------------------------

    def probe(self) -> Probe:
        if host_platform.system() == "Darwin":
            return Probe(Tier.UNAVAILABLE, "MPPA is not supported on Darwin")
        if self._config_error:
            return Probe(Tier.UNAVAILABLE, self._config_error)
        if self.arch not in ARCHS:
            return Probe(
                Tier.UNAVAILABLE, f"unknown MPPA architecture {self.arch!r} (choose kv3-1 or kv3-2)"
            )
        versions = {"mppa-platform": self.platform, "mppa-arch": self.arch}

        def missing(reason: str) -> Probe:
            return Probe(Tier.UNAVAILABLE, reason, dict(versions))

        toolchain = os.environ.get("KALRAY_TOOLCHAIN_DIR")
        if not toolchain:
            return missing(
                "KALRAY_TOOLCHAIN_DIR is not set (needs the Kalray toolchain with kvx-cos-gcc)"
            )
        gcc = Path(toolchain) / "bin" / "kvx-cos-gcc"
        if not gcc.is_file():
            return missing(f"{gcc} not found (KALRAY_TOOLCHAIN_DIR must hold the Kalray toolchain)")
        ok, out = _command([str(gcc), "--version"])
        if not ok:
            return missing(f"{gcc} --version failed: {out}")
        versions["kvx-cos-gcc"] = out

        for name in ("mlir_mppa", "mlir_sdist"):
            location = _module_dir(name)
            if location is None:
                return missing(f"Python module {name} not found (XTC's MPPA backend needs it)")
            versions[name] = str(location)
        tools = Path(versions["mlir_mppa"]) / "bin"
        for tool in ("mppa-opt", "mppa-translate"):
            if not (tools / tool).is_file():
                return missing(f"{tools / tool} not found (mlir_mppa is incomplete)")

        device = ""
        if self.platform == "hw":
            reason, device = self._board(versions)
            if reason:
                return missing(reason)
        else:
            simulator = SIMULATORS[self.platform]
            found = shutil.which(simulator)
            if found is None:
                return missing(
                    f"{simulator} not found on PATH (XTC runs the MPPA {self.platform} "
                    "simulator with it; add $KALRAY_TOOLCHAIN_DIR/bin to PATH)"
                )
            device = f"Kalray {self.platform.upper()} simulator ({found}), {self.arch}"

        try:
            xtc_env.import_mlir_backend()
            runtime = import_runtime()
        except ImportError as exc:
            return missing(str(exc))
        versions.update(xtc_env.versions())
        code_arch = _code_arch()
        if self.arch != code_arch:
            return missing(
                f"XTC compiles MPPA code for {code_arch} only (MlirMppaTarget.arch()), so "
                f"MPPA arch {self.arch} cannot be certified"
            )
        known = list(runtime.config.VALID_FIRMWARES)
        if self.firmware is not None and self.firmware not in known:
            return missing(
                f"unknown MPPA firmware {self.firmware!r} (XTC knows {', '.join(known)})"
            )
        versions["mppa-firmware"] = self.firmware or runtime.config.DEFAULT_FIRMWARE
        # XTC's MppaDevice is one per process: the first MPPA target found available claims
        # it; another platform (or arch, firmware) in the same process would fail each case.
        wanted = (self.platform, self.arch, versions["mppa-firmware"])
        claimed = MppaTarget._claimed
        if claimed is not None and claimed[0] != wanted:
            return missing(
                f"this process already runs MPPA {'/'.join(claimed[0])} for target "
                f"{claimed[1]} and XTC's MppaDevice is one per process: run {self.name} "
                "in another pytest run"
            )
        if claimed is None:
            MppaTarget._claimed = (wanted, self.name)
        return Probe(Tier.EXECUTE, "", versions, device=device)

    def _board(self, versions: dict[str, str]) -> tuple[str, str]:
        """(why no usable board, or "", the board's description)."""
        diag = shutil.which("kvx-board-diag")
        if diag is None:
            return "kvx-board-diag not found on PATH (platform hw needs it to find a board)", ""
        ok, out = _command([diag, "--list-board"], timeout=60.0, first_line=False)
        if not ok:
            return f"kvx-board-diag --list-board failed: {out}", ""
        if "No Available board" in out or not out.strip():  # XTC's own test
            return "kvx-board-diag reports no MPPA board", ""
        if self.ordinal != 0:
            return (
                f"MPPA board {self.ordinal} cannot be used: XTC's MppaDevice drives board 0 only "
                "(its device_id() is 0)", ""
            )
        versions["kvx-board-diag"] = out.strip().splitlines()[0]
        return "", f"MPPA board 0 ({versions['kvx-board-diag']}), {self.arch}"

    # -- what the target supports -----------------------------------------------------------

    def capabilities(self) -> Capabilities:
        # Cases are expanded per placement from these: they must not depend on the probe.
        return Capabilities(
            ops=xtc_env.mlir_ops(), placements=frozenset({HOST, DEVICE}),
            schedules=xtc_env.scheduler_primitives(),
        )

    def lock_key(self) -> str | None:
        return f"mppa-{self.platform}:{self.ordinal}"

    def time_limits(self) -> tuple[float, float]:
        return TIME_LIMITS.get(self.platform, TIME_LIMITS["iss"])

    # -- compiling and running --------------------------------------------------------------

    def compile(self, case: Case, workdir: Path) -> Artifact:
        device = self.device(workdir)
        with self._xtc_env():
            module = xtc_env.compile_case(
                case, workdir, target=device, device=device, extra_steps=MESH_STEPS
            )
        # The module carries a config XTC built from the environment (default work dir
        # /tmp/<login>/mlir_mppa); its evaluator must use this process's device instead.
        module._mppa_config = device.config
        notes = {
            "platform": self.platform, "arch": self.arch, "firmware": device.config.firmware,
            "device work dir": device.config.work_dir,
        }
        return Artifact(workdir, module, sorted(workdir.iterdir()), notes)

    def run(
        self,
        artifact: Artifact,
        inputs: Sequence[np.ndarray],
        outputs: Sequence[np.ndarray],
        timing: Timing = ONCE,
    ) -> RunResult:
        # XTC's MPPA evaluator takes one call per measurement and no minimum duration.
        with self._xtc_env():
            return xtc_env.evaluate(artifact.handle, inputs, outputs, Timing(timing.repeat, 1, 0))

    def device(self, workdir: Path) -> Any:
        """XTC's MppaDevice for this platform, made at first use. It is one per process, so
        its work dir lies beside ``workdir`` (in pytest: in the session's base temp dir)."""
        if self._device is not None:
            return self._device
        runtime = import_runtime()
        existing = getattr(runtime.MppaDevice, "_instance", None)
        with self._xtc_env():
            if existing is not None:
                config = existing.config
                wanted = (self.platform, self.arch, self.firmware or config.firmware)
                if (config.platform, config.arch, config.firmware) != wanted:
                    raise RuntimeError(
                        "XTC's MppaDevice is one per process and is already set up for "
                        f"{config.platform}/{config.arch}/{config.firmware}; run MPPA "
                        f"{'/'.join(wanted)} in another pytest process"
                    )
            else:
                config = runtime.MppaConfig()
                config.set_platform(self.platform)
                config.set_arch(self.arch)
                if self.firmware:
                    config.set_firmware(self.firmware)
                work = workdir.resolve().parent / f"mppa-{self.platform}-{self.ordinal}-device"
                work.mkdir(parents=True, exist_ok=True)
                config.work_dir = str(work)
            try:
                self._device = runtime.MppaDevice(config)
            except (ImportError, KeyError) as exc:
                raise RuntimeError(f"XTC's MppaDevice cannot be made: {exc}") from exc
        return self._device

    @contextmanager
    def _xtc_env(self) -> Iterator[None]:
        """``PLATFORM`` set for XTC's MppaConfig, ``CLEAN_WORK_DIR`` off (it would remove
        XTC's default work dir), and XTC's ``exit(1)`` turned into an error."""
        saved = {name: os.environ.get(name) for name in ("PLATFORM", "CLEAN_WORK_DIR")}
        os.environ["PLATFORM"] = self.platform
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


def _platform(base: str, option: str | None) -> tuple[str, str]:
    """(platform, why the selection is wrong or ""): ``mppa-iss`` names its platform, plain
    ``mppa`` takes it from the option; a conflict between the two is an error."""
    named = base.removeprefix("mppa").removeprefix("-") or None
    chosen = named or option or DEFAULT_PLATFORM
    if chosen not in PLATFORMS:
        source = f"target {base}" if named else "--xtc-mppa-platform / XTC_MPPA_PLATFORM"
        return chosen, f"unknown MPPA platform {chosen!r} from {source} (choose iss, qemu or hw)"
    if named and option and option != named:
        return chosen, (
            f"target {base} names platform {named} but --xtc-mppa-platform / "
            f"XTC_MPPA_PLATFORM says {option}: use plain 'mppa' or drop the option"
        )
    return chosen, ""


def _command(
    argv: list[str], timeout: float = 30.0, first_line: bool = True
) -> tuple[bool, str]:
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


def _code_arch() -> str:
    """The arch XTC's MPPA target compiles for (kv3-2 in XTC 0.3.2, whatever MppaConfig says)."""
    from xtc.backends.mlir.MlirTarget.MlirMppaTarget import MlirMppaTarget

    return str(MlirMppaTarget.__new__(MlirMppaTarget).arch())  # needs no state


def _module_dir(name: str) -> Path | None:
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
