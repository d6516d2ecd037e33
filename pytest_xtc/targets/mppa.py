"""``mppa``, ``mppa-iss``, ``mppa-qemu``, ``mppa-hw``: XTC's MLIR backend for the Kalray MPPA.

Needs the Kalray toolchain (``KALRAY_TOOLCHAIN_DIR`` with ``bin/kvx-cos-gcc``) and the
``mlir_mppa`` and ``mlir_sdist`` Python modules, none of them on the public package index.
XTC cannot compile for MPPA without them, so there is no compile-only tier.

XTC pitfalls handled here (XTC 0.3.2), the first two in :mod:`.toolchains.kalray`:

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

import platform as host_platform
import tempfile
from collections.abc import Sequence
from pathlib import Path
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
from pytest_xtc.core.xtc import xtc_env
from pytest_xtc.targets.toolchains import kalray
from pytest_xtc.targets.toolchains.kalray import RUNTIME_MODULE, SIMULATORS, import_runtime

if TYPE_CHECKING:
    import numpy as np

PLATFORMS = ("iss", "qemu", "hw")
ARCHS = ("kv3-1", "kv3-2")
DEFAULT_PLATFORM = "hw"  # XTC's own default
DEFAULT_ARCH = "kv3-2"
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
__all__ = [  # the names this module has always offered, the toolchain's from toolchains/
    "ARCHS", "DEFAULT_ARCH", "DEFAULT_PLATFORM", "MESH_STEPS", "PLATFORMS", "RUNTIME_MODULE",
    "SIMULATORS", "TIME_LIMITS", "MppaTarget", "import_runtime",
]


class MppaTarget(TargetAdapter):
    ordinals = True  # NAME[N]: device N
    placements = frozenset({HOST, DEVICE})
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
        reason = kalray.find_toolchain(versions)
        device = ""
        if not reason:
            reason, device = self._find_device(versions)
        if not reason:
            reason = self._check_xtc(versions)
        if not reason:
            reason = self._claim(versions)
        if reason:
            return Probe(Tier.UNAVAILABLE, reason, dict(versions))
        return Probe(Tier.EXECUTE, "", versions, device=device)

    def _find_device(self, versions: dict[str, str]) -> tuple[str, str]:
        """(why no board or simulator can be used, or "", the device's description)."""
        if self.platform != "hw":
            reason, found = kalray.find_simulator(self.platform)
            if reason:
                return reason, ""
            return "", f"Kalray {self.platform.upper()} simulator ({found}), {self.arch}"
        reason, board = kalray.find_board(self.ordinal)
        if reason:
            return reason, ""
        versions["kvx-board-diag"] = board
        return "", f"MPPA board 0 ({board}), {self.arch}"

    def _check_xtc(self, versions: dict[str, str]) -> str:
        """Why XTC cannot run this arch and firmware, or "" with XTC's versions and the
        firmware added to ``versions``."""
        try:
            xtc_env.import_mlir_backend()
            runtime = import_runtime()
        except ImportError as exc:
            return str(exc)
        versions.update(xtc_env.versions())
        code_arch = kalray.code_arch()
        if self.arch != code_arch:
            return (
                f"XTC compiles MPPA code for {code_arch} only (MlirMppaTarget.arch()), so "
                f"MPPA arch {self.arch} cannot be certified"
            )
        known = list(runtime.config.VALID_FIRMWARES)
        if self.firmware is not None and self.firmware not in known:
            return f"unknown MPPA firmware {self.firmware!r} (XTC knows {', '.join(known)})"
        versions["mppa-firmware"] = self.firmware or runtime.config.DEFAULT_FIRMWARE
        return ""

    def _claim(self, versions: dict[str, str]) -> str:
        """Claim the process's MppaDevice, or say why another MPPA target already did.

        XTC's MppaDevice is one per process: the first MPPA target found available claims
        it; another platform (or arch, firmware) in the same process would fail each case.
        """
        wanted = (self.platform, self.arch, versions["mppa-firmware"])
        claimed = MppaTarget._claimed
        if claimed is not None and claimed[0] != wanted:
            return (
                f"this process already runs MPPA {'/'.join(claimed[0])} for target "
                f"{claimed[1]} and XTC's MppaDevice is one per process: run {self.name} "
                "in another pytest run"
            )
        if claimed is None:
            MppaTarget._claimed = (wanted, self.name)
        return ""

    # -- what the target supports -----------------------------------------------------------

    def capabilities(self) -> Capabilities:
        # Cases are expanded per placement from these: they must not depend on the probe.
        return Capabilities(
            ops=xtc_env.mlir_ops(), placements=self.placements,
            schedules=xtc_env.scheduler_primitives(),
        )

    def lock_key(self) -> str | None:
        return f"mppa-{self.platform}:{self.ordinal}"

    def time_limits(self) -> tuple[float, float]:
        return TIME_LIMITS.get(self.platform, TIME_LIMITS["iss"])

    # -- compiling and running --------------------------------------------------------------

    def compile(self, case: Case, workdir: Path) -> Artifact:
        device = self.device(workdir)
        with kalray.platform_env(self.platform):
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
        # The embedded road (docs/embedded.md): flash the image, run it there through XTC's
        # MPPA evaluator (one call per measurement, no minimum duration), judged here.
        device = kalray.embedded(self.device(artifact.directory), self.platform)
        device.flash_module(artifact.handle, len(inputs))
        return RunResult(times=device.call([*inputs, *outputs], timing))

    def device(self, workdir: Path) -> Any:
        """XTC's MppaDevice for this platform, made at first use. It is one per process, so
        its work dir lies beside ``workdir`` (in pytest: in the session's base temp dir)."""
        if self._device is not None:
            return self._device
        runtime = import_runtime()
        existing = getattr(runtime.MppaDevice, "_instance", None)
        with kalray.platform_env(self.platform):
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
                # in the temp folder, which in a case's worker is the case's private one
                # (inside its work folder): a confined case worker writes nowhere else
                work = Path(tempfile.mkdtemp(prefix=f"mppa-{self.platform}-{self.ordinal}-"))
                config.work_dir = str(work)
            try:
                self._device = runtime.MppaDevice(config)
            except (ImportError, KeyError) as exc:
                raise RuntimeError(f"XTC's MppaDevice cannot be made: {exc}") from exc
        return self._device


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

