"""Honest tiers: a case compiled and inspected but never run is ``compiled``, never
``passed``, everywhere (pytest's counts, the XTC table, JUnit, results.jsonl, report.json,
summary.md, certification); expectations that apply to executed runs only; the XTC 0.3.2
tensor-dialect relu bug of nvgpu listed by properties, and a faulty variant that still fails.

Two kinds of runs: a FAKE compile-only target (XTC's real host compile, its probe saying
compile-only) runs everywhere; the nvgpu tests use the CUDA toolkit for sm_90 (no GPU:
nothing runs) and are skipped without one.
"""

from __future__ import annotations

import json
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_xtc.core.adapter import Tier
from pytest_xtc.core.cases import expectations
from pytest_xtc.core.cases.case import load_case_paths
from pytest_xtc.core.cases.selectors import Traits
from pytest_xtc.report.parts.reasons import ReasonCode, parse
from pytest_xtc.report.rules import verdicts
from pytest_xtc.targets import nvgpu
from tests import DATA

TENSOR_RELU = DATA / "nvgpu_tensor_relu"
NVGPU_EXPECTATIONS = Path(nvgpu.__file__).with_suffix(".expectations.yaml")
CASE = "matmul-float32-13x11x7-tile"  # two cases: tile, tile-exact

#: FAKE: XTC's real host compile, a probe saying compile-only (nothing runs).
COMPILE_ONLY = """
from pytest_xtc.core.adapter import Probe, Tier
from pytest_xtc.targets.host import HostTarget

class CompileOnlyHost(HostTarget):
    def probe(self):
        found = super().probe()
        return Probe(Tier.COMPILE_ONLY, "fake: compiled for the host, not run", found.versions,
                     device="host CPU (compile only)")
"""

#: FAULTY: an nvgpu that maps no loop onto the GPU: host code only, for every case.
HOST_ONLY_NVGPU = """
import dataclasses, inspect
from pathlib import Path
from pytest_xtc.targets import nvgpu

class HostOnlyNvgpu(nvgpu.NvgpuTarget):
    def expectations_file(self):  # nvgpu's own list of XTC bugs
        return Path(inspect.getfile(nvgpu.NvgpuTarget)).with_suffix(".expectations.yaml")

    def compile(self, case, workdir):
        steps = tuple(s for s in case.schedule.steps if s[0] != "parallelize")
        case = dataclasses.replace(case, schedule=dataclasses.replace(case.schedule, steps=steps))
        kept, nvgpu.gpu_steps = nvgpu.gpu_steps, lambda *args: []
        try:
            return super().compile(case, workdir)
        finally:
            nvgpu.gpu_steps = kept
"""


def _compile_only(vendor: Any, entries: str = "") -> Path:
    root: Path = vendor("fake_tier", {"fakeco": "fake_tier_adapter:CompileOnlyHost"},
                        {"fake_tier_adapter": COMPILE_ONLY})
    if entries:
        (root / "fake_tier_adapter.expectations.yaml").write_text(textwrap.dedent(entries))
    return root


def _nvgpu_compiles() -> None:
    from pytest_xtc.core.adapters import registry

    probe = registry.resolve("nvgpu", {"nvgpu-arch": "sm_90"})[0].status()
    if probe.tier not in (Tier.COMPILE_ONLY, Tier.EXECUTE):
        pytest.skip(f"nvgpu cannot compile here: {probe.reason}")


def _outcomes(result: pytest.RunResult) -> dict[str, int]:
    return {k: v for k, v in result.parseoutcomes().items() if v and k != "deselected"}


# -- the terminal, JUnit, results.jsonl, report.json, summary.md ---------------------------


def test_fake_compile_only_cases_read_compiled_everywhere(vendor, run, pytester) -> None:
    _compile_only(vendor)
    result = run("--xtc-target=fakeco", "-k", CASE, "-v", "--xtc-report=rep",
                 "--junitxml=junit.xml")
    out = result.stdout.str()
    assert result.ret == 0, out[-3000:]
    assert _outcomes(result) == {"compiled": 2}, out[-3000:]  # before: 2 passed
    assert " PASSED" not in out and " passed" not in out.splitlines()[-1]
    assert f"test_conformance[fakeco-{CASE}] COMPILED" in out
    table = [line.split() for line in out.splitlines() if line.startswith("fakeco ")]
    header = next(line.split() for line in out.splitlines() if line.startswith("target "))
    assert table[0][header.index("compiled")] == "2" and "passed" not in header
    assert max(len(line) for line in out.splitlines() if line.startswith("target ")) <= 80
    assert "2 x compiled: compile-only tier: fake: compiled for the host, not run" in out
    cases = ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    statuses = [p.get("value") for c in cases for p in c.iter("property")
                if p.get("name") == "xtc_status"]
    assert statuses == ["compiled"] * 2
    records = [json.loads(line) for line in (pytester.path / "rep" / "results.jsonl")
               .read_text().splitlines()]
    assert {(r["status"], r["pytest_outcome"], r["phase"]) for r in records} == {
        ("compiled", "compiled", "check-artifact")}
    report = json.loads((pytester.path / "rep" / "report.json").read_text())
    counts = report["targets"]["fakeco"]["counts"]
    assert counts["compiled"] == 2 and counts["passed"] == 0
    core = report["targets"]["fakeco"]["verdicts"]["core"]
    assert any(r.startswith("2 required cases compiled, not run") for r in core["reasons"])
    summary = (pytester.path / "rep" / "summary.md").read_text()
    header_row = next(line for line in summary.splitlines() if line.startswith("| target"))
    assert "| passed | compiled |" in header_row
    assert "compiled, not run (compiled is not a pass)" in summary


def test_an_executed_tier_still_passes(run) -> None:
    """The real host runs its cases: passed, no compiled column (the control)."""
    result = run("--xtc-target=host", "-k", CASE, "--xtc-repeat=0")
    assert _outcomes(result) == {"passed": 2}, result.stdout.str()[-3000:]
    header = next(line for line in result.stdout.lines if line.startswith("target "))
    assert "passed" in header and "compiled" not in header


def test_compile_only_nvgpu_run_shows_no_passed(run) -> None:
    _nvgpu_compiles()
    result = run("--xtc-target=nvgpu", "--xtc-nvgpu-arch=sm_90", "-v", "-k",
                 "relu-float32-5x7-none and not device and not mixed")
    out = result.stdout.str()
    assert result.ret == 0, out[-3000:]
    assert _outcomes(result) == {"compiled": 2}, out[-3000:]  # none, none-exact; before: passed
    assert "PASSED" not in out and "COMPILED" in out and "sm_90, not run" in out


# -- certification -------------------------------------------------------------------------


def _record(case: str, status: str) -> dict[str, Any]:
    return {"target": "t", "case": case, "status": status, "phase": "check-artifact",
            "message": "compile-only tier: no GPU: compiled for sm_90, not run"}


def test_certification_never_counts_compiled_as_executed() -> None:
    required = {"a": "core", "b": "core"}
    judged = verdicts.judge("t", required, [_record("a", "compiled"), _record("b", "compiled")],
                            [])
    core = judged.verdicts["core"]
    assert core.verdict.value == verdicts.NOT_CONFORMANT
    assert judged.counts["compiled"] == 2 and judged.counts["passed"] == 0
    assert [r.code for r in core.reasons] == [ReasonCode.COMPILED]
    assert parse(core.reasons[0].text).code is ReasonCode.COMPILED
    # one executed pass beside a compiled case is still not conformant
    mixed = verdicts.judge("t", required, [_record("a", "passed"), _record("b", "compiled")], [])
    assert mixed.verdicts["core"].verdict.value == verdicts.NOT_CONFORMANT
    # the control: both executed and passed
    both = verdicts.judge("t", required, [_record("a", "passed"), _record("b", "passed")], [])
    assert both.verdicts["core"].verdict.value == verdicts.CONFORMANT
    assert "compiled" not in both.counts  # a bundle without it assembles as before


# -- expectations for executed runs only ---------------------------------------------------


def _entries(tmp_path: Path, text: str) -> tuple[expectations.Expectation, ...]:
    path = tmp_path / "t.expectations.yaml"
    path.write_text(textwrap.dedent(text))
    return expectations.load(path)


def test_executed_only_entry_applies_to_executed_runs_only(tmp_path: Path) -> None:
    (gpu_only, compile_only, both) = _entries(tmp_path, """\
        - pattern: "relu-*"
          executed: true
          phase: run
          reason: wrong results on the device
          url: https://example.org/1
        - pattern: "relu-*"
          executed: false
          phase: run
          reason: artifact check only
          url: https://example.org/2
        - pattern: "relu-*"
          phase: run
          reason: either
          url: https://example.org/3
        """)
    case = "relu-float32-5x7-none"
    assert expectations.find([gpu_only, both], case, executed=True) is gpu_only
    assert expectations.find([gpu_only, both], case, executed=False) is both
    assert expectations.find([gpu_only], case, executed=False) is None
    assert expectations.find([compile_only], case, executed=True) is None
    assert expectations.find([compile_only], case, executed=False) is compile_only
    (tmp_path / "again.yaml").write_text(expectations.dumps([gpu_only, both]))
    again = expectations.load(tmp_path / "again.yaml")  # (load() caches by path)
    assert [e.executed for e in again] == [True, None]


def test_executed_key_that_is_not_a_boolean_is_refused(tmp_path: Path) -> None:
    with pytest.raises(expectations.ExpectationFileError,
                       match=r"t.expectations.yaml:1: executed must be true .* not 'yes'"):
        _entries(tmp_path, """\
            - pattern: "relu-*"
              executed: "yes"
              phase: run
              reason: r
              url: u
            """)


ENTRY = """\
    - pattern: "{pattern}"
      {executed}phase: run
      reason: a bug seen on the device only
      url: https://example.org/gpu-only
    """


@pytest.mark.parametrize(("executed", "outcomes"), [
    ("executed: true\n      ", {"compiled": 2}),  # the device bug: not judged by compiling
    ("", {"failed": 2}),  # without it: the entry says run fails, the case compiled: unexpected
])
def test_executed_only_entry_leaves_compile_only_runs_alone(vendor, run, executed: str,
                                                            outcomes: dict[str, int]) -> None:
    _compile_only(vendor, ENTRY.format(pattern=f"{CASE}*", executed=executed))
    result = run("--xtc-target=fakeco", "-k", CASE)
    assert _outcomes(result) == outcomes, result.stdout.str()[-3000:]
    if "failed" in outcomes:
        result.stdout.fnmatch_lines(["*unexpected compile*remove the entry*"])


def test_compile_bug_expectation_still_xfails_on_the_compile_only_tier(vendor, run) -> None:
    """A compile failure (XTC's float64 relu bug) listed with phase compile: xfailed."""
    _compile_only(vendor, """\
        - ops: [relu]
          dtypes: [float64]
          phase: compile
          reason: XTC emits an f32 zero in float64 relu
          url: https://example.org/f64
        """)
    result = run("--xtc-target=fakeco", "-k", "relu-float64-5x7-none", "-rx")
    assert _outcomes(result) == {"xfailed": 1}, result.stdout.str()[-3000:]


# -- the XTC nvgpu tensor-dialect relu bug, by properties ----------------------------------


def _bug_entry() -> expectations.Expectation:
    entries = expectations.load(NVGPU_EXPECTATIONS)
    return next(e for e in entries if e.selector.lead_trips is not None)


def test_tensor_relu_entry_selects_by_properties_exactly_the_host_only_cases() -> None:
    """The entry names no case id: a 16xN relu tiled by 16 or 32 under the tensor dialect
    (and a 1xN one untiled, a 64-row one tiled by 64), not the same tiled by 8, nor in
    XTC's memref form, nor a 64-row relu tiled by 32 (two iterations: a kernel)."""
    entry = _bug_entry()
    assert entry.selector.pattern is None and entry.phase == "run"
    matched = {c.id for c in load_case_paths([TENSOR_RELU]) if entry.matches(c, "0.3.2")}
    assert matched == {
        "gpt2_act_relu_s16-float32-16x768-td-tile16-par",
        "gpt2_act_relu_s16-float32-16x768-td-tile32-par",
        "gpt2_act_relu_s16-float32-16x768-td-tile16",
        "relu_tensor_rows-float32-64x129-td-tile64-par",
        "relu_tensor_one_row-float32-1x512-td-none",
    }
    assert not any(entry.matches(c, "0.4.0") for c in load_case_paths([TENSOR_RELU]))


def test_lead_trips_and_backend_traits_survive_a_record() -> None:
    case = next(c for c in load_case_paths([TENSOR_RELU]) if c.id.endswith("16x768-td-tile32-par"))
    traits = Traits.of(case)
    assert (traits.scheduled_op, traits.lead_trips) == ("relu", 1)
    assert dict(traits.backend) == {"use_tensor_dialect": True}
    assert Traits.from_dict(traits.to_dict()) == traits
    old = {k: v for k, v in traits.to_dict().items()
           if k not in ("backend", "scheduled_op", "lead_trips")}
    assert not _bug_entry().matches(Traits.from_dict(old), "0.3.2")  # an older record: unknown


def test_user_case_files_on_nvgpu_compile_tier_are_compiled_or_listed(run) -> None:
    """Every placement: before the entry, the five cases of the bug failed on host code
    only, placed on the host and on the device (the mixed placements fail earlier, on
    XTC's relu placement bug, listed before it)."""
    _nvgpu_compiles()
    result = run("--xtc-target=nvgpu", "--xtc-nvgpu-arch=sm_90", f"--xtc-cases={TENSOR_RELU}",
                 "--xtc-only-cases", "-rx", "-n", "2")
    out = result.stdout.str()
    assert result.ret == 0, out[-3000:]
    assert _outcomes(result) == {"compiled": 10, "xfailed": 30}, out[-3000:]
    assert out.count("expected run failure: XTC 0.3.2 nvgpu, tensor dialect") == 10


def test_faulty_nvgpu_giving_host_code_only_still_fails_where_xtc_makes_a_kernel(
        vendor, run) -> None:
    """FAULTY variant: no loop mapped to the GPU. Where XTC's bug gives host code only the
    entry covers it (xfailed); everywhere else XTC makes a kernel, and the variant fails:
    the expectation hides no genuine fault."""
    _nvgpu_compiles()
    vendor("faulty_nvgpu", {"host-only-nvgpu": "faulty_nvgpu_adapter:HostOnlyNvgpu"},
           {"faulty_nvgpu_adapter": HOST_ONLY_NVGPU})
    result = run("--xtc-target=host-only-nvgpu", "--xtc-nvgpu-arch=sm_90",
                 f"--xtc-cases={TENSOR_RELU}", "--xtc-only-cases", "-k", "not device and not mixed")
    out = result.stdout.str()
    assert _outcomes(result) == {"failed": 5, "xfailed": 5}, out[-3000:]
    assert out.count("no gpu.binary, XTC produced host code only") >= 5
    for name in ("td-tile8-par", "memref-tile32-par", "64x129-td-tile32-par", "64x129-td-none",
                 "1x512-memref-none"):
        assert any(line.startswith("FAILED") and name in line for line in out.splitlines()), name



def test_expectation_updates_keep_the_other_tiers_entries(tmp_path: Path) -> None:
    """--xtc-update-expectations after a compile-only run: an executed-only entry is not
    judged (kept); an entry whose cases all compiled is dropped; a failure gets one."""
    from pytest_xtc.plugin.terminal import Result, write_updates

    path = tmp_path / "t.expectations.yaml"
    path.write_text(textwrap.dedent(ENTRY.format(pattern="a*", executed="executed: true\n      "))
                    + textwrap.dedent(ENTRY.format(pattern="b*", executed="")))

    def result(case: str, status: str) -> Result:
        return Result("t", case, status, status, "check-artifact", "m", None,
                      tier=Tier.COMPILE_ONLY.value)

    (written,) = write_updates(tmp_path / "review", {"t": path},
                               [result("a1", "compiled"), result("b1", "compiled"),
                                result("c1", "failed")])
    proposed = expectations.load(written)
    assert [(e.pattern, e.executed) for e in proposed] == [("a*", True), ("c1", None)]


def test_explored_schedules_that_only_compiled_are_tallied_as_compiled() -> None:
    from pytest_xtc.exploration import tally

    drawn = "matmul-float32-8x8x8-explore-tile_oo"
    rows = [(f"{drawn}-0of2", "compiled", "compile-only tier", "compiled"),
            (f"{drawn}-1of2", "passed", "", "passed")]
    assert tally.tally(rows)["tile_oo"] == {"compiled": 1, "passed": 1}  # before: 1 failed


def test_a_compile_only_targets_cases_judged_from_a_pack_were_executed(
        vendor, run, pytester) -> None:
    """Packed here (compile only), run by the device runner, judged from the pack: the
    kernels ran, on the machine that ran the pack. The cases are passed, not compiled, the
    record says tier execute, and an entry limited to executed runs applies to them (a
    listed case that passes is then an unexpected pass)."""
    import subprocess
    import sys

    _compile_only(vendor, ENTRY.format(pattern=f"{CASE}-exact*", executed="executed: true\n      "))
    pack = pytester.path / "pack"
    packing = run("--xtc-target=fakeco", "-k", CASE, f"--xtc-pack={pack}")
    assert _outcomes(packing) == {"skipped": 2}, packing.stdout.str()[-2000:]
    subprocess.run([sys.executable, str(pack / "runner" / "device_runner.py"), str(pack)],
                   check=True, capture_output=True)
    result = run("--xtc-target=fakeco", "-k", CASE, f"--xtc-from-pack={pack}",
                 "--xtc-report=rep")
    assert _outcomes(result) == {"passed": 1, "failed": 1}, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*unexpected pass*remove the entry*"])
    records = [json.loads(line) for line in (pytester.path / "rep" / "results.jsonl").open()]
    assert {r["tier"] for r in records} == {Tier.EXECUTE.value}
    target = json.loads((pytester.path / "rep" / "report.json").read_text())["targets"]["fakeco"]
    assert target["tier"] == Tier.EXECUTE.value
    assert "kernels run by the pack's device runner (Python " in target["device"]
