"""``--xtc-fuzz=N`` in a pytest session: N random cases collected beside the catalog's,
judged like them, a failure shrunk to a case file with its rerun line (and again from the
run's bundle, the case drawn from its id alone); the selftest's fault (outputs left to
XTC) rejected by the first fuzz case of seed 0 and the real host passing it; bad values
refused in one line."""

from __future__ import annotations

from pathlib import Path

import yaml


def test_a_fuzz_failure_is_found_and_shrunk_and_the_host_passes(vendor, run, pytester,
                                                                 monkeypatch) -> None:
    root = vendor("fuzzfault_xtc",
                  {"bad": "pytest_xtc.selftest.fuzzing:OutputsInProductionOrder"})
    result = run("--xtc-target=host,bad", "--xtc-fuzz=1", "-k", "fuzz", "-rA",
                 "--xtc-report=rep")
    text = result.stdout.str()
    result.assert_outcomes(passed=1, failed=1)
    assert "PASSED" in text and "host-fuzz-0-0-feeds-float32" in text
    assert "FAILED" in text and "bad-fuzz-0-0-feeds-float32" in text
    assert "--xtc-fuzz=1" in text  # the rerun line draws the case again
    assert "XTC shrunk failures" in text
    bundle = Path(pytester.path) / "rep"
    (shrunk,) = (bundle / "shrunk").glob("bad-fuzz-0-0-*.yaml")
    data = yaml.safe_load(shrunk.read_text())
    assert len(data["outputs"]) == 2 and len(data["nodes"]) == 2  # the fault needs both
    # from the bundle: the failure drawn again from its id alone, and shrunk the same way
    monkeypatch.syspath_prepend(str(root))
    from pytest_xtc.core.adapters import adapter_declarations
    from pytest_xtc.exploration.shrink import Budget, shrink_bundle

    adapter_declarations.registered.cache_clear()  # this process may have read them before
    try:
        (again,) = shrink_bundle(bundle, Path(pytester.path) / "again",
                                 budget=Budget(attempts=3))
    finally:
        adapter_declarations.registered.cache_clear()  # "bad" leaves with its folder
    assert again.reproduced, again.notes


def test_the_fuzz_options_refuse_bad_values_in_one_line(run) -> None:
    for args in (["--xtc-fuzz=0"], ["--xtc-fuzz=2", "--xtc-fuzz-seed=-1"]):
        result = run("--xtc-target=host", *args)
        assert result.ret != 0
        errors = [line for line in result.stderr.lines if "error" in line.lower()]
        assert errors and ("--xtc-fuzz" in errors[-1]), result.stderr.str()
