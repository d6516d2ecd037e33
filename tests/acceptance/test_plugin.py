"""The plugin as users run it: options, selection, discovery, skips, strictness."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest
import yaml

from tests import ROOT
from tests.conftest import FAULTY

# the hand-written schedules of three shapes; not the model_* schedules nor the stride_int
# form the generated catalog later added to them
FEW = (
    "(matmul-float32-13x11x7 or relu-float32-5x7 or conv2d-float32-1x9x9x3-3x3x8-s2-p1)"
    " and not model_ and not stride_int"
)

UNAVAILABLE_ADAPTER = """
from pytest_xtc.core.adapter import Probe, Tier
from pytest_xtc.targets.host import HostTarget

class NoWidget(HostTarget):
    def probe(self):
        return Probe(Tier.UNAVAILABLE, "no widget attached (set WIDGET_DIR)")
"""


def listed_rows(lines: list[str]) -> dict[str, str]:
    """The rows of --xtc-list-targets by target, each with its wrapped continuation lines
    joined (the table fits 80 columns)."""
    rows: dict[str, str] = {}
    name = ""
    for line in lines:
        if line and line[0].isalpha():
            name = line.split()[0]
            rows[name] = " ".join(line.split())
        elif line.startswith(" ") and name:
            rows[name] += " " + " ".join(line.split())
    return rows


def test_list_targets_shows_every_registered_target(run) -> None:
    result = run("--xtc-list-targets")
    assert result.ret == 0
    rows = listed_rows(result.outlines)
    for name in ("host", "host-c", "nvgpu", "mppa", "mppa-iss", "mppa-qemu", "mppa-hw"):
        assert name in rows, result.stdout.str()
    assert "available" in rows["host"] and "xtc-tools 0." in rows["host"]
    assert max(len(line) for line in result.outlines) <= 80, result.stdout.str()


def xtc_section(result: pytest.RunResult) -> list[str]:
    """The lines of the XTC summary: from its title to pytest's last line."""
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if "XTC conformance" in line)
    return lines[start:-1]


def test_unknown_target_is_a_usage_error_listing_the_names(run) -> None:
    result = run("--xtc-target=no-such-target")
    assert result.ret not in (0, 1)
    err = result.stderr.str()
    assert "unknown XTC target 'no-such-target'" in err
    assert "host, host-c" in err and "nvgpu" in err


def test_malformed_target_name_is_a_usage_error(run) -> None:
    result = run("--xtc-target=host[x]")
    assert result.ret not in (0, 1)
    assert "malformed target name" in result.stderr.str()


@pytest.mark.parametrize("how", ["option", "env", "ini"])
def test_selection_by_option_env_and_ini(pytester, run, monkeypatch, how) -> None:
    args = ["--collect-only", "-q"]
    if how == "option":
        args.append("--xtc-target=host-c")
    elif how == "env":
        monkeypatch.setenv("XTC_TEST_TARGETS", "host-c")
    else:
        pytester.makeini("[pytest]\nxtc_targets = host-c\n")
    result = run(*args)
    ids = [line for line in result.outlines if "test_conformance[" in line]
    assert ids and all("[host-c-" in line for line in ids), result.stdout.str()


def test_ids_read_target_op_dtype_shape_schedule(run) -> None:
    result = run("--xtc-target=host", "--collect-only", "-q")
    ids = set(re.findall(r"test_conformance\[([^\]]+)\]", result.stdout.str()))
    assert "host-matmul-float32-13x11x7-tile" in ids
    assert "host-conv2d-float64-1x9x9x3-3x3x8-s2-p1-unroll" in ids
    assert "host-matmul-float32-13x11x7-none-exact" in ids
    assert len(ids) >= 150


def test_collected_items_are_left_to_the_session_by_the_cycle_collector(pytester, run) -> None:
    """After collection the items are frozen (``gc.freeze``): pytest's own ``gc.collect``
    at the end no longer walks the catalog's thousands of items (0.25 s each)."""
    pytester.makeconftest(
        "import gc\n"
        "def pytest_sessionfinish(session):\n"
        "    tracked = {id(o) for o in gc.get_objects()}\n"
        "    print('items tracked:', sum(id(i) in tracked for i in session.items),"
        " 'of', len(session.items))\n"
    )
    result = run("--xtc-target=host", "--collect-only", "-q", "-s", "-k", "matmul")
    found = re.search(r"items tracked: (\d+) of (\d+)", result.stdout.str())
    assert found and int(found[2]) > 100 and found[1] == "0", result.stdout.str()[-2000:]


REWRITE_PROBE = """
import sys
def pytest_sessionfinish(session):
    mine = [n for n, m in list(sys.modules.items()) if n.startswith("pytest_xtc")]
    found = sorted(n for n in mine if type(getattr(sys.modules[n], "__loader__", None)).__name__
                   == "AssertionRewritingHook")
    print("loaded:", len(mine), "rewritten:", " ".join(found))
"""


def test_the_plugins_own_modules_are_not_assertion_rewritten(tmp_path) -> None:
    """pytest marks every module of a plugin's distribution for assertion rewriting (from
    a checkout, where the build's ``egg-info`` lists them, or a wheel's RECORD); where the
    rewritten code cannot be cached (PYTHONDONTWRITEBYTECODE, read-only installs) each
    session parsed and compiled the whole package again (139 modules, 0.4 to 0.6 s). Only the
    package, the entry module and the suite's test module are rewritten now."""
    (tmp_path / "rewrite_probe.py").write_text(REWRITE_PROBE)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path),
                                                        os.environ.get("PYTHONPATH")]))}
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_ADDOPTS"):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "rewrite_probe", "-p", "no:cacheprovider",
         "--xtc-target=host", "--collect-only", "-q", "-s", "-k", "relu-float32-5x7-none",
         "pytest_xtc/conformance"], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=300)
    found = re.search(r"loaded: (\d+) rewritten: (.*)", done.stdout)
    assert found and int(found[1]) > 50, done.stdout[-2000:] + done.stderr[-2000:]
    assert set(found[2].split()) <= {"pytest_xtc", "pytest_xtc.plugin",
                                     "pytest_xtc.conformance.test_conformance"}, found[2]


WARM_RECORDER = """
from pathlib import Path
from pytest_xtc.core.execution.remote import IsolatedAdapter

def warm(self):
    with Path("warmed.txt").open("a") as log:
        log.write(self.name + "\\n")

IsolatedAdapter.warm = warm
"""


def test_help_starts_no_adapter_host(pytester, run) -> None:
    """``--help`` with a target named declares the adapters' options and shows them, but
    sets up no session: no adapter host is started (it would import XTC for nothing); a
    session still starts one."""
    pytester.makeconftest(WARM_RECORDER)
    warmed = pytester.path / "warmed.txt"
    result = run("--xtc-target=host", "--help")
    assert result.ret == 0 and "--xtc-nvgpu-arch" in result.stdout.str()
    assert not warmed.exists()
    result = run("--xtc-target=host", "--collect-only", "-q", "-k", "host-relu-float32-5x7")
    assert result.ret == 0, result.stdout.str()[-2000:]
    assert warmed.read_text().split() == ["host"]


def test_host_cases_pass(run) -> None:
    result = run("--xtc-target=host,host-c", "-k", FEW)
    # 22 cases each; host-c declares no vectorize (2 cases), so those are not supported
    result.assert_outcomes(passed=42, skipped=2)
    result.stdout.fnmatch_lines(["*2 x not-supported: host-c: schedule primitive vectorize*"])
    section = xtc_section(result)
    assert max(len(line) for line in section) <= 80, "\n".join(section)
    assert any(line.startswith("time/numpy: ") for line in section), section  # explained
    assert not any(" 0.000 ms" in line for line in section)
    # a -k run leaves cases out: unused expected-failure entries say nothing then
    assert "expected-failure entries unused" not in result.stdout.str()


def test_vendor_adapter_from_another_distribution(vendor, run) -> None:
    vendor(
        "acme_xtc",
        {"acme-cpu": "acme_adapter:AcmeCpu"},
        {
            "acme_adapter": "from pytest_xtc.targets.host import HostTarget\n"
            "class AcmeCpu(HostTarget):\n    pass\n"
        },
    )
    listing = run("--xtc-list-targets")
    assert "available" in listed_rows(listing.outlines)["acme-cpu"]
    result = run("--xtc-target=acme-cpu", "-k", "matmul-float32-13x11x7-tile", "-v")
    result.assert_outcomes(passed=2)  # tile, tile-exact (tile+interchange runs in float64)
    assert "test_conformance[acme-cpu-matmul-float32-13x11x7-tile] PASSED" in result.stdout.str()


def test_broken_adapter_is_unavailable_and_the_rest_keep_working(vendor, run) -> None:
    vendor(
        "broken_xtc",
        {"broken": "broken_adapter:Broken"},
        {"broken_adapter": "raise ImportError('libwidget.so not found')\n"},
    )
    listing = run("--xtc-list-targets")
    row = listed_rows(listing.outlines)["broken"]
    assert "unavailable" in row and "libwidget.so not found" in row
    result = run("--xtc-target=broken,host", "-k", "matmul-float32-13x11x7-tile", "-rs")
    result.assert_outcomes(passed=2, skipped=2)
    result.stdout.fnmatch_lines(
        ["*broken: adapter failed to load: ImportError: libwidget.so not found*"]
    )


def test_unavailable_target_skips_with_its_reason_and_strict_fails(vendor, run) -> None:
    vendor(
        "widget_xtc", {"widget": "widget_adapter:NoWidget"}, {"widget_adapter": UNAVAILABLE_ADAPTER}
    )
    result = run("--xtc-target=widget", "-k", "matmul-float32-13x11x7 and not model_", "-rs")
    assert result.ret == 0
    outcomes = result.parseoutcomes()
    assert outcomes["skipped"] == 8 and "passed" not in outcomes
    result.stdout.fnmatch_lines(["*widget: no widget attached (set WIDGET_DIR)*"])
    strict = run("--xtc-target=widget", "-k", "matmul-float32-13x11x7 and not model_",
                 "--xtc-strict")
    assert strict.ret == 1
    strict.assert_outcomes(failed=8)
    strict.stdout.fnmatch_lines(["*--xtc-strict: cannot run here: widget: no widget attached*"])


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("last-row-wrong", "elements exceed the bound"),
        ("float16", "elements exceed the bound"),
        ("output-never-written", "never written: still NaN"),
        ("input-overwritten", "input A was modified by the kernel"),
    ],
)
def test_deliberately_wrong_host_targets_fail(vendor, run, fault, expected) -> None:
    vendor("faulty_xtc", FAULTY)
    result = run(f"--xtc-target=faulty-{fault}", "-k", "matmul-float32-31x37x29-tile]")
    assert result.ret == 1
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert expected in out
    assert re.search(r"wrong results \(seed \d+\)", out)
    rerun = r"rerun alone: pytest \S+::test_conformance\[faulty-.* --xtc-target=faulty-"
    assert re.search(rerun, out)


def test_failure_states_figures_and_the_rerun_command_reproduces_it(vendor, run, pytester) -> None:
    vendor("faulty_xtc", FAULTY)
    first = run(
        "--xtc-target=faulty-float16", "--xtc-seed=7", "-k", "matmul-float32-64x64x64-tile]"
    )
    out = first.stdout.str()
    figures = re.search(r"largest error (\S+) at \[(\d+), (\d+)\].*error/bound ratio (\S+)", out)
    assert figures, out
    assert float(figures.group(4)) > 1
    command = re.search(r"rerun alone: pytest (.+)", out).group(1)
    again = run(*shlex.split(command))
    again.assert_outcomes(failed=1)
    assert figures.group(0) in again.stdout.str()


def test_user_case_files_run_and_are_checked_like_builtin_ones(pytester, run) -> None:
    from pytest_xtc.conformance import builtin_cases
    from pytest_xtc.core.xtc import xtc_env

    case = next(c for c in builtin_cases() if c.op == "conv2d+relu")
    folder = pytester.mkdir("my_cases")
    path = folder / "my_conv.yaml"
    xtc_env.build_graph(case).dump(path)
    with path.open("a") as f:
        f.write("schedules: {none: [], tiled: [{node: O}, {tile: [f, {f1: 2}]}]}\n")
    result = run(
        "--xtc-target=host", "--xtc-cases=my_cases", "-k", "pad_conv2d or conv2d_relu", "-v"
    )
    result.assert_outcomes(passed=4)  # 2 schedules x (random, exact)
    result.stdout.fnmatch_lines(
        ["*test_conformance?host-conv2d_relu-float32-1x5x5x8-tiled-exact? PASSED*"]
    )


def test_bad_case_file_is_a_usage_error(pytester, run) -> None:
    pytester.makefile(".yaml", broken="inputs: [1]\nnodes: []\n")
    result = run("--xtc-target=host", "--xtc-cases=broken.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "broken.yaml: not an XTC graph YAML" in result.stderr.str()


def test_expectations_are_audited_and_updates_written_for_review(vendor, run, pytester) -> None:
    root = vendor(
        "flaky_xtc",
        {"f16": "flaky:F16"},
        {
            "flaky": "from pytest_xtc.selftest import faults\n"
            "class F16(faults.Float16Arithmetic):\n    pass\n"
        },
    )
    (root / "flaky.expectations.yaml").write_text(
        "- pattern: matmul-float32-13x11x7-tile\n  phase: run\n  reason: half\n  url: u\n"
        "- pattern: relu-*\n  phase: compile\n  reason: never seen\n  url: u\n"
        "- pattern: matmul-float32-13x11x7-none-exact\n  phase: run\n  reason: r\n  url: u\n"
    )
    result = run(
        "--xtc-target=f16",
        "-k",
        "f16-matmul-float32-13x11x7-tile] or f16-matmul-float32-13x11x7-none",
        "--xtc-update-expectations=review",
    )
    # tile: expected failure; none: a new failure; none-exact: exact in float16, so an
    # unexpected pass that says to remove its entry
    result.assert_outcomes(xfailed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*unexpected pass: remove the entry 'matmul-float32-13x11x7-none-exact' (line 9)*",
            "*expected-failure file for review (not applied): *review*flaky.expectations.yaml",
        ]
    )
    # -k left most cases out: no entry is called unused
    assert "matched no case" not in result.stdout.str()
    updated = yaml.safe_load((pytester.path / "review" / "flaky.expectations.yaml").read_text())
    assert [(e["pattern"], e["phase"]) for e in updated] == [
        ("matmul-float32-13x11x7-tile", "run"),
        ("matmul-float32-13x11x7-none", "run"),
    ]
    assert (root / "flaky.expectations.yaml").read_text().count("pattern") == 3  # untouched
    # --xtc-only-cases: the built-in catalog, which the entries are written against, did
    # not run, so no entry is called unused (each of the user's cases ran).
    from pytest_xtc.conformance import builtin_cases
    from pytest_xtc.core.xtc import xtc_env

    case = next(c for c in builtin_cases() if c.id == "matmul-float32-13x11x7-none")
    xtc_env.build_graph(case).dump(pytester.path / "mine.yaml")
    with (pytester.path / "mine.yaml").open("a") as f:
        f.write("schedules: {none: []}\nvalues: [exact]\n")
    own = run("--xtc-target=f16", "--xtc-cases=mine.yaml", "--xtc-only-cases")
    own.assert_outcomes(passed=1)
    assert "expected-failure entries unused" not in own.stdout.str()


def test_unused_expectations_are_listed_after_the_whole_catalog(vendor, run) -> None:
    # A target declaring no op: every catalog case is "not supported", quickly; the whole
    # case set ran, so an entry that matched nothing is listed.
    root = vendor(
        "bare_xtc",
        {"bare": "bare:Bare"},
        {
            "bare": "from pytest_xtc.core.adapter import Capabilities\n"
            "from pytest_xtc.targets.host import HostTarget\n"
            "class Bare(HostTarget):\n"
            "    def capabilities(self):\n"
            "        return Capabilities(ops=frozenset())\n"
        },
    )
    (root / "bare.expectations.yaml").write_text(
        "- pattern: matmul-*\n  phase: run\n  reason: r\n  url: u\n"
        "- pattern: no-such-case\n  phase: run\n  reason: r\n  url: u\n"
    )
    result = run("--xtc-target=bare", "-q")
    assert result.ret == 0, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(
        ["*bare.expectations.yaml:5: 'no-such-case' matched no case of bare in this run*"]
    )
    assert "'matmul-*' matched no case" not in result.stdout.str()
