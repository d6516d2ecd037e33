"""Split runs on the host (docs/split-run.md): compile and pack here, run the pack with the
device runner in a process whose import path holds numpy only, judge here. The same cases
must get the same status as a local run; results that do not belong to the pack must be
refused, and wrong ones failed, never passed. Real XTC, real kernels, no fakes."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pytest_xtc.core.pack import device_runner, runs
from tests import ROOT

SELECTION = ("relu-float32-9x16 or matmul+relu-float32-13x11x7-tile or relu-float32-7x1"
             " or matmul-float32-12x10x7-tile-special")  # special: inputs as files
STATUS = re.compile(r"::test_conformance\[(host-[^\]]+)\] (PASSED|FAILED|XFAIL|XPASS|SKIPPED|"
                    r"ERROR)")


def pytest_run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A pytest session of the suite on the host, in ``cwd``."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "--xtc-target=host",
         "-k", SELECTION, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def statuses(output: str) -> dict[str, str]:
    return dict(STATUS.findall(output))


def numpy_only_path(root: Path) -> Path:
    """A folder holding numpy alone (a link to the installed one): the runner's import
    path when run with ``-S -s`` (no site-packages: no XTC, MLIR, pytest, pytest_xtc)."""
    folder = root / "numpy-only"
    folder.mkdir(exist_ok=True)
    site = Path(np.__file__).resolve().parent.parent
    for name in ("numpy", "numpy.libs"):
        if (site / name).exists() and not (folder / name).exists():
            (folder / name).symlink_to(site / name)
    return folder


def run_runner(pack: Path, root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(numpy_only_path(root))
    runner = pack / "runner" / "device_runner.py"
    return subprocess.run([sys.executable, "-S", "-s", str(runner), str(pack), *args],
                          env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def split(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A local run, a pack of the same cases, the pack run by the numpy-only runner."""
    root = tmp_path_factory.mktemp("split")
    (root / "session").mkdir()
    local = pytest_run(root / "session")
    pack = root / "pack"
    packing = pytest_run(root / "session", f"--xtc-pack={pack}")
    ran = run_runner(pack, root)
    return {"root": root, "pack": pack, "local": local, "packing": packing, "ran": ran}


def judge(split: dict[str, object], pack: Path) -> subprocess.CompletedProcess[str]:
    return pytest_run(split["root"] / "session",  # type: ignore[operator]
                      f"--xtc-from-pack={pack}")


def test_runner_import_path_holds_numpy_only(tmp_path: Path) -> None:
    """The interpreter set-up the runner runs under cannot import XTC, MLIR, pytest or
    pytest_xtc, and can import numpy (the check fails if any of them is importable)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(numpy_only_path(tmp_path))
    probe = ("import importlib.util as u, sys; "
             "print([m for m in ('numpy','xtc','mlir','pytest','pytest_xtc','execnet') "
             "if u.find_spec(m)])")
    found = subprocess.run([sys.executable, "-S", "-s", "-c", probe], env=env,
                           capture_output=True, text=True, cwd=tmp_path, check=True)
    assert found.stdout.strip() == "['numpy']"


def test_host_cases_judged_from_the_pack_get_the_local_status(split) -> None:
    local, packing, ran = split["local"], split["packing"], split["ran"]
    assert ran.returncode == 0, ran.stderr
    local_status = statuses(local.stdout)
    assert len(local_status) >= 5 and "PASSED" in local_status.values(), local.stdout[-2000:]
    packed = statuses(packing.stdout)
    assert set(packed) == set(local_status)
    assert "PASSED" not in packed.values()  # packed cases did not run here: not passed
    judged = judge(split, split["pack"])
    assert statuses(judged.stdout) == local_status, judged.stdout[-3000:]
    for line in ran.stdout.splitlines():
        assert line.startswith("ok "), ran.stdout


def test_runner_refuses_a_tampered_pack_and_a_used_results_folder(split, tmp_path) -> None:
    pack = tmp_path / "pack"
    shutil.copytree(split["pack"], pack, ignore=shutil.ignore_patterns("results"))
    (pack / "results").mkdir()
    (pack / "results" / "x").write_text("")
    used = run_runner(pack, split["root"])
    assert used.returncode == 2 and "not empty" in used.stderr
    shutil.rmtree(pack / "results")
    kernel = next((pack / "cases").glob("*/*.so"))
    kernel.write_bytes(kernel.read_bytes()[:-1])
    tampered = run_runner(pack, split["root"])
    assert tampered.returncode == 2 and "not the file the manifest names" in tampered.stderr


# -- faulty runners: their results refused (an error) or failed, never passed ---------------


def copy_pack(split: dict[str, object], where: Path) -> Path:
    pack = where / "pack"
    shutil.copytree(split["pack"], pack)  # type: ignore[arg-type]
    return pack


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rehash(pack: Path, key: str) -> None:
    """What a faulty runner that keeps its books in order writes: the digests of what it
    changed, in the case's result and in run.json."""
    folder = pack / "results" / key
    result = json.loads((folder / "result.json").read_text())
    result["files"] = {p.name: sha(p) for p in sorted(folder.glob("*.npy"))}
    (folder / "result.json").write_text(json.dumps(result))
    run = json.loads((pack / "results" / "run.json").read_text())
    run["cases"][key] = sha(folder / "result.json")
    (pack / "results" / "run.json").write_text(json.dumps(run))


def passed_case(pack: Path) -> tuple[str, str]:
    """A case that passed locally: (its key, its id)."""
    for key in sorted(os.listdir(pack / "results")):
        result = pack / "results" / key / "result.json"
        if result.is_file() and "matmul" in key:
            return key, json.loads(result.read_text())["case"]
    raise AssertionError("no matmul case in the pack")


def refused(output: str, case: str) -> bool:
    """Whether ``case`` was refused: an infrastructure error (failed in pytest's terms, not
    a verdict on its results), its results not judged."""
    return (statuses(output)[f"host-{case}"] == "FAILED"
            and "[infrastructure error, run] refused: " in output
            and "wrong results" not in output)


def test_wrong_outputs_fail_the_case(split, tmp_path) -> None:
    pack = copy_pack(split, tmp_path)
    key, case = passed_case(pack)
    out = pack / "results" / key / "call0-out0.npy"
    np.save(out, np.load(out) * 1.001)
    rehash(pack, key)
    done = judge(split, pack)
    assert statuses(done.stdout)[f"host-{case}"] == "FAILED"
    assert "wrong results" in done.stdout and "refused" not in done.stdout
    assert f"--xtc-from-pack={pack}" in done.stdout  # the rerun line judges it again


def test_edited_or_truncated_outputs_are_refused(split, tmp_path) -> None:
    pack = copy_pack(split, tmp_path)
    key, case = passed_case(pack)
    out = pack / "results" / key / "call1-out0.npy"
    out.write_bytes(out.read_bytes()[:-8])
    done = judge(split, pack)
    assert refused(done.stdout, case)
    assert "refused" in done.stdout and "edited" in done.stdout


def test_outputs_of_another_case_are_refused(split, tmp_path) -> None:
    pack = copy_pack(split, tmp_path)
    key, case = passed_case(pack)
    other = next(k for k in sorted(os.listdir(pack / "results"))
                 if k != key and (pack / "results" / k / "result.json").is_file())
    shutil.rmtree(pack / "results" / key)
    shutil.copytree(pack / "results" / other, pack / "results" / key)
    rehash(pack, key)
    done = judge(split, pack)
    assert refused(done.stdout, case)
    assert "the result of another case" in done.stdout


def test_a_missing_case_is_refused(split, tmp_path) -> None:
    pack = copy_pack(split, tmp_path)
    key, case = passed_case(pack)
    run = json.loads((pack / "results" / "run.json").read_text())
    del run["cases"][key]
    (pack / "results" / "run.json").write_text(json.dumps(run))
    done = judge(split, pack)
    assert refused(done.stdout, case)
    assert "the runner did not run it" in done.stdout


def test_a_result_naming_a_key_twice_is_refused(split, tmp_path) -> None:
    """A JSON reader keeps the last of two values: a result saying ``"status": "error"``
    then ``"status": "ok"`` would pass for whichever the reader picked. Refused instead."""
    pack = copy_pack(split, tmp_path)
    key, case = passed_case(pack)
    path = pack / "results" / key / "result.json"
    text = path.read_text()
    assert text.startswith("{")
    path.write_text('{"status": "error", ' + text[1:])
    run = json.loads((pack / "results" / "run.json").read_text())
    run["cases"][key] = sha(path)
    (pack / "results" / "run.json").write_text(json.dumps(run))
    done = judge(split, pack)
    assert refused(done.stdout, case)
    assert "key 'status' given twice" in done.stdout
    local = statuses(split["local"].stdout)  # type: ignore[attr-defined]
    judged = statuses(done.stdout)
    del local[f"host-{case}"], judged[f"host-{case}"]
    assert judged == local  # the other cases judged as usual


def test_a_manifest_naming_a_key_twice_is_refused_by_the_runner(split, tmp_path) -> None:
    pack = copy_pack(split, tmp_path)
    shutil.rmtree(pack / "results")
    manifest = pack / device_runner.MANIFEST
    manifest.write_text('{"format": "another", ' + manifest.read_text()[1:])
    ran = run_runner(pack, split["root"])  # type: ignore[arg-type]
    assert ran.returncode == 2, ran.stderr
    assert "key 'format' given twice" in ran.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("fault", ["nothing run", "no run.json", "another runner version",
                                   "another pack", "truncated run.json"])
def test_results_not_of_this_pack_stop_the_session(split, tmp_path, fault) -> None:
    pack = copy_pack(split, tmp_path)
    record = pack / "results" / "run.json"
    run = json.loads(record.read_text())
    if fault == "nothing run":  # a runner that exits 0 having run nothing
        run["cases"] = {}
    elif fault == "another runner version":
        run["runner_version"] = "0"
    elif fault == "another pack":
        manifest = json.loads((pack / device_runner.MANIFEST).read_text())
        manifest["settings"]["note"] = "another pack"
        (pack / device_runner.MANIFEST).write_text(json.dumps(manifest))
    record.write_text(json.dumps(run))
    if fault == "no run.json":
        record.unlink()
    if fault == "truncated run.json":
        record.write_text(record.read_text()[:40])
    done = judge(split, pack)
    assert done.returncode == 4, done.stdout[-1500:] + done.stderr  # a usage error
    assert not statuses(done.stdout)
    said = done.stderr.strip().splitlines()[-1]
    expected = {"nothing run": "ran none of the pack's", "no run.json": "run the pack first",
                "another runner version": "written by another runner",
                "another pack": "results of another pack",
                "truncated run.json": "unreadable"}[fault]
    assert expected in said, said


# -- FAKE CUDA: the runner's cuda-bare path against a stand-in CUDA runtime -----------------
# Host kernels, packed as if XTC's nvgpu target had compiled them, run through
# devicecheck/fake/mock_mgpu.c (the entry points XTC's CUDA runtime library gives, on host
# memory; "device" memory starts as NaN bytes). They show the runner's allocations, copies
# and registrations; they say nothing about a GPU, and nothing here runs on one.

MOCK = ROOT / "devicecheck" / "fake" / "mock_mgpu.c"


def as_cuda_pack(split: dict[str, object], where: Path, copies: bool = True) -> Path:
    """The split's pack, its results dropped, each case's protocol made ``cuda-bare``
    through the mock runtime (every other operand on the "device"); the manifest rewritten
    (writer.finish). ``copies=False``: a runtime whose copies do nothing."""
    from pytest_xtc.core.pack import writer

    pack = where / "pack"
    shutil.copytree(split["pack"], pack, ignore=shutil.ignore_patterns("results"))  # type: ignore[arg-type]
    source = MOCK.read_text()
    if not copies:
        source = source.replace("memmove(dst, src, nbytes);", "")
    (where / "mock.c").write_text(source)
    library = pack / "libs" / "0000-libmlir_cuda_runtime.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(library), str(where / "mock.c")],
                   check=True)
    for line_file in (pack / "cases").glob("*/case.json"):
        line = json.loads(line_file.read_text())
        if not line.get("packed"):
            continue
        call_file = line_file.with_name("call.json")
        call = json.loads(call_file.read_text())
        count = len(call["inputs"]) + len(call["outputs"])
        call.update(kind="cuda-bare", runtime=[*call["runtime"], "libs/" + library.name],
                    placements=["device" if i % 2 == 0 else "host" for i in range(count)])
        call_file.write_text(json.dumps(call))
        line["call_sha256"] = sha(call_file)
        line_file.write_text(json.dumps(line))
    manifest = json.loads((pack / device_runner.MANIFEST).read_text())
    writer.finish(pack, manifest["settings"])
    return pack


def test_fake_cuda_runner_path_gives_the_local_statuses(split, tmp_path) -> None:
    pack = as_cuda_pack(split, tmp_path)
    ran = run_runner(pack, split["root"])
    assert ran.returncode == 0 and ran.stdout.count("ok ") == ran.stdout.count("\n"), ran.stdout
    done = judge(split, pack)
    assert statuses(done.stdout) == statuses(split["local"].stdout), done.stderr[-500:]


def test_fake_cuda_runtime_that_does_not_copy_fails_every_case(split, tmp_path) -> None:
    pack = as_cuda_pack(split, tmp_path, copies=False)
    assert run_runner(pack, split["root"]).returncode == 0
    judged = statuses(judge(split, pack).stdout)
    local = statuses(split["local"].stdout)
    assert set(judged) == set(local)
    assert all(judged[c] == "FAILED" for c, s in local.items() if s == "PASSED"), judged


def test_device_script_runs_a_carried_pack(split, tmp_path) -> None:
    """devicecheck/run_pack.sh, as a device call runs it (``python3`` with numpy alone, no
    GPU here): its results, copied back into the pack, judge to the local statuses."""
    pack = tmp_path / "pack"
    shutil.copytree(split["pack"], pack, ignore=shutil.ignore_patterns("results"))
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "python3").write_text(f'#!/bin/sh\nexec {sys.executable} -S -s "$@"\n')
    (shim / "python3").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(PATH=f"{shim}{os.pathsep}{env['PATH']}", OUT=str(tmp_path / "out"),
               PYTHONPATH=str(numpy_only_path(split["root"])), JOBS="2")
    script = ROOT / "devicecheck" / "run_pack.sh"
    carried = tmp_path / "pack.tar.xz"  # the pack as it is carried: one compressed file
    subprocess.run(["tar", "-cJf", str(carried), "-C", str(pack), "."], check=True)
    done = subprocess.run(["bash", str(script), str(carried)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "runner exit status 0" in done.stdout
    assert "numpy" in (tmp_path / "out" / "machine.txt").read_text()
    out = tmp_path / "out"
    parts = sorted(out.glob("results.tar.xz.part-*"))  # what a device call's $OUT brings
    assert parts and not (out / "results").exists()
    assert all(p.stat().st_size <= 14 << 20 for p in parts)
    archive = b"".join(p.read_bytes() for p in parts)
    subprocess.run(["tar", "-xJf", "-", "-C", str(pack)], input=archive, check=True)
    assert not (pack / "results" / ".libs").exists()
    assert statuses(judge(split, pack).stdout) == statuses(split["local"].stdout)


def test_a_runner_past_its_deadline_records_the_cases_it_did_not_start(split, tmp_path) -> None:
    """``--deadline-s``: no case starts after it; those left are named, and judged as not
    run (infrastructure errors saying so), never as verdicts."""
    pack = tmp_path / "pack"
    shutil.copytree(split["pack"], pack, ignore=shutil.ignore_patterns("results"))
    done = run_runner(pack, split["root"], "--deadline-s", "0")  # type: ignore[arg-type]
    assert done.returncode == 4, done.stderr  # no case gave a result
    run = json.loads((pack / "results" / "run.json").read_text())
    manifest = json.loads((pack / "manifest.json").read_text())
    packed = {k for k, c in manifest["cases"].items() if c.get("packed")}
    assert run["cases"] == {} and set(run["not_run"]) == packed
    partial = copy_pack(split, tmp_path / "partial")
    key, case = passed_case(partial)
    run = json.loads((partial / "results" / "run.json").read_text())
    del run["cases"][key]
    run["not_run"] = [key]
    (partial / "results" / "run.json").write_text(json.dumps(run))
    judged = judge(split, partial)
    assert refused(judged.stdout, case)
    assert "not run: the runner's --deadline-s passed" in judged.stdout


# -- the runner's copies of the suite's rules (it cannot import them) -----------------------


def test_runner_remakes_every_kind_of_input_bit_for_bit() -> None:
    """The kinds the runner remakes from a seed (random, exact) come out bit for bit; the
    others (special: placed by the graph's structure) travel as files, digest-checked."""
    from pytest_xtc.conformance import builtin_cases
    from pytest_xtc.core.cases import graphs
    from pytest_xtc.core.pack import device_inputs, writer

    seen = set()
    for case in builtin_cases():
        if case.values not in writer.REMADE:
            continue
        if case.values in seen and len(seen) == len(writer.REMADE):
            break
        seen.add(case.values)
        operands = [{"shape": list(o.shape), "dtype": str(o.dtype)}
                    for o in graphs.inputs(case.graph)]
        for n in range(2):
            seed = case.seed(5, n)
            made = device_inputs.make_inputs(case.values, seed, operands)
            wanted = case.make_inputs(seed)
            assert device_inputs.input_digest(made) == device_inputs.input_digest(wanted)
    assert seen == set(writer.REMADE)


def test_runner_sentinel_and_guard_bands_are_the_suites() -> None:
    from pytest_xtc.core.cases import values
    from pytest_xtc.core.execution import guard

    for dtype, (uint, bits) in values._UNWRITTEN.items():
        assert device_runner.UNWRITTEN[dtype] == (uint, bits)
    for shape, dtype in (((7,), "float32"), ((3, 5000), "float64"), ((2, 600, 700), "float32")):
        array = np.zeros(shape, dtype)
        mine = device_runner.Operand("A", array, guarded=True)
        theirs = guard.place("A", array)
        assert mine.band == theirs.lead and mine.buffer.size == theirs.buffer.size
        mine.buffer[-1] = theirs.buffer[-1] = 1.0
        mine.buffer[0] = theirs.buffer[0] = 1.0
        assert mine.violations() == theirs.violations()


def test_a_case_flooding_its_output_leaves_a_bounded_log(tmp_path, monkeypatch) -> None:
    """A device kernel that writes 64 MiB to fd 1 then exits: the runner keeps the last
    64 KiB (as the suite's own workers do, core/workers/output.py) and says how much it
    dropped; before, all of it went to the case's ``stdout.txt``, which the remote side
    reads and sends back whole."""
    from pytest_xtc.core.workers import output

    assert device_runner.LOG_TAIL == output.TAIL_BYTES
    flood = ("import os\nchunk = b'x' * (1 << 20)\nfor _ in range(64): os.write(1, chunk)\n"
             "os.write(1, b'the end')")
    monkeypatch.setattr(device_runner, "_child_command",
                        lambda pack, key, out: [sys.executable, "-c", flood])
    case = {"id": "flood", "call_sha256": "", "limits_s": [60]}
    result = device_runner.supervise(tmp_path, "flood", case, tmp_path / "out")
    assert result["status"] == "exit" and result["code"] == 0
    log = (tmp_path / "out" / "stdout.txt").read_bytes()
    assert log.endswith(b"the end") and len(log) < device_runner.LOG_TAIL + 100
    kept = device_runner.LOG_TAIL
    assert log.startswith(f"[{64 * (1 << 20) + 7 - kept} bytes before these dropped]".encode())


def test_a_pack_of_another_target_is_refused(split) -> None:
    """A host pack judged as host-c: every case refused (the same case ids, another
    target's kernels), none judged."""
    done = pytest_run(split["root"] / "session", f"--xtc-from-pack={split['pack']}",
                      "--xtc-target=host-c")
    found = dict(re.findall(r"::test_conformance\[host-c-([^\]]+)\] (\w+)", done.stdout))
    # refused is an infrastructure error: FAILED, or XFAIL where host-c lists the case
    # (SKIPPED: a case host-c does not support is not judged at all)
    assert found and set(found.values()) <= {"FAILED", "XFAIL", "SKIPPED"}, done.stdout[-2000:]
    assert "FAILED" in found.values(), done.stdout[-2000:]
    assert "refused: the pack holds no such case for host-c" in done.stdout


def test_a_runner_ended_by_sigterm_still_writes_what_it_ran(split, tmp_path) -> None:
    """An outer time limit's SIGTERM: the case running is stopped (an infrastructure error,
    never a verdict), none is started, and run.json names what ran and what did not."""
    pack = tmp_path / "pack"
    shutil.copytree(split["pack"], pack, ignore=shutil.ignore_patterns("results"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(numpy_only_path(split["root"]))  # type: ignore[arg-type]
    runner = subprocess.Popen(
        [sys.executable, "-S", "-s", str(pack / "runner" / "device_runner.py"), str(pack),
         "--jobs", "1"], env=env, stdout=subprocess.PIPE, text=True)
    assert runner.stdout is not None
    runner.stdout.readline()  # one case done: the runner is in the middle of the pack
    runner.send_signal(signal.SIGTERM)
    assert runner.wait(timeout=60) == 0
    run = json.loads((pack / "results" / "run.json").read_text())
    manifest = json.loads((pack / "manifest.json").read_text())
    packed = {k for k, c in manifest["cases"].items() if c.get("packed")}
    assert run["cases"] and run["not_run"]
    assert set(run["cases"]) | set(run["not_run"]) == packed
    for key in run["cases"]:
        result = json.loads((pack / "results" / key / "result.json").read_text())
        assert result["status"] == "ok" or (result["infrastructure"]
                                            and result["error"].startswith("stopped: "))


def test_a_call_that_repeats_an_earlier_calls_outputs_names_its_file(split) -> None:
    """The timed call runs on the first call's inputs: where its outputs are bit for bit
    the first call's, the result names that file instead of a copy (what a device call
    brings back is bounded), and the judge still reads every call's outputs."""
    key, _ = passed_case(split["pack"])  # type: ignore[arg-type]
    folder = split["pack"] / "results" / key  # type: ignore[operator]
    result = json.loads((folder / "result.json").read_text())
    first, _, timed = result["calls"]
    assert timed["outputs"] == first["outputs"]
    assert sorted(p.name for p in folder.glob("*.npy")) == sorted(result["files"])
    assert not any(name.startswith("call2-") for name in result["files"])


def test_a_pack_run_in_several_calls_merges_into_one_results_folder(split, tmp_path,
                                                                     monkeypatch) -> None:
    """``xtc-conformance merge-runs``: runs of disjoint cases (``--only``) become one
    results folder that judges to the local statuses; overlapping runs are refused."""
    pack = tmp_path / "pack"
    shutil.copytree(split["pack"], pack, ignore=shutil.ignore_patterns("results"))
    manifest = json.loads((pack / "manifest.json").read_text())
    packed = sorted(k for k, c in manifest["cases"].items() if c.get("packed"))
    half = len(packed) // 2
    for name, keys in (("first", packed[:half]), ("rest", packed[half:])):
        only = [a for k in keys for a in ("--only", k)]
        assert run_runner(pack, split["root"], "--results", str(tmp_path / name),
                          *only).returncode == 0
    cli = [sys.executable, "-m", "pytest_xtc.cli", "merge-runs", str(pack)]
    overlap = subprocess.run([*cli, str(tmp_path / "first"), str(tmp_path / "first"),
                              "--into", str(tmp_path / "twice")], capture_output=True, text=True)
    assert overlap.returncode == 3 and "run by both" in overlap.stderr
    assert not (tmp_path / "twice").exists() or not any((tmp_path / "twice").iterdir())
    # a copy failing midway (a full disk) leaves no half-filled folder, nor its draft
    copies = iter(range(1000))
    real_copy = shutil.copytree

    def full_disk(source, target, *args, **kwargs):  # the second case's copy fails
        if next(copies) == 1:
            raise OSError(28, "No space left on device")
        return real_copy(source, target, *args, **kwargs)

    monkeypatch.setattr(runs.shutil, "copytree", full_disk)
    with pytest.raises(OSError, match="No space left"):
        runs.merge_runs(pack, [tmp_path / "first", tmp_path / "rest"], tmp_path / "halted")
    monkeypatch.undo()
    assert not (tmp_path / "halted").exists()
    assert not list(tmp_path.glob(".halted.partial-*"))  # before: 1 of the cases in it
    merged = subprocess.run([*cli, str(tmp_path / "first"), str(tmp_path / "rest"),
                             "--into", str(pack / "results")], capture_output=True, text=True)
    assert merged.returncode == 0, merged.stderr
    assert f"{len(packed)} case results from 2 runs, 0 of the pack's cases not run" in merged.stdout
    assert statuses(judge(split, pack).stdout) == statuses(split["local"].stdout)


def test_the_runner_takes_the_op_families_in_turn() -> None:
    """A deadline leaves a few cases of every family not run, never a whole family: the
    runner starts them in turn (the manifest's order groups them)."""
    ids = ["conv2d-a", "conv2d-b", "conv2d-c", "matmul-a", "relu-a", "relu-b"]
    cases = {f"k{n}": {"id": i} for n, i in enumerate(ids)}
    order = device_runner.interleaved(list(cases), cases)
    assert [cases[k]["id"] for k in order] == [
        "conv2d-a", "matmul-a", "relu-a", "conv2d-b", "relu-b", "conv2d-c"]
    assert device_runner.interleaved([], {}) == []
