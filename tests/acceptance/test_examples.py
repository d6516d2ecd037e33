"""The external adapter example (examples/xtc-example-adapter), installed as a vendor would.

Integration tests: they create a fresh virtual environment, ``pip install`` the example
into it, and run pytest and xtc-conformance there from an empty directory (about 15 s).
The fresh environment is layered on this one (see :func:`layered_venv`) so that XTC's
1.4 GB of wheels are not installed again; the example itself is built and installed by
pip, entry point included, exactly as from a vendor's checkout.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path

import pytest

from pytest_xtc.core.adapter import TargetSpec, Tier
from pytest_xtc.core.cases import expectations
from pytest_xtc.core.xtc import xtc_env
from tests import ROOT

EXAMPLE = ROOT / "examples" / "xtc-example-adapter"
TARGET = "example-host-o1"
#: Console scripts of this environment that a layered one gets too.
SCRIPTS = ("pytest", "xtc-conformance", "pip")
#: 22 float32 cases (the schedules the catalog runs three shapes with in float32) and one
#: float64 case that the example's expectations file lists as a known XTC compile failure.
#: Not stride_int (a conv2d stride written as one integer: the suite waives it on XTC
#: <= 0.3.2, an xfail that does not come from the example's file) nor the model_*
#: schedules the generated catalog added (more cases, not more of what this test shows).
FEW = (
    "(matmul-float32-13x11x7 or relu-float32-5x7 or conv2d-float32-1x9x9x3-3x3x8-s2-p1 "
    "or relu-float64-5x7-none]) and not stride_int and not model_"
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX virtual environments")


def layered_venv(root: Path) -> Path:
    """A new virtual environment at ``root`` layered on the running one; its bin dir.

    Its interpreter also sees this environment's site-packages, their ``.pth`` files
    processed (what ``--system-site-packages`` gives when the base is this environment:
    pytest-xtc and XTC importable, this checkout's editable install included), after its
    own site-packages, where ``pip install`` puts new distributions. ``venv`` cannot do
    this by itself: a venv made from a venv's interpreter is based on the system Python.
    This environment's console scripts are copied in, pointed at the new interpreter.
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    bin_dir = root / "bin"
    python = bin_dir / "python"
    own = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    paths = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    lines = [f"import site; site.addsitedir({p!r})\n" for p in paths]
    (Path(own) / "_xtc_layered_on.pth").write_text("".join(lines))
    here = Path(sys.executable).parent
    for name in SCRIPTS:
        source = here / name
        if source.is_file():
            body = source.read_text().partition("\n")[2]
            (bin_dir / name).write_text(f"#!{python}\n{body}")
            (bin_dir / name).chmod(0o755)
    return bin_dir


def offline_build() -> bool:
    """Whether setuptools can build a wheel here without fetching anything (it needs the
    ``wheel`` package before setuptools 70.1)."""
    if importlib.util.find_spec("wheel") is not None:
        return True
    try:
        major, minor = (int(p) for p in metadata.version("setuptools").split(".")[:2])
    except (metadata.PackageNotFoundError, ValueError):
        return False
    return (major, minor) >= (70, 1)


def pip_offline_env() -> dict[str, str]:
    """pip settings (as environment variables) that build a local project offline when
    this environment can; pip reads PIP_NO_BUILD_ISOLATION=0 as --no-build-isolation."""
    return {"PIP_NO_BUILD_ISOLATION": "0", "PIP_NO_INDEX": "1"} if offline_build() else {}


def clean_env(bin_dir: Path, extra: Mapping[str, str] = {}) -> dict[str, str]:
    """This process's environment without pytest's and XTC's settings (so the runs below
    see no PYTEST_ADDOPTS, no XTC_TEST_TARGETS) nor PYTHONPATH (but this checkout, when
    PYTHONPATH holds it), ``bin_dir`` first on PATH."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "XTC_")) and k != "PYTHONPATH"}
    # The code under test: where PYTHONPATH put this tree's pytest_xtc ahead of an
    # installed one, the fresh environment's runs use it too (and nothing else of it).
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if str(ROOT) in paths:
        env["PYTHONPATH"] = str(ROOT)
    env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", "")])
    env.update(extra)
    return env


def run(
    argv: Sequence[str | Path], cwd: Path, env: Mapping[str, str], timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=dict(env), capture_output=True,
                          text=True, timeout=timeout, check=False)


def skip_if_no_build_requirements(done: subprocess.CompletedProcess[str]) -> None:
    """pip could not get setuptools to build with: no index reachable and no local one."""
    if done.returncode and "No matching distribution found for setuptools" in done.stderr:
        pytest.skip("pip cannot fetch setuptools/wheel to build the example (offline, and "
                    "this environment lacks the wheel package)")


def install_example(bin_dir: Path, workdir: Path) -> subprocess.CompletedProcess[str]:
    """``pip install`` a copy of the example (a build writes into its source tree)."""
    source = workdir / "xtc-example-adapter"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                                   "__pycache__"))
    env = clean_env(bin_dir, pip_offline_env())
    return run([bin_dir / "pip", "install", "--disable-pip-version-check", str(source)],
               workdir, env)


@pytest.fixture(scope="module")
def example_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh environment with the example installed by pip; its bin dir."""
    root = tmp_path_factory.mktemp("example-venv")
    bin_dir = layered_venv(root / "venv")
    done = install_example(bin_dir, root)
    skip_if_no_build_requirements(done)
    assert done.returncode == 0, done.stdout + done.stderr
    return bin_dir


def load_example_module(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The example's adapter module from its source tree (no install), registered in
    sys.modules for this test only (``expectations_file()`` looks its file up there)."""
    name = "xtc_example_adapter_source"
    spec = importlib.util.spec_from_file_location(
        name, EXAMPLE / "xtc_example_adapter" / "target.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


def test_example_passes_its_compiler_options_to_xtc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_xtc.conformance import builtin_cases

    module = load_example_module(monkeypatch)
    seen: list[dict[str, object]] = []

    def fake_compile(case, workdir, target, **options):  # type: ignore[no-untyped-def]
        seen.append({"target": target, **options})
        (workdir / "kernel.so").write_bytes(b"")
        return "module"

    monkeypatch.setattr(xtc_env, "compile_case", fake_compile)
    case = builtin_cases()[0]
    default = module.ExampleHostO1(TargetSpec(TARGET, TARGET))
    artifact = default.compile(case, tmp_path)
    chosen = module.ExampleHostO1(TargetSpec(TARGET, TARGET, options={"example-cpu": "x86-64"}))
    chosen.compile(case, tmp_path)
    assert seen == [{"target": "llvmir", "cpu": "generic"}, {"target": "llvmir", "cpu": "x86-64"}]
    assert artifact.notes == {"cpu": "generic"} and artifact.handle == "module"
    assert [o.name for o in module.ExampleHostO1.options] == ["example-cpu"]
    path = default.expectations_file()
    assert path == EXAMPLE / "xtc_example_adapter" / "target.expectations.yaml"
    assert expectations.find(expectations.load(path), "relu-float64-5x7-none") is not None
    assert expectations.find(expectations.load(path), "relu-float32-5x7-none") is None


def test_example_probe_names_its_version_and_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    module = load_example_module(monkeypatch)
    probe = module.ExampleHostO1(TargetSpec(TARGET, TARGET)).status()
    assert probe.tier is Tier.EXECUTE, probe.reason
    assert "xtc-example-adapter" in probe.versions and "xtc-tools" in probe.versions
    assert probe.device == "host CPU (code for --mcpu=generic)"


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_installed_example_is_listed_with_its_option(example_venv: Path, tmp_path: Path) -> None:
    env = clean_env(example_venv)
    listing = run([example_venv / "pytest", "-p", "no:cacheprovider", "--xtc-list-targets"],
                  tmp_path, env)
    assert listing.returncode == 0, listing.stdout + listing.stderr
    from tests.acceptance.test_plugin import listed_rows

    row = listed_rows(listing.stdout.splitlines()).get(TARGET, "")
    assert "available" in row and "xtc-example-adapter 0.1.0" in row, listing.stdout
    assert any(line.startswith("host ") for line in listing.stdout.splitlines())
    cli = run([example_venv / "xtc-conformance", "list"], tmp_path, env)
    assert cli.returncode == 0 and f"\n{TARGET} " in cli.stdout, cli.stdout + cli.stderr
    usage = run([example_venv / "pytest", "-p", "no:cacheprovider", "--help"], tmp_path, env)
    assert "--xtc-example-cpu" in usage.stdout and "XTC_EXAMPLE_CPU" in usage.stdout


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_installed_example_passes_a_handful_of_cases(example_venv: Path, tmp_path: Path) -> None:
    result = run(
        [example_venv / "pytest", "-p", "no:cacheprovider", "-v", "-rx",
         f"--xtc-target={TARGET}", "-k", FEW],
        tmp_path, clean_env(example_venv),
    )
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    ids = [line.split("[", 1)[1].split("]", 1)[0] for line in out.splitlines()
           if "test_conformance[" in line and (" PASSED" in line or " XFAIL" in line)]
    assert len(ids) >= 20 and all(i.startswith(f"{TARGET}-") for i in ids), out
    assert f"{TARGET}-matmul-float32-13x11x7-unroll" in ids
    summary = out.strip().splitlines()[-1]
    assert f" {len(ids) - 1} passed, " in summary and " 1 xfailed " in summary, summary
    assert " failed" not in summary and " skipped" not in summary, summary
    # The expected failure comes from the expectations file installed beside the module.
    assert "expected compile failure: XTC 0.3.2 emits an f32 zero in float64 relu" in out
