"""The CI configuration: .github/workflows/conformance.yml and tox.ini, and their agreement.

Static checks of the workflow (GitHub is not reachable from here): it parses, every job
has steps, every tox environment it runs exists, every target job writes, uploads and
summarizes a bundle. tox.ini is read with configparser and, where tox is installed, by
tox itself (``tox list``/``tox config`` need no network); the lint env's command runs as
it is (``tox -e lint`` would install ruff from the index).
"""

from __future__ import annotations

import configparser
import importlib.util
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_xtc.core.adapters import registry
from tests import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "conformance.yml"
#: tox env -> the platforms (runs-on) that must run it; "self-hosted" for a device runner.
TARGET_JOBS = {
    "host-xtc031": {"ubuntu-latest"},
    "host-xtc032": {"ubuntu-latest", "macos-latest"},
    "host-c-xtc031": {"ubuntu-latest"},
    "host-c-xtc032": {"ubuntu-latest"},
    "nvgpu-compile": {"ubuntu-latest"},
    "nvgpu": {"self-hosted"},
    "mppa-iss": {"self-hosted"},
    "mppa-qemu": {"self-hosted"},
    "mppa-hw": {"self-hosted"},
}
#: Target envs for people (the newest XTC that pip picks); CI runs their pinned factors.
BASE_ENVS = {"host", "host-c"}
TOOL_ENVS = {"plugin", "lint", "type"}
DEVICE_ENVS = {"nvgpu", "mppa-iss", "mppa-qemu", "mppa-hw"}
#: The XTC versions the suite is tested with: tox factor -> xtc-tools version.
XTC_FACTORS = {"xtc031": "0.3.1", "xtc032": "0.3.2"}
PYTHONS = {"3.11", "3.12"}
REPORT = "report"


def workflow() -> dict[str, Any]:
    data = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(data, dict)
    return data


def tox_ini() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    with (ROOT / "tox.ini").open() as file:
        parser.read_file(file)
    return parser


def generated(name: str) -> list[str]:
    """The names a generative tox name stands for: ``a-{b,c}`` -> ``a-b``, ``a-c``."""
    found = re.search(r"\{([^{}]*)\}", name)
    if not found:
        return [name]
    return [n for part in found[1].split(",")
            for n in generated(name[:found.start()] + part.strip() + name[found.end():])]


def env_list(text: str) -> list[str]:
    """tox's env_list, generative names expanded (commas inside braces kept together)."""
    names = re.findall(r"[^\s,{}]*(?:\{[^{}]*\}[^\s,{}]*)*", text)
    return [n for name in names if name for n in generated(name)]


def section_of(env: str) -> str:
    """The tox.ini section that defines ``env`` (possibly a generative one)."""
    for section in tox_ini().sections():
        if section.startswith("testenv:") and env in generated(section.split(":", 1)[1]):
            return section
    raise KeyError(env)


def tox_sections() -> set[str]:
    return {name for s in tox_ini().sections() if s.startswith("testenv:")
            for name in generated(s.split(":", 1)[1])}


def setting(env: str, key: str) -> str:
    """A setting of an env, from its section or, through ``base``, the sections it names."""
    parser = tox_ini()
    section = section_of(env)
    if parser.has_option(section, key):
        return parser.get(section, key)
    for base in re.split(r"[\s,]+", parser.get(section, "base", fallback="").strip()):
        if base and base != "testenv":
            return setting(base, key)
    return parser.get("testenv", key, fallback="")


def variants(job: dict[str, Any]) -> list[dict[str, Any]]:
    """The matrix entries of a job (one empty entry for a job without a matrix)."""
    matrix = (job.get("strategy") or {}).get("matrix") or {}
    assert not set(matrix) - {"include"}, "use matrix.include entries only"
    return list(matrix.get("include") or [{}])


def expand(value: Any, variant: dict[str, Any]) -> Any:
    """``${{ matrix.KEY }}`` replaced by the variant's value (a list stays a list)."""
    if isinstance(value, list):
        return [expand(v, variant) for v in value]
    if not isinstance(value, str):
        return value
    whole = re.fullmatch(r"\$\{\{\s*matrix\.([\w-]+)\s*\}\}", value)
    if whole:
        return variant[whole[1]]
    return re.sub(r"\$\{\{\s*matrix\.([\w-]+)\s*\}\}", lambda m: str(variant[m[1]]), value)


def jobs() -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(job id, job, matrix entry) for every job the workflow runs."""
    for name, job in workflow()["jobs"].items():
        for variant in variants(job):
            yield name, job, variant


def tox_calls(script: str) -> list[tuple[list[str], list[str]]]:
    """(envs, posargs) of each ``tox -e ...`` command of a shell script."""
    calls = []
    for line in script.splitlines():
        try:
            argv = shlex.split(line)
        except ValueError:  # a line of a longer shell construct
            continue
        if argv[:1] != ["tox"] or "-e" not in argv or "--notest" in argv or "exec" in argv:
            continue  # not a tox run (--notest creates the environment, exec uses it)
        envs = argv[argv.index("-e") + 1].split(",")
        calls.append((envs, argv[argv.index("--") + 1:] if "--" in argv else []))
    return calls


def job_tox(job: dict[str, Any], variant: dict[str, Any]) -> list[tuple[list[str], list[str]]]:
    return [c for s in job["steps"] if "run" in s for c in tox_calls(expand(s["run"], variant))]


def platform_of(job: dict[str, Any], variant: dict[str, Any]) -> str:
    runs_on = expand(job["runs-on"], variant)
    if isinstance(runs_on, list):
        return "self-hosted" if "self-hosted" in runs_on else ",".join(runs_on)
    return str(runs_on)


def test_workflow_parses_and_every_job_has_steps() -> None:
    data: dict[Any, Any] = workflow()
    triggers = data.get("on", data.get(True)) or {}  # YAML 1.1 reads a bare `on` as true
    assert {"push", "pull_request"} <= set(triggers)
    assert data["jobs"]
    for name, job, variant in jobs():
        assert job.get("runs-on"), name
        steps = job.get("steps")
        assert isinstance(steps, list) and steps, f"{name}: no steps"
        for step in steps:
            assert ("uses" in step) != ("run" in step), f"{name}: {step}"
            if "uses" in step:
                assert re.search(r"@v\d+$", step["uses"]), f"{name}: pin {step['uses']}"
        assert platform_of(job, variant)


def test_jobs_cover_two_pythons_and_install_the_project_once() -> None:
    """Each job installs the project once: through tox (the job installs tox only), or,
    in the wheel job, the built wheel into one fresh environment."""
    pythons = set()
    for name, job, variant in jobs():
        setups = [s for s in job["steps"] if s.get("uses", "").startswith("actions/setup-python@")]
        assert len(setups) == 1, name
        version = str(expand(setups[0]["with"]["python-version"], variant))
        assert version in PYTHONS, (name, version)
        pythons.add(version)
        runs = [expand(s["run"], variant) for s in job["steps"] if "run" in s]
        installs = [line for run in runs for line in run.splitlines() if "pip" in line
                    and " install " in line]
        assert "pip install -e" not in " ".join(installs), f"{name}: installs the project twice"
        if name != "wheel":
            assert installs == ["python -m pip install 'tox>=4'"], (name, installs)
            assert job_tox(job, variant), name
        tox_runs = [line for run in runs for line in run.splitlines()
                    if line.startswith("tox ") and "--notest" not in line
                    and not line.startswith("tox exec")]
        notest = [line for run in runs for line in run.splitlines() if "--notest" in line]
        if notest:  # the environment is made once; later tox commands reuse it as it is
            assert all("--skip-pkg-install" in line for line in tox_runs), name
    assert pythons == PYTHONS


def test_the_wheel_job_builds_installs_and_runs_the_installed_suite() -> None:
    job = workflow()["jobs"]["wheel"]
    runs = "\n".join(s.get("run", "") for s in job["steps"])
    assert "python -m build" in runs
    assert "pip\" install dist/*.whl" in runs or "pip install dist/*.whl" in runs.replace('"', "")
    suite = next(s for s in job["steps"] if "--xtc-target=host" in s.get("run", ""))
    assert suite["working-directory"] == "${{ runner.temp }}"  # not the checkout
    for needed in ("tests/conftest.py", "tox.ini", "docs/vendor-guide.md", ".ci/run", "LICENSE"):
        assert needed in runs, needed


def test_each_xtc_version_is_pinned_by_a_factor_and_run() -> None:
    deps = tox_ini().get("testenv", "deps")
    for factor, version in XTC_FACTORS.items():
        assert f"{factor}: xtc-tools=={version}" in deps
        assert any(env.endswith(factor) for env in TARGET_JOBS), factor
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"xtc-tools>=0.3.1,<0.4"' in pyproject


def test_device_jobs_are_strict() -> None:
    """A device job whose device is missing must fail, not pass with every case skipped."""
    for env in DEVICE_ENVS:
        command = setting(env, "commands")
        reference = re.fullmatch(r"\{\[testenv:([\w-]+)\]commands\}", command.strip())
        if reference:
            command = setting(reference[1], "commands")
        assert "--xtc-strict" in command, env


def test_every_env_has_a_description() -> None:
    for env in tox_sections():
        assert setting(env, "description").strip(), env


def test_every_tox_env_run_exists_and_every_env_is_run() -> None:
    sections = tox_sections()
    run = set()
    for name, job, variant in jobs():
        calls = job_tox(job, variant)
        assert calls or name == "wheel", f"{name}: runs no tox environment"
        for envs, _ in calls:
            assert set(envs) <= sections, f"{name}: tox envs {set(envs) - sections} not in tox.ini"
            run.update(envs)
    assert sections - BASE_ENVS <= run, f"tox envs no job runs: {sections - BASE_ENVS - run}"
    assert sections == set(TARGET_JOBS) | TOOL_ENVS | BASE_ENVS


def test_each_target_runs_on_its_platforms() -> None:
    seen: dict[str, set[str]] = {env: set() for env in TARGET_JOBS}
    for _, job, variant in jobs():
        for envs, _ in job_tox(job, variant):
            for env in set(envs) & set(TARGET_JOBS):
                seen[env].add(platform_of(job, variant))
    assert seen == TARGET_JOBS


def test_self_hosted_jobs_are_opt_in_and_hosted_ones_are_not() -> None:
    for name, job, variant in jobs():
        hosted = platform_of(job, variant) != "self-hosted"
        assert ("if" in job) != hosted, f"{name}: self-hosted jobs (only) need an `if:`"


def test_nvgpu_compile_targets_sm_90_with_a_cuda_toolkit() -> None:
    job = workflow()["jobs"]["nvgpu-compile"]
    (envs, posargs), = job_tox(job, {})
    assert envs == ["nvgpu-compile"] and "--xtc-nvgpu-arch=sm_90" in posargs
    scripts = " ".join(s.get("run", "") for s in job["steps"])
    assert "cuda-compiler" in scripts and "nvcc" in scripts
    assert job["env"]["CUDA_INSTALL_DIR"].startswith("/usr/local/cuda")


def test_target_jobs_write_upload_and_summarize_their_bundle() -> None:
    artifacts = []
    for name, job, variant in jobs():
        calls = job_tox(job, variant)
        if not any(set(envs) & set(TARGET_JOBS) for envs, _ in calls):
            continue
        where = f"{name} {variant}"
        assert all(f"--xtc-report={REPORT}" in posargs for _, posargs in calls), where
        uploads = [s for s in job["steps"]
                   if s.get("uses", "").startswith("actions/upload-artifact@")]
        assert len(uploads) == 1, where
        assert uploads[0].get("if") == "always()", where
        assert uploads[0]["with"]["path"].rstrip("/") == REPORT, where
        artifacts.append(expand(uploads[0]["with"]["name"], variant))
        summaries = [s for s in job["steps"] if "$GITHUB_STEP_SUMMARY" in s.get("run", "")]
        assert len(summaries) == 1 and summaries[0].get("if") == "always()", where
        assert f"{REPORT}/summary.md" in summaries[0]["run"], where
        verify = [s for s in job["steps"] if f"xtc-conformance verify {REPORT}" in s.get("run", "")]
        assert verify, f"{where}: the bundle is not verified"
    assert len(artifacts) == len(set(artifacts)) == 11, artifacts  # host x6, nvgpu x2, mppa x3


def test_tox_ini_is_well_formed() -> None:
    parser = tox_ini()
    sections = tox_sections()
    listed = env_list(parser.get("tox", "env_list"))
    assert set(listed) <= sections, set(listed) - sections
    assert "{env:XTC_TARGET}" in parser.get("testenv", "commands")
    assert "{posargs}" in parser.get("testenv", "commands")
    known = registry.registered()
    for env in sections:
        section = section_of(env)
        set_env = setting(env, "set_env")
        target = re.search(r"XTC_TARGET\s*=\s*(\S+)", set_env)
        own = parser.get(section, "set_env", fallback="")
        if own:  # an env's own set_env keeps the base one (PYTHONUNBUFFERED...)
            assert "{[testenv]set_env}" in own, f"{section} drops [testenv]'s set_env"
        if env in TARGET_JOBS or env in BASE_ENVS:
            assert target, f"{section} sets no XTC_TARGET"
            assert target[1] in known, f"{section}: XTC_TARGET {target[1]} is not registered"
        else:
            assert target is None and setting(env, "commands"), section


def _tox() -> list[str] | None:
    """This environment's tox, when installed."""
    here = Path(sys.executable).parent / "tox"
    if here.is_file():
        return [str(here)]
    if importlib.util.find_spec("tox") is not None:
        return [sys.executable, "-m", "tox"]
    return None


def test_tox_itself_lists_and_expands_the_envs(tmp_path: Path) -> None:
    tox = _tox()
    if tox is None:
        pytest.skip("tox is not installed here (it is in the dev extras)")
    base = [*tox, "--workdir", str(tmp_path), "-c", str(ROOT / "tox.ini")]
    listing = subprocess.run([*base, "list"], capture_output=True, text=True, timeout=120,
                             check=False)
    assert listing.returncode == 0, listing.stdout + listing.stderr
    envs = sorted(tox_sections())
    config = subprocess.run([*base, "config", "-e", ",".join(envs), "-k", "commands",
                             "set_env"], capture_output=True, text=True, timeout=120,
                            check=False)
    assert config.returncode == 0, config.stdout + config.stderr
    commands = dict(re.findall(r"^\[testenv:([\w-]+)\]\ncommands = (.*)$", config.stdout,
                               re.MULTILINE))
    assert sorted(commands) == envs, config.stdout
    for env in [*TARGET_JOBS, *BASE_ENVS]:
        target = "nvgpu" if env.startswith("nvgpu") else re.sub(r"-xtc\d+$", "", env)
        assert commands[env].startswith("pytest pytest_xtc/conformance"), commands[env]
        assert f"--xtc-target={target}" in commands[env], commands[env]
    assert "XTC_NVGPU_ARCH=sm_90" in config.stdout
    blocks = dict(re.findall(r"^\[testenv:([\w-]+)\]\n((?:.*\n)*?)(?=^\[|\Z)", config.stdout,
                             re.MULTILINE))
    for env in [*TARGET_JOBS, *BASE_ENVS]:
        assert "PYTHONUNBUFFERED=1" in blocks[env], f"{env} drops [testenv]'s set_env"
    assert "XTC_TOOLS_VERSION=0.3.1" in blocks["host-xtc031"]


def test_the_lint_env_command_passes() -> None:
    """What ``tox -e lint`` runs, run directly, plus the example package."""
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed here (it is in the dev extras)")
    argv = shlex.split(tox_ini().get("testenv:lint", "commands"))
    assert argv[:2] == ["ruff", "check"]
    done = subprocess.run([ruff, *argv[1:], "examples"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
