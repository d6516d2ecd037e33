#!/usr/bin/env bash
# The command of a lent GPU machine's device call (docs/nvgpu-device-check.md): unpack the
# carried pack, run 16 of its cases first as a smoke test (stopping there, with their
# errors, when none of them runs), then the whole pack through run_pack.sh.
#
#   OUT=$OUT bash devicecheck/lent_call.sh [devicecheck/build/pack.tar.xz]
#   OUT=$OUT bash devicecheck/lent_call.sh --more     # a next call, on the same machine
#
# A device call brings back at most 8 files of 16 MiB, 64 MiB in all: the first four
# parts of the results come back with the first call, the others wait in $KEPT on the
# machine for the calls with --more (made at once, while the machine is still held), four
# at a time. Carry the pack (and .whl, numpy wheels for run_pack.sh's $WHEELS, if any).
# DEADLINE_S and LIMIT_S pass on to run_pack.sh.
set -u -o pipefail
OUT=${OUT:-devicecheck/build/out}
KEPT=${KEPT:-/tmp/xtc-results-kept}
PER_CALL=4
mkdir -p "$OUT"
bring() {  # the next parts kept here into $OUT; how many are left
    local moved=0
    for part in $(ls "$KEPT" 2>/dev/null | sort); do
        [ "$moved" -lt "$PER_CALL" ] || break
        mv "$KEPT/$part" "$OUT/" && moved=$((moved + 1))
    done
    echo "results parts: $moved brought back, $(ls "$KEPT" 2>/dev/null | wc -l) left on the machine"
}
if [ "${1:-}" = "--more" ]; then
    bring
    exit 0
fi
CARRIED=${1:-devicecheck/build/pack.tar.xz}
PACK=$(mktemp -d)
export PYTHONUNBUFFERED=1 XZ_OPT=-T0
tar -xJf "$CARRIED" -C "$PACK" || { echo "lent_call.sh: $CARRIED: cannot unpack" >&2; exit 2; }
echo "pack: $(ls "$PACK/cases" | wc -l) cases"
smoke=$(mktemp -d)/results
only=()
count=$(ls "$PACK/cases" | wc -l)  # 16 cases spread over the pack, whatever its size
for key in $(ls "$PACK/cases" | awk -v step=$(( (count + 15) / 16 )) '(NR - 1) % step == 0'); do
    only+=(--only "$key")
done
timeout 120 python3 "$PACK/runner/device_runner.py" "$PACK" --results "$smoke" --jobs 16 \
    "${only[@]}" | tee "$OUT/smoke.log"
if ! grep -q '^ok ' "$OUT/smoke.log"; then
    echo "lent_call.sh: no smoke case ran; their errors:"
    grep -h '"error"' "$smoke"/*/result.json | head -n 5
    tail -n 20 "$smoke"/*/stdout.txt | head -n 40
    exit 3
fi
WHEELS=${WHEELS:-$PWD/.whl} bash devicecheck/run_pack.sh "$PACK"
status=$?
mkdir -p "$KEPT"
mv "$OUT"/results.tar.xz.part-* "$KEPT/" 2>/dev/null
bring
exit $status
