"""The real-model case files of examples/model-cases/ci through the real plugin: every
non-pass is a listed XTC bug or a declared unsupported feature, and a faulty host variant
is rejected on the same files."""

from __future__ import annotations

import re

import pytest

from tests import DATA, ROOT

CI = ROOT / "examples" / "model-cases" / "ci"
TARGETS = [["--xtc-target=host"], ["--xtc-target=host-c"],
           ["--xtc-target=nvgpu", "--xtc-nvgpu-arch=sm_90"]]


def _outcomes(result: pytest.RunResult) -> dict[str, int]:
    return {k: v for k, v in result.parseoutcomes().items() if v}


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t[0].split("=")[1])
def test_model_cases_have_right_verdicts(run, target) -> None:
    result = run(*target, f"--xtc-cases={CI}", "--xtc-only-cases", "--xtc-repeat=0",
                 "-rsx", "-q")
    out = result.stdout.str()
    outcomes = _outcomes(result)
    if "nvgpu" in target[0] and "compile-only" not in out and outcomes.get("skipped") and \
            not outcomes.get("compiled"):
        pytest.skip("no CUDA toolkit here: the nvgpu compile tier cannot run")
    assert not outcomes.get("failed") and not outcomes.get("error"), out[-3000:]
    # nvgpu without a GPU compiles and inspects, runs nothing: compiled, never passed
    worked, other = ("compiled", "passed") if "compile-only" in out else ("passed", "compiled")
    assert outcomes.get(worked) and not outcomes.get(other), out[-3000:]
    for line in out.splitlines():
        if line.startswith("XFAIL"):
            assert ("expected" in line or "waived by the suite" in line) and \
                "xtc-tools/xtc/issues" in line, line
        elif line.startswith("SKIPPED"):
            assert re.search(r"not supported", line), line


def test_faulty_host_variant_is_rejected_on_model_cases(vendor, run) -> None:
    vendor("faulty_xtc", {"f16": "faulty:F16"},
           {"faulty": "from pytest_xtc.selftest import faults\n"
                      "class F16(faults.Float16Arithmetic):\n    pass\n"})
    result = run("--xtc-target=f16", f"--xtc-cases={CI}", "--xtc-only-cases",
                 "--xtc-repeat=0", "-q", "-k", "gpt2 or odd_prime or mobilenet")
    outcomes = _outcomes(result)
    assert outcomes.get("failed"), result.stdout.str()[-3000:]
    assert "wrong results" in result.stdout.str()


def test_a_correct_kernel_whose_intermediate_outgrows_an_8mb_stack_passes(run) -> None:
    """XTC's host code keeps a graph's intermediate (here pad2d's 1x402x402x16 result,
    10 MB) on the stack: with the usual 8 MB limit the correct kernel died of SIGSEGV and
    was reported as the target's crash (a VGG-16 224x224x64 layer did so). The worker
    lets the stack grow (hygiene.roomy_stack)."""
    data = DATA / "pad_relu_stack_10mb.yaml"
    result = run("--xtc-target=host", f"--xtc-cases={data}", "--xtc-only-cases",
                 "--xtc-repeat=0", "-q")
    outcomes = _outcomes(result)
    assert outcomes.get("passed") and set(outcomes) == {"passed"}, result.stdout.str()[-3000:]
