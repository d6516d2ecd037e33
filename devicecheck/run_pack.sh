#!/usr/bin/env bash
# Run an execution pack (docs/split-run.md) on the machine this runs on: Python 3 with
# numpy, and for nvgpu packs the NVIDIA driver. Nothing else is needed (no XTC, no pytest).
#
#   bash devicecheck/run_pack.sh [PACK]    (default devicecheck/build/pack.tar.xz)
#
# PACK is the pack's folder, or that folder as one xz-compressed tar (what fits the carry:
# tar -cJf devicecheck/build/pack.tar.xz -C devicecheck/build/pack .), unpacked here first.
#
# Writes to $OUT (default devicecheck/build/out): results.tar.xz.part-aa, -ab... (the
# runner's results/ as one xz tar cut in 14 MiB parts, what a lent machine's $OUT brings
# back: cat them | tar -xJ -C PACK, then judge with --xtc-from-pack), runner.log,
# machine.txt. The runner runs $JOBS cases at a time (default: the CPU count), starts none
# after $DEADLINE_S seconds (default 420; those left are named in results/run.json) and is
# killed after $LIMIT_S (default 540: inside one 10-minute device call). Exit status: the
# runner's (0 ran; 2 pack problem; 4 no case gave a result), 124/137 when the limit ended it.
# $WHEELS: a folder of numpy wheels to use where the machine's numpy cannot remake the
# pack's inputs bit for bit (checked first, for every case).
set -u
PACK=${1:-devicecheck/build/pack.tar.xz}
OUT=${OUT:-devicecheck/build/out}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
LIMIT_S=${LIMIT_S:-540}
DEADLINE_S=${DEADLINE_S:-420}
mkdir -p "$OUT"
if [ -f "$PACK" ] && [[ "$PACK" == *.tar.xz ]]; then
    unpacked=$(mktemp -d)
    trap 'rm -rf "$unpacked"' EXIT
    tar -xJf "$PACK" -C "$unpacked" || { echo "run_pack.sh: $PACK: cannot unpack" >&2; exit 2; }
    PACK=$unpacked
fi
if [ ! -f "$PACK/manifest.json" ]; then
    echo "run_pack.sh: $PACK/manifest.json: no pack there (carry it along)" >&2
    exit 2
fi
# The runner remakes each case's inputs with this machine's numpy and refuses any that are
# not bit for bit the pack's. Checked for every case first: where this numpy cannot remake
# them and $WHEELS names a folder of carried numpy wheels, those are installed and used.
remakes() {
    python3 - "$PACK" <<'PY'
import importlib.util, json, sys
from pathlib import Path
pack = Path(sys.argv[1])
spec = importlib.util.spec_from_file_location("inputs", pack / "runner" / "device_inputs.py")
inputs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(inputs)
calls = sorted((pack / "cases").glob("*/call.json"))
bad = 0
for call in calls:
    try:
        inputs.input_sets(json.loads(call.read_text()), call.parent)
    except RuntimeError:
        bad += 1
print(f"inputs: numpy remakes {len(calls) - bad} of {len(calls)} cases' inputs bit for bit")
sys.exit(1 if bad else 0)
PY
}
if ! remakes && [ -n "${WHEELS:-}" ]; then
    site=$(mktemp -d)
    python3 -m pip install -q --no-index --no-deps --target "$site" "$WHEELS"/*.whl &&
        export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" && remakes
fi
{
    echo "# python"; python3 -c 'import sys, numpy; print(sys.version); print("numpy", numpy.__version__)'
    echo "# nvidia-smi"
    nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv 2>&1 || true
    echo "# libcuda"; (ldconfig -p 2>/dev/null | grep -m1 libcuda.so.1) || echo "not found"
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
start=$(date +%s)
timeout --kill-after=30 "$LIMIT_S" python3 "$PACK/runner/device_runner.py" "$PACK" \
    --results "$OUT/results" --jobs "$JOBS" --deadline-s "$DEADLINE_S" > "$OUT/runner.log" 2>&1
status=$?
rm -rf "$OUT/results/.libs"  # the unpacked runtime libraries: not worth bringing back
tar -cJf - -C "$OUT" results | split -b 14M - "$OUT/results.tar.xz.part-" && rm -rf "$OUT/results"
ls -l "$OUT"
echo "runner exit status $status after $(( $(date +%s) - start )) s" | tee -a "$OUT/runner.log"
awk '{print $1}' "$OUT/runner.log" | sort | uniq -c | sort -rn | head -n 8
exit $status
