#!/usr/bin/env bash
# gpu_run.sh — run ON THE DEVICE MACHINE (GPU), from the repository root, after
# scripts/gpu_prepare.sh filled .devcarry/ here and the device tool carried it.
# Builds nothing. Steps, each logged to $OUT:
#   1. nvidia-smi, then the CUDA unit tests (gtest XML + log)
#   2. compute-sanitizer memcheck on the CUDA tests (a filtered, smaller set: the
#      sanitizer slows kernels down 10-100x), then racecheck on the tiled transposes and
#      the block reductions (the kernels that use shared memory)
#   3. the GPU benchmark binaries, JSON into $OUT/bench_*.json
# Set SB_GPU_STEPS="tests sanitize bench" (default: all three) to run fewer.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)     # .devcarry
OUT=${OUT:-$here/out}
mkdir -p "$OUT"
bin=$here/bin
cuda_lib=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda-13.0/lib64; do
  [[ -d $d ]] && cuda_lib="$cuda_lib:$d"
done
# Fallback: PyTorch's pip CUDA wheels (nvidia-cublas, nvidia-cuda-runtime) on the image.
for d in $(python3 -c 'import nvidia, os; p=os.path.dirname(nvidia.__path__[0]); print(" ".join(os.path.join(p,"nvidia",x,"lib") for x in ("cublas","cuda_runtime")))' 2>/dev/null); do
  [[ -d $d ]] && cuda_lib="$cuda_lib:$d"
done
export LD_LIBRARY_PATH="$here/lib$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
steps=${SB_GPU_STEPS:-tests sanitize bench}
status=0

nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || echo "gpu_run: nvidia-smi failed" | tee -a "$OUT/summary.txt"
for b in "$bin"/*; do
  if ldd "$b" | grep -q "not found"; then
    echo "gpu_run: missing libraries for $(basename "$b"):" | tee -a "$OUT/summary.txt"
    ldd "$b" | grep "not found" | tee -a "$OUT/summary.txt"
    status=1
  fi
done

if [[ " $steps " == *" tests "* ]]; then
  for t in cuda_allocator_test cuda_test; do
    "$bin/$t" --gtest_output="xml:$OUT/$t.xml" > "$OUT/$t.log" 2>&1
    rc=$?
    echo "test $t: rc=$rc ($(grep -E '^\[  (PASSED|FAILED|SKIPPED) *\] [0-9]+ tests?[,.]' "$OUT/$t.log" | tr '\n' ' '))" | tee -a "$OUT/summary.txt"
    [[ $rc -eq 0 ]] || status=1
  done
fi

if [[ " $steps " == *" sanitize "* ]]; then
  if command -v compute-sanitizer > /dev/null; then
    san="compute-sanitizer --error-exitcode=86 --print-limit=20"
    # memcheck over every test but the two largest sweeps (run whole, they would take
    # tens of minutes under the sanitizer); racecheck where shared memory is used.
    filter='-CudaElementwise.BinaryEveryOpDtypeLayout:CudaReduce.EveryOpDtypeDimsLayout'
    $san --tool memcheck --leak-check full "$bin/cuda_test" --gtest_filter="$filter" > "$OUT/memcheck.log" 2>&1
    rc=$?
    echo "memcheck: rc=$rc (86 = sanitizer errors) $(grep -m1 'ERROR SUMMARY' "$OUT/memcheck.log")" | tee -a "$OUT/summary.txt"
    [[ $rc -eq 0 ]] || status=1
    $san --tool racecheck "$bin/cuda_test" --gtest_filter='CudaCopy.TransposesTakeTheTiledKernel:CudaReduce.LargeInnerOuterAndErrors:CudaElementwise.NormalizeEveryDimDtypeLayout' > "$OUT/racecheck.log" 2>&1
    rc=$?
    echo "racecheck: rc=$rc $(grep -m1 'RACECHECK SUMMARY\|ERROR SUMMARY' "$OUT/racecheck.log")" | tee -a "$OUT/summary.txt"
    [[ $rc -eq 0 ]] || status=1
  else
    echo "gpu_run: compute-sanitizer not on PATH (try /usr/local/cuda/bin)" | tee -a "$OUT/summary.txt"
    status=1
  fi
fi

if [[ " $steps " == *" bench "* ]]; then
  for b in bench_baseline_cuda bench_transfer bench_alloc_cuda; do
    "$bin/$b" --benchmark_out="$OUT/$b.json" --benchmark_out_format=json > "$OUT/$b.log" 2>&1
    rc=$?
    echo "bench $b: rc=$rc" | tee -a "$OUT/summary.txt"
    [[ $rc -eq 0 ]] || status=1
  done
fi
exit $status
