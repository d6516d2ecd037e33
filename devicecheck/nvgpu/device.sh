#!/usr/bin/env bash
# Run ON the GPU machine, from the repository root:   bash devicecheck/nvgpu/device.sh
# Needs python3 with numpy, the NVIDIA driver (libcuda.so.1) and the build folder that
# build.py wrote (devicecheck/nvgpu/build/, carried along); no XTC, no MLIR, no network.
# Unpacks the bundled runtime libraries, checks they resolve, runs the driver's host
# self-test (no GPU), then every nvgpu case on the GPU (one process per case, each under
# `timeout`). One line per case; JSON in $OUT/nvgpu-check.json and $OUT/nvgpu-selftest.json.
# Exit status: 0 the check ran (read the verdict line); 2 bundle problem; 3 no usable
# GPU/driver/runtime; 4 no case could run, the control kernel failed, or the run hung.
set -uo pipefail
T0=$(date +%s)
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD="$HERE/build"
OUT="${OUT:-$BUILD/out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
[ -f "$BUILD/manifest.json" ] || {
  echo "devicecheck: no $BUILD/manifest.json: run build.py first (and carry the build folder)"
  exit 2
}
WORK="$(mktemp -d "${TMPDIR:-/tmp}/devicecheck.XXXXXX")" || exit 2
trap 'rm -rf "$WORK"' EXIT
LIB="$WORK/lib"
mkdir -p "$LIB"
elapsed() { echo $(( $(date +%s) - T0 )); }

echo "== devicecheck: $("$PY" -c 'import sys, numpy; print("python", sys.version.split()[0], "numpy", numpy.__version__)' 2>&1)"
echo "== unpacking the runtime libraries into $LIB"
cp "$BUILD/lib/libmlir_cuda_runtime.so" "$LIB/" || { echo "devicecheck: bundle incomplete"; exit 2; }
for f in "$BUILD"/lib/*.xz; do
  b="$(basename "$f" .xz)"
  if command -v xz >/dev/null 2>&1; then
    xz -dc "$f" > "$LIB/$b" || { echo "devicecheck: xz -d $f failed"; exit 2; }
  else
    "$PY" -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"), 1 << 20)' \
      "$f" "$LIB/$b" || { echo "devicecheck: lzma unpack of $f failed"; exit 2; }
  fi
done
"$PY" "$HERE/run_kernels.py" --bundle "$BUILD" --verify-libs "$LIB" || exit 2
export LD_LIBRARY_PATH="$LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "== unpacked in $(elapsed)s"

echo "== ldd (every library should resolve; libcuda.so.1 comes from the driver)"
{
  echo "# libmlir_cuda_runtime.so"; ldd "$LIB/libmlir_cuda_runtime.so"
  echo "# an XTC nvgpu kernel.so"; ldd "$BUILD/cases/mm_64x48x32_tile_i4/kernel.so"
} > "$OUT/ldd.txt" 2>&1
grep -E "=>" "$OUT/ldd.txt" | grep -E "not found|libcuda|libLLVM|libmlir" | sort -u
{ timeout 20 nvidia-smi --query-gpu=index,name,compute_cap,driver_version,memory.total,persistence_mode --format=csv,noheader
  timeout 20 nvidia-smi -q -d COMPUTE 2>/dev/null | grep -i "compute mode"; } > "$OUT/nvidia-smi.txt" 2>&1
echo "== nvidia-smi: $(head -3 "$OUT/nvidia-smi.txt" | tr '\n' ' ')"

echo "== driver self-test: host builds of the same cases, same driver code, stand-in CUDA runtime"
timeout -k 5 40 "$PY" "$HERE/run_kernels.py" --mode host --bundle "$BUILD" --libdir "$LIB" \
  --out "$OUT/nvgpu-selftest.json" --case-timeout 15 --deadline 35 --min-time 0.05
st=$?
[ $st -ne 0 ] && echo "devicecheck: WARNING: host self-test exited with $st (driver problem on this machine?)"

echo "== GPU cases (sm_90 kernels compiled by XTC without a GPU) at $(elapsed)s"
timeout -k 10 130 "$PY" "$HERE/run_kernels.py" --mode gpu --bundle "$BUILD" --libdir "$LIB" \
  --out "$OUT/nvgpu-check.json" --case-timeout 30 --deadline 110
rc=$?
case $rc in
  124|137) echo "devicecheck: INFRASTRUCTURE: the GPU run hung and was killed"; rc=4 ;;
esac
echo "== devicecheck done in $(elapsed)s, exit status $rc"
exit $rc
