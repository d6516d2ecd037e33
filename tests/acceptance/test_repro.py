"""Every verdict reproducible: node ids with a real file part, a rerun line that runs the
case alone and fails it the same way (placed operands, verdict-changing options), exact
case selection (--xtc-case, --xtc-only-cases), markers, call-phase timing, JUnit fields;
and a plugin that costs nothing in a session that does not use XTC."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_xtc.plugin.collection import PACKAGE_PATH
from tests import ROOT

SUITE = ROOT / "pytest_xtc" / "conformance" / "test_conformance.py"

#: A vendor target with device placement whose compilation fails on matmul, and an
#: expectations file listing that failure (so only --xtc-ignore-expectations fails it).
PLACED_ADAPTER = """
from pytest_xtc.core.adapter import Capabilities
from pytest_xtc.targets.host import HostTarget

class Placer(HostTarget):
    def capabilities(self):
        caps = super().capabilities()
        return Capabilities(ops=caps.ops, placements=frozenset({"host", "device"}))

    def compile(self, case, workdir):
        if case.op == "matmul":
            raise RuntimeError(f"placer cannot lower {case.id} (seed-independent)")
        return super().compile(case, workdir)
"""
PLACED_EXPECTATIONS = (
    "- pattern: matmul-*\n  phase: compile\n  reason: placer lowers no matmul\n  url: u\n"
)
PLACED_CASE = "placer-matmul-float32-13x11x7-none-A@host,B@dev,C@dev"


@pytest.fixture
def placer(vendor) -> Path:
    root = vendor("placer_xtc", {"placer": "placer:Placer"}, {"placer": PLACED_ADAPTER})
    (root / "placer.expectations.yaml").write_text(PLACED_EXPECTATIONS)
    return root


def subprocess_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env.pop("PYTEST_ADDOPTS", None)
    return env


def shell(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """A command line as a user pastes it: ``pytest`` is this environment's."""
    if argv[0] == "pytest":
        argv = [sys.executable, "-m", "pytest", *argv[1:]]
    return subprocess.run([*argv, "-p", "no:cacheprovider"], cwd=cwd, env=subprocess_env(),
                          capture_output=True, text=True, timeout=300, check=False)


def rerun_line(out: str) -> list[str]:
    found = re.search(r"^rerun alone: (pytest .+)$", out, re.MULTILINE)
    assert found, out
    return shlex.split(found.group(1))


def failure_line(out: str) -> str:
    found = re.search(r"^\[compile\] .+$", out, re.MULTILINE)
    assert found, out
    return found.group(0)


def counts(out: str) -> str:
    return out.strip().splitlines()[-1].strip("= ").split(" in ")[0]


@pytest.mark.parametrize("where", ["outside", "inside"])
def test_rerun_line_of_a_placed_case_reproduces_it(placer, pytester, where) -> None:
    """A failing case with placed operands (``@`` in its id), failed only because
    --xtc-ignore-expectations is given: its rerun line, pasted as is, runs that one case
    and fails it the same way, from outside the checkout and from inside it."""
    cwd = pytester.path if where == "outside" else ROOT
    args = ["pytest", "--xtc-target=placer", "--xtc-ignore-expectations", "--xtc-seed=3",
            "--xtc-repeat=0", f"--xtc-case={PLACED_CASE}"]
    if where == "inside":
        args.append(str(SUITE.relative_to(ROOT)))  # not the plugin's own tests
    first = shell(args, cwd)
    assert first.returncode == 1, first.stdout + first.stderr
    assert counts(first.stdout) == "1 failed", first.stdout
    command = rerun_line(first.stdout)
    node = command[1]
    path, _, name = node.partition("::")
    assert name == f"test_conformance[{PLACED_CASE}]"
    # outside: the package's node id, never an absolute path into the environment
    expected = Path(PACKAGE_PATH) if where == "outside" else SUITE.relative_to(ROOT)
    assert Path(path) == expected, node
    for flag in ("--xtc-target=placer", "--xtc-ignore-expectations", "--xtc-seed=3",
                 "--xtc-repeat=0"):
        assert flag in command, command
    again = shell(command, cwd)
    assert again.returncode == 1, again.stdout + again.stderr
    assert counts(again.stdout) == "1 failed", again.stdout
    assert failure_line(again.stdout) == failure_line(first.stdout)
    assert rerun_line(again.stdout) == command
    # Without the option the expectations file applies: the same case is an xfail.
    lenient = shell([c for c in command if c != "--xtc-ignore-expectations"], cwd)
    assert counts(lenient.stdout) == "1 xfailed", lenient.stdout


def test_node_ids_have_a_file_part_and_run_as_they_are(pytester) -> None:
    """Collected outside a checkout, node ids carry the suite module's path in the package,
    the same on every machine (and JUnit's classname ``pytest_xtc.conformance...``, not
    the venv's path with dots): pasted back to pytest, an id runs that case."""
    listing = shell(["pytest", "--xtc-target=host", "--co", "-q", "-k",
                     "matmul-float32-13x11x7-tile]"], pytester.path)
    ids = [line for line in listing.stdout.splitlines() if "::test_conformance[" in line]
    assert ids == ["pytest_xtc/conformance/test_conformance.py::"
                   "test_conformance[host-matmul-float32-13x11x7-tile]"], ids
    again = shell(["pytest", ids[0], "--xtc-target=host", "--xtc-repeat=0",
                   f"--junitxml={pytester.path / 'j.xml'}"], pytester.path)
    assert counts(again.stdout) == "1 passed", again.stdout + again.stderr
    case = ET.parse(pytester.path / "j.xml").getroot().find(".//testcase")
    assert case is not None, ET.tostring(case)
    assert case.get("classname") == "pytest_xtc.conformance.test_conformance", case.attrib
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["xtc_target"] == "host"
    assert props["xtc_case"] == "matmul-float32-13x11x7-tile"
    assert props["xtc_status"] == "passed" and props["xtc_phase"]
    assert int(props["xtc_seed"]) >= 0
    assert props["xtc_rerun"].startswith("pytest ")
    assert shlex.split(props["xtc_rerun"])[1] == ids[0]  # relative, as the id pasted above
    assert "--xtc-max-case-bytes" not in props["xtc_rerun"]  # the default: not repeated
    assert "xtc_outcome" not in props  # no Python repr of a dict
    assert all(not (v or "").startswith("{") for v in props.values()), props


def test_case_selection_by_id_and_only_own_cases(pytester) -> None:
    from pytest_xtc.conformance import builtin_cases
    from pytest_xtc.core.xtc import xtc_env

    case = next(c for c in builtin_cases() if c.op == "relu" and c.dtype == "float32")
    folder = pytester.mkdir("mine")
    xtc_env.build_graph(case).dump(folder / "myrelu.yaml")
    (folder / "myrelu.yaml").open("a").write("schedules: {none: []}\nvalues: [random]\n")
    listing = shell(["pytest", "--xtc-target=host", "--xtc-cases=mine", "--xtc-only-cases",
                     "--co", "-q"], pytester.path)
    ids = re.findall(r"test_conformance\[([^\]]+)\]", listing.stdout)
    assert len(ids) == 1 and ids[0].startswith("host-"), listing.stdout + listing.stderr
    (pytester.path / "ids.txt").write_text(
        "# two cases\nhost-matmul-float32-13x11x7-tile\nrelu-float32-5x7-none\n"
    )
    chosen = shell(["pytest", "--xtc-target=host,host-c", "--xtc-case=@ids.txt",
                    "--xtc-case=host-c-pad-float32-5x7-pad0:1-2_1:0-3-none", "--co", "-q"],
                   pytester.path)
    got = set(re.findall(r"test_conformance\[([^\]]+)\]", chosen.stdout))
    assert got == {"host-matmul-float32-13x11x7-tile", "host-relu-float32-5x7-none",
                   "host-c-relu-float32-5x7-none", "host-c-pad-float32-5x7-pad0:1-2_1:0-3-none"
                   }, chosen.stdout + chosen.stderr
    unknown = shell(["pytest", "--xtc-target=host", "--xtc-case=host-no-such-case", "--co"],
                    pytester.path)
    assert unknown.returncode != 0
    assert "--xtc-case: no case of the selected targets has the id host-no-such-case" in (
        unknown.stdout + unknown.stderr)
    alone = shell(["pytest", "--xtc-target=host", "--xtc-only-cases", "--co"], pytester.path)
    assert alone.returncode == pytest.ExitCode.USAGE_ERROR, alone.stdout


def test_markers_select_by_target_op_dtype_placement_profile(pytester) -> None:
    def ids(*args: str) -> set[str]:
        done = shell(["pytest", "--co", "-q", "--strict-markers", *args], pytester.path)
        assert done.returncode in (0, 5), done.stdout + done.stderr
        return set(re.findall(r"test_conformance\[([^\]]+)\]", done.stdout))

    relu = ids("--xtc-target=host,host-c", "-m", "host_c and relu and float32 and core")
    # the relu family's cases and the graphs holding a relu (the graph family)
    assert relu and all(i.startswith(("host-c-relu-float32-", "host-c-graph-float32-"))
                        and "relu" in i for i in relu), relu
    assert any(i.startswith("host-c-relu-float32-") for i in relu), relu
    f64 = ids("--xtc-target=host", "-m", "matmul and float64")
    assert f64 and all("-float64-" in i for i in f64), f64
    # the graph family's float64 graphs holding a matmul (graph-float64-pad-pad-fan_out is
    # pad, pad, matmul) are matmul cases too
    assert {i.split("-")[1] for i in f64} == {"matmul", "matmul+relu", "mlp", "graph"}, f64
    assert ids("--xtc-target=host", "-m", "operands_device") == set()
    assert len(ids("--xtc-target=host", "-m", "xtc and operands_host")) >= 150
    listed = shell(["pytest", "--markers", "--xtc-target=host"], pytester.path).stdout
    for name in ("xtc:", "host:", "float64:", "operands_mixed:", "device_memory:", "matmul:"):
        assert f"@pytest.mark.{name}" in listed, name


def test_placed_case_markers(placer, pytester) -> None:
    done = shell(["pytest", "--co", "-q", "--xtc-target=placer", "-m",
                  "placer and operands_mixed and device_memory and matmul"], pytester.path)
    got = set(re.findall(r"test_conformance\[([^\]]+)\]", done.stdout))
    assert PLACED_CASE in got, done.stdout + done.stderr
    assert all("@dev" in i and "@host" in i for i in got)


def test_the_case_runs_in_the_call_phase(pytester) -> None:
    done = shell(["pytest", "--xtc-target=host", "-k", "matmul-float32-64x64x64-tile]",
                  "--durations=0", "--durations-min=0", "-vv"], pytester.path)
    pattern = r"^([\d.]+)s (setup|call)\s+\S*test_conformance"
    phases = {p: float(t) for t, p in re.findall(pattern, done.stdout, re.MULTILINE)}
    assert phases.get("call", 0) > 0.05, done.stdout
    assert phases.get("setup", 0) < phases["call"] / 2, done.stdout


# -- footprint -------------------------------------------------------------------------

MODULES_PROBE = """
import json, sys
def pytest_unconfigure(config):
    with open("modules.json", "w") as f:
        json.dump(sorted(sys.modules), f)
"""


def _modules(project: Path, *args: str) -> set[str]:
    done = shell(["pytest", "--co", "-q", "-p", "no:benchmark", *args], project)
    assert done.returncode in (0, 5), done.stdout + done.stderr
    import json

    return set(json.loads((project / "modules.json").read_text()))


def test_a_session_without_xtc_imports_only_the_option_declarations(pytester) -> None:
    pytester.makepyfile(test_a="def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    pytester.makeconftest(MODULES_PROBE)
    with_xtc = _modules(pytester.path)
    without = _modules(pytester.path, "-p", "no:xtc")
    added = with_xtc - without
    # compile_cache declares the kernel cache's options (stdlib and pytest alone)
    declarations = {"pytest_xtc.plugin.declarations", "pytest_xtc.plugin.compile_cache"}
    assert added <= {"pytest_xtc", "pytest_xtc.plugin", *declarations}, added
    assert not {m for m in with_xtc if m.split(".")[0] in ("numpy", "yaml", "xtc")}
    assert not (pytester.path / ".benchmarks").exists()
    # A session that uses XTC loads the adapters and declares their options.
    chosen = _modules(pytester.path, "--xtc-target=host", "--xtc-nvgpu-arch=sm_90",
                      "-k", "nothing-at-all")
    # (adapters themselves are imported only in their isolated worker processes)
    assert "pytest_xtc.core.adapters.registry" in chosen
    assert "pytest_xtc.targets.nvgpu" not in chosen


def test_adapter_options_are_declared_where_xtc_is_used(pytester, monkeypatch) -> None:
    helped = shell(["pytest", "--help"], pytester.path)
    assert "--xtc-nvgpu-arch" in helped.stdout and "--xtc-target" in helped.stdout
    plain = shell(["pytest", "--xtc-nvgpu-arch=sm_90", "--co", "-q", "-p", "no:benchmark"],
                  pytester.path)
    assert plain.returncode in (0, 5), plain.stderr
    monkeypatch.setenv("XTC_TEST_TARGETS", "nvgpu")
    env = shell(["pytest", "--co", "-q", "-k", "matmul-float32-13x11x7-tile-"], pytester.path)
    assert "nvgpu-matmul-float32-13x11x7-tile-A@" in env.stdout, env.stdout + env.stderr


def test_footprint_benchmark_runs(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "footprint.py"),
                           "--rounds", "2"], capture_output=True, text=True, timeout=300,
                          env=subprocess_env(), check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"median difference: -?[\d.]+ ms; ratio [\d.]+", done.stdout), done.stdout


# -- readability -----------------------------------------------------------------------


def test_tables_fit_80_columns_and_times_read_in_human_units() -> None:
    from pytest_xtc.report.render.text import human_time, table

    reason = "KALRAY_TOOLCHAIN_DIR is not set (needs the Kalray toolchain with kvx-cos-gcc)"
    text = table(["target", "status", "reason", "versions found"],
                 [["mppa-qemu", "unavailable", reason, "mppa-platform qemu, mppa-arch kv3-2"]])
    assert max(len(line) for line in text.splitlines()) <= 80, text
    assert "kvx-cos-gcc" in text.replace("\n", " ").replace(" ", "")  # wrapped, not cut
    assert [human_time(t) for t in (4.12e-7, 2.5e-5, 0.012239, 3.2)] == [
        "412 ns", "25 µs", "12.2 ms", "3.2 s"]


def test_perf_chart_is_log_scale_split_by_dtype_and_size(monkeypatch) -> None:
    import importlib.util

    from pytest_xtc.report.parts.records import CaseRecord
    from pytest_xtc.report.render import chart

    records = [
        CaseRecord(target="host", case=f"matmul-{dtype}-{n}x{n}x{n}-none", status="passed",
                   perf={"gflops": g, "numpy_gflops": 1.0, "flops": 2 * n**3})
        for dtype, n, g in (("float32", 4, 0.01), ("float32", 256, 20.0), ("float64", 4, 0.02))
    ]
    assert set(chart.gflops_by_group(records)) == {
        "host matmul float32 small", "host matmul float32 large", "host matmul float64 small"}
    if importlib.util.find_spec("matplotlib") is not None:
        svg = chart.render(records)
        assert svg is not None and "log scale" in svg
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else real(name, *a))
    with pytest.warns(UserWarning, match=r"matplotlib is not installed.*\[report\]"):
        assert chart.render(records) is None


def test_option_defaults_agree_with_the_core() -> None:
    """options.py keeps its own copies (it imports nothing of the core): they must agree."""
    from pytest_xtc.core import limits
    from pytest_xtc.core.adapters import registry
    from pytest_xtc.core.execution.perf import DEFAULT_TIMING
    from pytest_xtc.core.execution.remote import HostLimits
    from pytest_xtc.exploration import shrink
    from pytest_xtc.plugin import declarations, options

    assert options.DEFAULT_SELECTION == registry.DEFAULT_SELECTION
    assert DEFAULT_TIMING.repeat == options.DEFAULT_REPEAT
    assert DEFAULT_TIMING.number == options.DEFAULT_NUMBER
    assert DEFAULT_TIMING.min_repeat_ms == options.DEFAULT_MIN_REPEAT_MS
    assert options.DEFAULT_MAX_CASE_BYTES == limits.DEFAULT_MAX_CASE_BYTES
    assert HostLimits.probe == options.DEFAULT_PROBE_TIMEOUT
    assert shrink.DEFAULT_SECONDS == options.DEFAULT_SHRINK_SECONDS

    class Group:
        def __init__(self) -> None:
            self.names: list[str] = []

        def addoption(self, *flags: str, **kwargs: object) -> None:
            self.names += [f.removeprefix("--xtc-") for f in flags]

    class Parser:
        group = Group()

        def getgroup(self, *args: object) -> Group:
            return self.group

        def addini(self, *args: object, **kwargs: object) -> None:
            pass

    parser = Parser()
    declarations.add(parser)  # type: ignore[arg-type]
    assert set(parser.group.names) == set(registry.RESERVED_OPTIONS), (
        "core/adapters/registry.py RESERVED_OPTIONS must list every built-in --xtc- option"
    )


#: A user's decode-layer matmul with a 32 MB weight (4x4096 x 4096x2048 float32).
LARGE_CASE = """name: decode32mb
inputs:
- uid: '%0'
  expr: {type: {shape: [4, 4096], dtype: float32}}
- uid: '%1'
  expr: {type: {shape: [4096, 2048], dtype: float32}}
outputs:
- uid: '%2'
nodes:
- uid: '%2'
  expr:
    op: {name: matmul, attrs: {}}
    args: ['%0', '%1']
schedules:
  none: []
dtypes: [float32]
values: [random]
"""


def test_a_large_user_case_passes_isolated_and_its_rerun_line_reproduces_it(pytester) -> None:
    """A 32 MB weight crosses to the worker and back through shared memory under the
    default isolation: the case passes, and its rerun line (JUnit) passes it again with
    the same outputs, bit for bit."""
    (pytester.path / "cases").mkdir()
    (pytester.path / "cases" / "decode.yaml").write_text(LARGE_CASE)
    first = shell(["pytest", "--xtc-target=host", "--xtc-cases=cases", "--xtc-only-cases",
                   "--xtc-repeat=0", "--junitxml=first.xml", "--xtc-report=first"],
                  pytester.path)
    assert counts(first.stdout) == "1 passed", first.stdout + first.stderr
    case = ET.parse(pytester.path / "first.xml").getroot().find(".//testcase")
    assert case is not None
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    command = shlex.split(str(props["xtc_rerun"]))
    again = shell([*command, "--xtc-report=again"], pytester.path)
    assert counts(again.stdout) == "1 passed", again.stdout + again.stderr

    def digest(bundle: str) -> str:
        import json

        lines = (pytester.path / bundle / "results.jsonl").read_text().splitlines()
        return str(json.loads(lines[0])["output_digest"])

    assert digest("first") == digest("again") != "None"


def recorded(seed: int, options: dict[str, str | None] | None = None,
             args: tuple[str, ...] = (), where: str = "."):  # type: ignore[no-untyped-def]
    """A typed report of one run of ``host``, holding what a replay reads."""
    from pytest_xtc.report.parts import model

    settings = model.Settings(seed=seed, strict=False, ignore_expectations=False, cases=(),
                              suite_version=None, adapter_options=options)
    command = model.Command(argv=(), args=args, dir=where) if args else None
    run = model.Run(settings=settings, filters=(), interrupted="", system={}, command=command)
    target = model.Target(tier="execute", reason="", versions={}, device=None, placements=(),
                          capabilities=None, runs=(0,), shards=None,
                          case_set=model.TargetCaseSet(sha256="", count=0, cases=()))
    return model.Report(schema=1, kind="run", suite=model.Suite(name="pytest-xtc", version="0"),
                        waivers=(), runs=(run,), targets={"host": target})


def record_of(target: str, case: str):  # type: ignore[no-untyped-def]
    from pytest_xtc.report.parts.records import CaseRecord

    return CaseRecord(target=target, case=case, status="passed")


def test_replay_rebuilds_a_bundle_case_from_its_record_and_reruns_it(tmp_path: Path) -> None:
    """report/replay.py, the one rebuild of a bundle's case (verify --rerun and shrink):
    the run's seed, options and case files (read again from the run's directory), the
    suite's cases, the caller's rebuild of an explored id; a one-line reason for what
    cannot be replayed here."""
    from pytest_xtc.conformance import builtin_cases
    from pytest_xtc.exploration import explore, shrink
    from pytest_xtc.report.replay import Replay, ReplayError

    base = next(c for c in builtin_cases() if c.id == "matmul-float32-13x11x7-none")
    mine = shrink.write_case_file(tmp_path / "mine.yaml", shrink.State(base.graph, base.schedule),
                                  base, "mine")
    report = recorded(5, {"opt": "v", "unset": None}, ("x.py", "--xtc-cases", "mine.yaml"),
                      str(tmp_path))
    replay = Replay(report, rebuild=explore.rebuild)
    assert replay.settings("host").base_seed == 5 and replay.option_flags("host") == ["--xtc-opt=v"]
    assert replay.case("host", mine.id).graph == mine.graph  # from the run's case file
    assert replay.case("host", base.id) is not None  # from the suite
    with pytest.raises(ReplayError, match="not a case of this suite"):
        replay.case("host", "matmul-float32-13x11x7-nosuchschedule")
    with pytest.raises(ReplayError, match="cannot rebuild the case: "):  # explore's say
        replay.case("host", "matmul-float32-13x11x7-explore-nosuch-0of1")
    with pytest.raises(ReplayError, match=r"cannot rerun here: .*nosuch"):
        replay.rerun(record_of("nosuch", base.id), tmp_path)
    (tmp_path / "mine.yaml").unlink()
    with pytest.raises(ReplayError, match="case files"):
        Replay(report).case("host", mine.id)

    outcome = Replay(recorded(5)).rerun(record_of("host", base.id), tmp_path)
    assert outcome.status.value == "passed" and outcome.seed == base.seed(5)
