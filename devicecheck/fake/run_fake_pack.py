"""FAKE: run a real nvgpu pack here, with no GPU, through devicecheck/fake/mock_mgpu.c in
place of XTC's CUDA runtime library: the device runner's whole cuda-bare path over every
packed case (inputs remade, operands "placed", the kernel library loaded and called),
computing nothing. Judged, every executed case must fail (outputs never written).

    python devicecheck/fake/run_fake_pack.py PACK OUT [--jobs N]

OUT (new) receives a copy of PACK whose cases name the mock as their runtime (the
manifest rewritten) and the runner's results in OUT/results; judge it with
``pytest --xtc-target=nvgpu --xtc-nvgpu-arch=sm_90 --xtc-from-pack=OUT``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from pytest_xtc.core.pack import writer

MOCK = Path(__file__).with_name("mock_mgpu.c")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pack", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    if args.out.exists():
        sys.exit(f"{args.out}: exists (give a new folder)")
    shutil.copytree(args.pack, args.out, ignore=shutil.ignore_patterns("results"))
    library = args.out / "libs" / "0000-libmlir_cuda_runtime.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-Wl,-soname,libmlir_cuda_runtime.so",
                    "-o", str(library), str(MOCK)], check=True)  # the soname kernels need
    packed = 0
    for line_file in sorted((args.out / "cases").glob("*/case.json")):
        line = json.loads(line_file.read_text())
        if not line.get("packed"):
            continue
        call_file = line_file.with_name("call.json")
        call = json.loads(call_file.read_text())
        call["runtime"] = ["libs/" + library.name]  # the mock alone: no libLLVM, no driver
        call_file.write_text(json.dumps(call, indent=1))
        line["call_sha256"] = hashlib.sha256(call_file.read_bytes()).hexdigest()
        line_file.write_text(json.dumps(line))
        packed += 1
    manifest = json.loads((args.out / "manifest.json").read_text())
    writer.finish(args.out, manifest["settings"])
    start = time.perf_counter()
    ran = subprocess.run([sys.executable, str(args.out / "runner" / "device_runner.py"),
                          str(args.out), "--jobs", str(args.jobs)], capture_output=True,
                         text=True)
    took = time.perf_counter() - start
    statuses: dict[str, int] = {}
    for word in (line.split()[0] for line in ran.stdout.splitlines() if line.strip()):
        statuses[word] = statuses.get(word, 0) + 1
    print(f"{packed} packed cases run against the fake CUDA runtime in {took:.0f} s "
          f"(runner exit status {ran.returncode}): {statuses}")
    return ran.returncode


if __name__ == "__main__":
    sys.exit(main())
