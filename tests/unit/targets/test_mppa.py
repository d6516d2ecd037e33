"""The MPPA adapter's probe and its mapping onto XTC, with a FAKE Kalray toolchain.

No Kalray toolchain exists where these tests run: every ``test_fake_toolchain_*`` test
builds shell-script stand-ins (``kvx-cos-gcc``, simulators, ``kvx-board-diag``) and empty
``mlir_mppa`` / ``mlir_sdist`` packages, to check what the probe concludes from them.
Nothing here compiles or runs a kernel for MPPA; a probe saying "available" under a fake
toolchain says only that the probe logic found every piece it looks for.
"""

from __future__ import annotations

import getpass
import importlib
import os
import platform
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_xtc.core.adapter import Tier
from pytest_xtc.core.cases.case import DEVICE
from pytest_xtc.core.xtc import xtc_env
from pytest_xtc.targets import mppa
from pytest_xtc.targets.mppa import MppaTarget
from tests.conftest import fake_executable, spec_of

FAKE_GCC_VERSION = "kvx-cos-gcc (FAKE toolchain for tests) 0.0"
NO_TOOLCHAIN = "KALRAY_TOOLCHAIN_DIR is not set (needs the Kalray toolchain with kvx-cos-gcc)"


def adapter(name: str = "mppa-iss", **options: str) -> MppaTarget:
    return MppaTarget(spec_of(name, options))




@dataclass
class FakeToolchain:
    root: Path  # $KALRAY_TOOLCHAIN_DIR
    path_bin: Path  # on PATH: simulators, kvx-board-diag
    modules: Path  # on sys.path: mlir_mppa, mlir_sdist

    @property
    def gcc(self) -> Path:
        return self.root / "bin" / "kvx-cos-gcc"

    def remove(self, piece: str) -> None:
        """Take one piece away (a file, or a package directory)."""
        target = {
            "kvx-cos-gcc": self.gcc,
            "mppa-opt": self.modules / "mlir_mppa" / "bin" / "mppa-opt",
        }.get(piece)
        if target is None and (self.modules / piece).is_dir():
            for file in sorted((self.modules / piece).rglob("*"), reverse=True):
                file.rmdir() if file.is_dir() else file.unlink()
            (self.modules / piece).rmdir()
        else:
            (target or self.path_bin / piece).unlink()
        importlib.invalidate_caches()


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeToolchain]:
    """A complete FAKE Kalray toolchain: every piece the probe looks for, none working."""
    # XTC tries ``import mlir_sdist`` when its MLIR backend loads: load it before the fake
    # packages are on sys.path, and forget any fake that got imported after the test.
    xtc_env.import_mlir_backend()
    for name in ("XTC_MPPA_PLATFORM", "XTC_MPPA_ARCH", "XTC_MPPA_FIRMWARE", "PLATFORM"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    monkeypatch.setattr(MppaTarget, "_claimed", None)  # no MPPA target probed yet
    fake = FakeToolchain(tmp_path / "kalray", tmp_path / "path-bin", tmp_path / "py")
    fake_executable(fake.gcc, f'echo "{FAKE_GCC_VERSION}"')
    for tool in ("mppa-opt", "mppa-translate"):
        fake_executable(fake.modules / "mlir_mppa" / "bin" / tool, "exit 1")
    for package in ("mlir_mppa", "mlir_sdist"):
        (fake.modules / package).mkdir(parents=True, exist_ok=True)
        (fake.modules / package / "__init__.py").write_text("")
    fake_executable(fake.path_bin / "kvx-cluster", "exit 1")
    fake_executable(fake.path_bin / "kvx-qemu-offload-bridge", "exit 1")
    fake_executable(fake.path_bin / "kvx-board-diag", 'echo "Board 0: FAKE k300"')
    monkeypatch.setenv("KALRAY_TOOLCHAIN_DIR", str(fake.root))
    monkeypatch.setenv("PATH", f"{fake.path_bin}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.syspath_prepend(str(fake.modules))
    yield fake
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(tmp_path)):
            del sys.modules[name]


@pytest.fixture
def clean_modules() -> Iterator[Callable[[str], None]]:
    """Forget modules for the test (``purge(prefix)``); the originals come back after,
    and whatever the test imported under those names goes away."""
    prefixes: list[str] = []
    saved: dict[str, Any] = {}

    def purge(prefix: str) -> None:
        prefixes.append(prefix)
        for name in [n for n in sys.modules if n == prefix or n.startswith(prefix + ".")]:
            saved[name] = sys.modules.pop(name)

    yield purge
    for prefix in prefixes:
        for name in [n for n in sys.modules if n == prefix or n.startswith(prefix + ".")]:
            if name not in saved:
                del sys.modules[name]
    sys.modules.update(saved)
    for name in prefixes:  # parent packages point at the originals again
        parent, _, child = name.rpartition(".")
        if name in saved and parent in sys.modules:
            setattr(sys.modules[parent], child, saved[name])


# -- selection: platform, arch, name vs option ------------------------------------------------


def test_darwin_is_not_supported(fake: FakeToolchain, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "system", lambda: "Darwin")
    probe = adapter("mppa-iss").probe()
    assert probe.tier is Tier.UNAVAILABLE
    assert probe.reason == "MPPA is not supported on Darwin"


@pytest.mark.parametrize(
    ("name", "options", "platform_"),
    [
        ("mppa-iss", {}, "iss"),
        ("mppa-qemu", {}, "qemu"),
        ("mppa-hw", {}, "hw"),
        ("mppa", {"mppa-platform": "qemu"}, "qemu"),
        ("mppa", {}, "hw"),  # XTC's own default
        ("mppa-iss", {"mppa-platform": "iss"}, "iss"),  # agreeing is fine
    ],
    ids=["iss", "qemu", "hw", "option", "default", "agreeing"],
)
def test_platform_from_name_else_option(name: str, options: dict[str, str], platform_: str) -> None:
    target = adapter(name, **options)
    assert target.platform == platform_
    assert target.lock_key() == f"mppa-{platform_}:0"


def test_name_and_option_conflict_is_unavailable(fake: FakeToolchain) -> None:
    probe = adapter("mppa-iss", **{"mppa-platform": "qemu"}).probe()
    assert probe.tier is Tier.UNAVAILABLE
    assert "mppa-iss names platform iss" in probe.reason
    assert "XTC_MPPA_PLATFORM says qemu" in probe.reason


@pytest.mark.parametrize(
    ("name", "options", "where"),
    [
        ("mppa", {"mppa-platform": "simulator"}, "XTC_MPPA_PLATFORM"),  # an env value
        ("mppa-board", {}, "target mppa-board"),  # an entry point registered by mistake
    ],
    ids=["from-option", "from-name"],
)
def test_unknown_platform_is_unavailable(
    fake: FakeToolchain, name: str, options: dict[str, str], where: str
) -> None:
    probe = adapter(name, **options).probe()
    assert probe.tier is Tier.UNAVAILABLE
    assert "unknown MPPA platform" in probe.reason and where in probe.reason


def test_unknown_arch_is_unavailable(fake: FakeToolchain) -> None:
    probe = adapter("mppa-iss", **{"mppa-arch": "kv4"}).probe()
    assert probe.tier is Tier.UNAVAILABLE
    assert probe.reason == "unknown MPPA architecture 'kv4' (choose kv3-1 or kv3-2)"


def test_simulators_get_longer_time_limits_than_hardware() -> None:
    hw_compile, hw_run = adapter("mppa-hw").time_limits()
    for name in ("mppa-iss", "mppa-qemu"):
        compile_s, run_s = adapter(name).time_limits()
        assert compile_s > hw_compile and run_s >= 5 * hw_run


def test_lock_key_names_platform_and_ordinal() -> None:
    assert adapter("mppa-hw[0]").lock_key() == "mppa-hw:0"
    assert adapter("mppa-iss[2]").lock_key() == "mppa-iss:2"


# -- the probe with a fake toolchain, one missing piece at a time -----------------------------


@pytest.mark.parametrize("name", ["mppa-iss", "mppa-qemu", "mppa-hw"])
def test_fake_toolchain_complete_probe_is_available(fake: FakeToolchain, name: str) -> None:
    """Probe logic only: every piece is present (as a fake), so the probe says so."""
    probe = adapter(name).probe()
    assert probe.tier is Tier.EXECUTE, probe.reason
    assert probe.versions["kvx-cos-gcc"] == FAKE_GCC_VERSION
    assert probe.versions["mlir_mppa"] == str(fake.modules / "mlir_mppa")
    assert probe.versions["mppa-firmware"] == "ocl_fw_l1.elf"
    assert probe.versions["xtc-tools"]
    assert ("FAKE k300" in probe.device) if name == "mppa-hw" else "simulator" in probe.device


@pytest.mark.parametrize(
    ("name", "piece", "reason"),
    [
        pytest.param(name, piece, reason, id=piece)
        for name, piece, reason in [
            ("mppa-iss", "kvx-cos-gcc", "kalray/bin/kvx-cos-gcc not found"),
            ("mppa-iss", "mlir_mppa", "Python module mlir_mppa not found"),
            ("mppa-iss", "mlir_sdist", "Python module mlir_sdist not found"),
            ("mppa-iss", "mppa-opt", "mlir_mppa/bin/mppa-opt not found"),
            ("mppa-iss", "kvx-cluster", "kvx-cluster not found on PATH"),
            ("mppa-qemu", "kvx-qemu-offload-bridge", "kvx-qemu-offload-bridge not found on PATH"),
            ("mppa-hw", "kvx-board-diag", "kvx-board-diag not found on PATH"),
        ]
    ],
)
def test_fake_toolchain_missing_piece_is_named(
    fake: FakeToolchain, name: str, piece: str, reason: str
) -> None:
    fake.remove(piece)
    probe = adapter(name).probe()
    assert probe.tier is Tier.UNAVAILABLE
    assert reason in probe.reason


def test_fake_toolchain_unset_dir_is_named(
    fake: FakeToolchain, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KALRAY_TOOLCHAIN_DIR")
    for name in ("mppa-iss", "mppa-qemu", "mppa-hw", "mppa"):
        probe = adapter(name).probe()
        assert (probe.tier, probe.reason) == (Tier.UNAVAILABLE, NO_TOOLCHAIN)


def test_fake_toolchain_broken_compiler_is_named(fake: FakeToolchain) -> None:
    fake_executable(fake.gcc, "echo 'cannot execute' >&2; exit 126")
    probe = adapter("mppa-iss").probe()
    assert probe.tier is Tier.UNAVAILABLE
    assert "kvx-cos-gcc --version failed: exit status 126: cannot execute" in probe.reason


def test_fake_toolchain_versions_found_before_the_missing_piece(fake: FakeToolchain) -> None:
    fake.remove("mlir_sdist")
    probe = adapter("mppa-iss").probe()
    assert probe.versions["kvx-cos-gcc"] == FAKE_GCC_VERSION
    assert "mlir_sdist" not in probe.versions


@pytest.mark.parametrize(
    ("diag", "reason"),
    [
        ('echo "No Available board"', "kvx-board-diag reports no MPPA board"),
        ("echo 'driver not loaded' >&2; exit 3", "kvx-board-diag --list-board failed"),
    ],
    ids=["no-board", "diag-fails"],
)
def test_fake_toolchain_hw_without_board(fake: FakeToolchain, diag: str, reason: str) -> None:
    fake_executable(fake.path_bin / "kvx-board-diag", diag)
    probe = adapter("mppa-hw").probe()
    assert probe.tier is Tier.UNAVAILABLE
    assert reason in probe.reason


def test_fake_toolchain_hw_board_ordinal_must_exist_for_xtc(fake: FakeToolchain) -> None:
    probe = adapter("mppa-hw[1]").probe()
    assert probe.tier is Tier.UNAVAILABLE
    assert "MPPA board 1 cannot be used" in probe.reason
    assert adapter("mppa-hw[0]").probe().tier is Tier.EXECUTE


def test_fake_toolchain_unknown_firmware_is_named(fake: FakeToolchain) -> None:
    probe = adapter("mppa-iss", **{"mppa-firmware": "other_fw.elf"}).probe()
    assert probe.tier is Tier.UNAVAILABLE
    assert "unknown MPPA firmware 'other_fw.elf' (XTC knows ocl_fw_l1.elf)" in probe.reason


def test_fake_toolchain_second_platform_in_one_process_is_unavailable(
    fake: FakeToolchain,
) -> None:
    assert adapter("mppa-hw").probe().tier is Tier.EXECUTE
    assert adapter("mppa", **{"mppa-platform": "hw"}).probe().tier is Tier.EXECUTE  # same device
    probe = adapter("mppa-iss").probe()
    assert probe.tier is Tier.UNAVAILABLE
    assert "already runs MPPA hw/kv3-2/ocl_fw_l1.elf for target mppa-hw" in probe.reason
    assert "run mppa-iss in another pytest run" in probe.reason


def test_fake_toolchain_arch_xtc_does_not_compile_for_is_named(fake: FakeToolchain) -> None:
    probe = adapter("mppa-iss", **{"mppa-arch": "kv3-1"}).probe()
    assert probe.tier is Tier.UNAVAILABLE
    assert "XTC compiles MPPA code for kv3-2 only" in probe.reason


# -- XTC's import-time os.getlogin() ----------------------------------------------------------


#: XTC modules that hold names from its MPPA runtime module (re-imported with it).
XTC_MPPA_USERS = ("xtc.targets.accelerator.mppa", "xtc.backends.mlir.MlirTarget.MlirMppaTarget")


def _no_terminal() -> str:
    raise OSError(6, "No such device or address")


def test_fake_toolchain_getlogin_failure_is_worked_around(
    fake: FakeToolchain, monkeypatch: pytest.MonkeyPatch, clean_modules: Callable[[str], None]
) -> None:
    for module in (mppa.RUNTIME_MODULE, *XTC_MPPA_USERS):
        clean_modules(module)
    monkeypatch.setattr(os, "getlogin", _no_terminal)
    monkeypatch.setenv("LOGNAME", "xtc-tester")
    probe = adapter("mppa-iss").probe()
    assert probe.tier is Tier.EXECUTE, probe.reason
    config = sys.modules[mppa.RUNTIME_MODULE + ".config"]
    assert config.DEFAULT_WORK_DIR == "/tmp/xtc-tester/mlir_mppa"  # never used as a work dir
    assert os.getlogin is _no_terminal  # put back as it was


def test_fake_toolchain_getlogin_failure_without_user_is_named(
    fake: FakeToolchain, monkeypatch: pytest.MonkeyPatch, clean_modules: Callable[[str], None]
) -> None:
    for module in (mppa.RUNTIME_MODULE, *XTC_MPPA_USERS):
        clean_modules(module)
    monkeypatch.setattr(os, "getlogin", _no_terminal)

    def no_user() -> str:
        raise OSError("No username set in the environment")

    monkeypatch.setattr(getpass, "getuser", no_user)
    probe = adapter("mppa-iss").probe()
    assert probe.tier is Tier.UNAVAILABLE
    assert "calls os.getlogin() at import, which failed" in probe.reason
    assert "getpass.getuser() found no user name" in probe.reason


# -- compile(): what is handed to XTC (XTC's compiler itself is replaced: nothing is built) ---


@pytest.fixture
def no_device(monkeypatch: pytest.MonkeyPatch) -> Any:
    """XTC's MppaDevice singleton, emptied for the test and restored after."""
    runtime = mppa.import_runtime()
    monkeypatch.setattr(runtime.MppaDevice, "_instance", None)
    return runtime


def _matmul_case() -> Any:
    from pytest_xtc.conformance import builtin_cases

    case = next(c for c in builtin_cases() if c.id == "matmul-float32-13x11x7-tile")
    return case.place({"A": DEVICE, "B": DEVICE, "C": DEVICE})


class Module:
    _mppa_config: Any = "XTC's own, from the environment"


def test_fake_toolchain_compile_maps_onto_mppa_config(
    fake: FakeToolchain, no_device: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def compile_case(case: Any, workdir: Path, **kwargs: Any) -> Module:
        seen.update(kwargs, workdir=workdir, PLATFORM=os.environ.get("PLATFORM"))
        workdir.mkdir(parents=True)
        (workdir / "kernel.so").write_text("")
        return Module()

    monkeypatch.setattr(mppa.xtc_env, "compile_case", compile_case)
    monkeypatch.setenv("PLATFORM", "linux-x86_64")  # would make XTC's MppaConfig exit(1)
    target = adapter("mppa-qemu", **{"mppa-arch": "kv3-1"})
    workdir = tmp_path / "cases" / "case0"
    artifact = target.compile(_matmul_case(), workdir)

    config = seen["device"].config
    assert seen["target"] is seen["device"]
    assert seen["extra_steps"] == mppa.MESH_STEPS
    assert seen["PLATFORM"] == "qemu" and os.environ["PLATFORM"] == "linux-x86_64"
    assert (config.platform, config.arch, config.firmware) == ("qemu", "kv3-1", "ocl_fw_l1.elf")
    # in the temp folder: a case worker's private one, the only place beside its work
    # folder a confined case worker may write
    device_dir = Path(config.work_dir)
    assert device_dir.parent == Path(tempfile.gettempdir()) and device_dir.is_dir()
    assert device_dir.name.startswith("mppa-qemu-0-")
    assert artifact.handle._mppa_config is config
    assert artifact.files == [workdir / "kernel.so"]
    assert artifact.notes["device work dir"] == config.work_dir


def test_fake_toolchain_compile_turns_xtc_exit_into_error(
    fake: FakeToolchain, no_device: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def compile_case(*args: Any, **kwargs: Any) -> None:
        raise SystemExit(1)

    monkeypatch.setattr(mppa.xtc_env, "compile_case", compile_case)
    with pytest.raises(RuntimeError, match=r"XTC's MPPA code called exit\(1\)"):
        adapter("mppa-iss").compile(_matmul_case(), tmp_path / "case")


def test_fake_toolchain_one_platform_per_process(
    fake: FakeToolchain, no_device: Any, tmp_path: Path
) -> None:
    adapter("mppa-iss").device(tmp_path / "a")
    again = adapter("mppa", **{"mppa-platform": "iss"}).device(tmp_path / "b")
    assert again.config.platform == "iss"  # the same device, shared
    with pytest.raises(RuntimeError, match="one per process"):
        adapter("mppa-qemu").device(tmp_path / "c")



def test_fake_toolchain_run_goes_the_embedded_road(
    fake: FakeToolchain, no_device: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FAKE XTC evaluator: run() flashes the module's image into XTC's EmbeddedDevice
    and runs it there (PLATFORM set, one call per measurement); an image that is not
    there is refused at flash, nothing run."""
    import numpy as np
    from xtc.itf.runtime.embedded import EmbeddedDevice

    from pytest_xtc.core.adapter import Artifact, RunResult, Timing
    from pytest_xtc.targets.toolchains import kalray

    seen: dict[str, Any] = {}

    def evaluate(module: Any, inputs: Any, outputs: Any, timing: Timing) -> RunResult:
        seen.update(module=module, inputs=len(inputs), outputs=len(outputs), timing=timing,
                    PLATFORM=os.environ.get("PLATFORM"))
        outputs[0][...] = 7.0
        return RunResult([1e-3] * timing.repeat)

    monkeypatch.setattr(mppa.xtc_env, "evaluate", evaluate)
    image = tmp_path / "kernel.so"
    image.write_bytes(b"")
    module = type("FakeModule", (), {"file_name": str(image), "payload_name": "entry"})()
    target = adapter("mppa-iss")
    out = np.zeros((2, 2), np.float32)
    ones = np.ones((2, 2), np.float32)
    result = target.run(Artifact(tmp_path, module, [image]), [ones, ones], [out],
                        Timing(3, 10, 100))
    assert seen == {"module": module, "inputs": 2, "outputs": 1, "timing": Timing(3, 1, 0),
                    "PLATFORM": "iss"}
    assert (out == 7.0).all() and result.times == [1e-3] * 3
    assert isinstance(kalray.embedded(target.device(tmp_path), "iss"), EmbeddedDevice)
    module.file_name = str(tmp_path / "missing.so")
    seen.clear()
    with pytest.raises(FileNotFoundError, match="flash"):
        target.run(Artifact(tmp_path, module, []), [ones, ones], [out], Timing())
    assert not seen

# -- the suite as users run it, where there is no toolchain -----------------------------------


@pytest.mark.parametrize("name", ["mppa-iss", "mppa-qemu", "mppa-hw", "mppa"])
def test_no_toolchain_every_case_skipped_naming_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    for var in ("KALRAY_TOOLCHAIN_DIR", "XTC_MPPA_PLATFORM", "XTC_MPPA_ARCH", "PLATFORM"):
        monkeypatch.delenv(var, raising=False)
    result = pytester.runpytest_subprocess(  # stdin closed, no terminal
        f"--xtc-target={name}", "-k", "matmul-float32-13x11x7", "-p", "no:cacheprovider"
    )
    outcomes = result.parseoutcomes()
    outcomes.pop("deselected", None)
    skipped = outcomes.get("skipped", 0)
    assert result.ret == 0, result.stdout.str()
    assert skipped >= 35 and set(outcomes) == {"skipped"}, outcomes
    reason = "MPPA is not supported on Darwin" if platform.system() == "Darwin" else NO_TOOLCHAIN
    result.stdout.fnmatch_lines(
        [f"{name}*0*0*0*0*0*{skipped}", f"*{skipped} x skipped: {name}: {reason}"]
    )
