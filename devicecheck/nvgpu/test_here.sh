#!/usr/bin/env bash
# What can be checked WITHOUT a GPU, after a full build.py (libraries included); run from
# the repository root:   bash devicecheck/nvgpu/test_here.sh
#  1. device.sh end to end: unpack + sha256, ldd (all resolved but libcuda.so.1), the host
#     self-test (all correct, both faulty cases rejected), then the GPU preflight stops
#     with a clear "no libcuda.so.1" message and exit status 3.
#  2. a GPU worker run directly: it fails loading libcuda.so.1 with a clear message.
#  3. the self-test catches a broken driver (swapped arguments, missing copies).
#  4. GPU mode against a fake libcuda.so.1: clean failures, exit status 4, no hang.
#  5. the size of what travels.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD="$HERE/build"
PY="${PYTHON:-python3}"
T="$(mktemp -d "${TMPDIR:-/tmp}/devicecheck-test.XXXXXX")"
trap 'rm -rf "$T"' EXIT
fail=0

echo "### 1. device.sh without a GPU"
OUT="$T/out" bash "$HERE/device.sh" > "$T/device.log" 2>&1
rc=$?
cat "$T/device.log"
[ $rc -eq 3 ] || { echo "FAIL: device.sh exit $rc, expected 3 (no GPU)"; fail=1; }
grep -q "devicecheck \[host\]: ALL GOOD" "$T/device.log" || { echo "FAIL: self-test not ALL GOOD"; fail=1; }
nf=$(grep -c "not found" "$T/out/ldd.txt"); nc=$(grep -c "libcuda.so.1 => not found" "$T/out/ldd.txt")
[ "$nf" = "$nc" ] || { echo "FAIL: ldd: unresolved libraries other than libcuda.so.1"; fail=1; }
echo "ldd: $nf unresolved, all libcuda.so.1"

echo "### 2. a GPU worker run directly (libraries unpacked by hand)"
mkdir -p "$T/lib"; cp "$BUILD/lib/libmlir_cuda_runtime.so" "$T/lib/"
for f in "$BUILD"/lib/*.xz; do xz -dc "$f" > "$T/lib/$(basename "$f" .xz)"; done
"$PY" "$HERE/run_kernels.py" --worker mm_64x48x32_tile_i4 --mode gpu --bundle "$BUILD" \
  --libdir "$T/lib" --result "$T/w.json"
"$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); print("worker result:", r); sys.exit(0 if "libcuda.so.1" in r.get("error","") else 1)' "$T/w.json" \
  || { echo "FAIL: the worker did not stop at libcuda.so.1"; fail=1; }

echo "### 3. the self-test catches a sabotaged driver"
for sab in swap_inputs no_copy_in no_copy_out; do
  "$PY" "$HERE/run_kernels.py" --mode host --bundle "$BUILD" --libdir "$T/lib" --sabotage $sab \
    --out "$T/sab.json" --min-time 0.01 > "$T/sab.log" 2>&1
  v=$(grep "devicecheck \[host\]: " "$T/sab.log" | head -1)
  echo "$sab: $v" | cut -c1-150
  echo "$v" | grep -q PROBLEMS || { echo "FAIL: sabotage $sab not caught"; fail=1; }
done

echo "### 4. GPU mode against a FAKE libcuda.so.1 (all but device queries and cuStreamCreate fail):"
echo "###    the real runtime + XTC kernels must give clean FAIL/ERROR/CRASH lines, no hang"
mkdir -p "$T/fake"
{ echo '#include <string.h>'
  echo 'int cuInit(unsigned f){return 0;} int cuDriverGetVersion(int*v){*v=13000;return 0;}'
  echo 'int cuDeviceGetCount(int*n){*n=1;return 0;} int cuDeviceGet(int*d,int o){*d=0;return 0;}'
  echo 'int cuDeviceGetName(char*s,int n,int d){strncpy(s,"FAKE GPU",n);return 0;}'
  echo 'int cuDeviceGetAttribute(int*v,int a,int d){*v=a==75?9:0;return 0;}'
  echo 'int cuGetErrorName(int e,const char**s){*s="CUDA_ERROR_FAKE";return 0;}'
  echo 'int cuStreamCreate(void**s,unsigned f){*s=(void*)0x1;return 0;}'
  nm -D --undefined-only "$BUILD/lib/libmlir_cuda_runtime.so" | awk '$2 ~ /^cu/ {print $2}' \
    | grep -vE '^(cuInit|cuDeviceGet|cuDeviceGetAttribute|cuGetErrorName|cuStreamCreate)$' \
    | sed 's/.*/int &(){return 801;}/'
} > "$T/fake/fake.c"
cc -shared -fPIC -o "$T/fake/libcuda.so.1" "$T/fake/fake.c"
LD_LIBRARY_PATH="$T/fake" "$PY" "$HERE/run_kernels.py" --mode gpu --bundle "$BUILD" --libdir "$T/lib" \
  --out "$T/fake.json" --case-timeout 20 --deadline 100 --min-time 0.01 > "$T/fake.log" 2>&1
frc=$?
cut -c1-200 "$T/fake.log"
[ $frc -eq 4 ] || { echo "FAIL: fake-GPU run exit $frc, expected 4 (control kernel fails)"; fail=1; }
grep -q "ALL GOOD" "$T/fake.log" && { echo "FAIL: a fake GPU must not pass"; fail=1; }

echo "### 5. size of what travels"
(cd "$HERE/../.." && git ls-files -z | du -cb --files0-from=- 2>/dev/null | tail -1) \
  | sed 's/total/tracked files (bytes)/'
du -sb "$BUILD" | sed 's|\t.*| devicecheck/nvgpu/build/ (bytes)|'
echo "### test_here: $([ $fail -eq 0 ] && echo ALL CHECKS PASSED || echo SOME CHECKS FAILED)"
exit $fail
