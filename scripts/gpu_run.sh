#!/usr/bin/env bash
# gpu_run.sh — run ON THE DEVICE MACHINE (GPU), from the repository root, after
# scripts/gpu_prepare.sh filled .devcarry/ here and the device tool carried it. Builds
# nothing. See docs/GPU.md for the calls.
#
# Steps (SB_GPU_STEPS, default "tests sanitize bench peers"), each bounded by `timeout`
# from one budget for the whole call (SB_GPU_BUDGET seconds, default 480: the device
# tool stops a command at 600), each packed into $OUT/<step>.tar.gz as soon as it ends,
# so a call cut short still brings back every finished step; $OUT/summary.txt has one
# line per step. At most 5 files come back (the device tool takes 8).
#   (check)   always, in the first seconds: the CUDA runtime and cuBLAS libraries the
#             binaries need, found wherever the image keeps them (the toolkit, the
#             system, pip wheels such as nvidia/cu13/lib), every other library from
#             .devcarry/lib, and compute-sanitizer when the sanitize step is asked for;
#             anything missing ends the call here, named (SB_GPU_CUDA_LIBS: the CUDA
#             library names to look for, default those of CUDA 13)
#   tests     the CUDA cases of each family's test binary (SB_GPU_TESTS; the cases named
#             Cuda* and the device-parameterized ones on cuda0, Note [Device-parameterized
#             tests]; their CPU halves run in CI), gtest XML and logs
#   cputests  every other case of the test binaries (SB_GPU_CPU_TESTS), on the device
#             machine's CPU: the lent machines' Xeons take our AVX512 level (their
#             machine.json) and are of a generation with AVX512_BF16, so the AVX-512
#             kernels (bf16 GEMM, VL rows kernels, int8, direct conv) run on hardware
#             there at every SIMD level the tests take; within SB_GPU_CPU_BUDGET seconds
#             (default 90), logs, XML and lscpu (what the CPU reports) into tests.tar.gz
#   parity    tests/torch_parity.py --cuda against the image's PyTorch (Note [PyTorch
#             parity]): the table on the CPU at every SIMD level and on the GPU (Note
#             [Staged parity runs]), within SB_GPU_PARITY_BUDGET seconds (default 60),
#             its log into tests.tar.gz; skipped where python3 has no PyTorch
#   sanitize  memcheck on the same cases with the direct allocator (every block its own
#             cudaMalloc, so an overrun is seen), no leak report (the allocators and the
#             cuBLAS handle are deliberate singletons), without the deliberate
#             out-of-memory test and the three largest sweeps; racecheck on the kernels
#             that use shared memory
#   bench     bench_baseline_cuda first, always (every row's ceiling from this machine),
#             then the binaries of SB_GPU_BENCH (default: every other bench_*)
#   peers     PyTorch's CUDA rows (scripts/peers.py --libs torch, device:cuda cases;
#             SB_GPU_PEERS_FILTER, a regex on run names, narrows them)
#   recheck   the peer rows the Summary would quote, ours and PyTorch's alternating
#             (scripts/recheck over the bench and peers steps' JSON, Note [Re-check stops
#             on noise]): every row where PyTorch was ahead in the first pass and those
#             where ours was ahead by under 5%, at most SB_GPU_RECHECK_CASES (default
#             20), until SB_GPU_RECHECK_BUDGET seconds (default 60); recheck.json goes
#             beside the benchmark JSON at home (collect keeps it as raw/recheck.json).
#             The 16-bit rows behind their float32 twins (pick: precision) only with
#             SB_GPU_RECHECK_PRECISION=1, and the GEMM and conv rows against their
#             peak (pick: peak) only with SB_GPU_RECHECK_PEAK=1: a dedicated GPU does
#             not drift between a pair's rows as a shared VM's memory does, and their
#             minimum rounds would run past the step's time
#   ab        old against new: each binary of .devcarry/old/ (gpu_prepare.sh with
#             SB_GPU_OLD=<dir of an earlier build's bench_* binaries>) and its namesake
#             in bin/, alternating, SB_GPU_AB_ROUNDS rounds (default 3), the order
#             swapped every round; JSON as ab/<name>.<old|new>.<round>.json, compared at
#             home with `scripts/abtest --from-json` (the same ratios as abtest's runs);
#             SB_GPU_AB_FILTER, a --benchmark_filter regex, keeps the rows a change touched
#   variants  each variant build of .devcarry/var/<name>/ (gpu_prepare.sh with
#             SB_GPU_VARIANTS="<name>=<dir> ..."): the CUDA cases of its test binaries,
#             then each of its bench binaries alternating with the namesake in bin/ as
#             the ab step does (SB_GPU_AB_ROUNDS, SB_GPU_AB_FILTER); JSON as
#             variants/<name>/<binary>.<old|new>.<round>.json, old being this build, so
#             `scripts/abtest --from-json` gives variant ÷ build per row
#   profile   Nsight Compute's full set on a few rows (SB_GPU_PROFILE: entries
#             "binary|benchmark filter|kernel regex" separated by ';'): one launch of the
#             kernel each, after SB_GPU_PROFILE_SKIP (default 3) warm-up launches, clocks
#             left alone; the text report as profile/<binary>.<n>.txt. Firecracker
#             machines only: on gVisor ncu cannot read the counters (the device tool's
#             KINDS.md)
# SB_GPU_REHEARSAL=1 needs no GPU: the tests run (their GPU cases skip), the benchmarks
# are listed (--benchmark_list_tests), a missing compute-sanitizer is reported, not
# fatal, peers only checks that its script starts, and parity runs the check's --quick
# passes, the plumbing being what it rehearses (tests/scripts/test_gpu_scripts.py).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)  # .devcarry
root=${SB_GPU_ROOT:-$(cd "$here/.." && pwd)}  # the repository (scripts/peers.py)
OUT=${OUT:-$here/out}
mkdir -p "$OUT"
# gpu_prepare.sh packs bin/ and lib/ (docs/GPU.md); unpacking again is harmless
# tar's xz where the image has one, else Python's lzma (python3 is there for PyTorch)
if [[ -f $here/payload.tar.xz ]]; then
  tar -xJf "$here/payload.tar.xz" -C "$here" 2>/dev/null ||
    python3 -c 'import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    t.extractall(sys.argv[2], **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))' \
      "$here/payload.tar.xz" "$here" ||
    { echo "gpu_run: cannot unpack $here/payload.tar.xz" >&2; exit 2; }
fi
bin=$here/bin
steps=${SB_GPU_STEPS:-tests sanitize bench peers}
rehearsal=${SB_GPU_REHEARSAL:-0}
budget=${SB_GPU_BUDGET:-480}
start=$SECONDS
status=0

say() { echo "$*" | tee -a "$OUT/summary.txt"; }
want() { [[ " $steps " == *" $1 "* ]]; }
# seconds left for a step that would like $1: what the budget leaves after 10 s for the
# packing, at most $1; 0 when nothing is left
step_time() {
  local left=$((budget - (SECONDS - start) - 10))
  ((left < 0)) && left=0
  echo $((left < $1 ? left : $1))
}
# bounded CMD...: runs CMD under the step's time; 124 when it ran out
bounded() {
  local t=$1
  shift
  ((t > 0)) || return 124
  timeout --kill-after=5 "$t" "$@"
}
# pack STEP: every loose file in $OUT but summary.txt into $OUT/STEP.tar.gz
pack() {
  [[ ${SB_GPU_PACK:-1} != 0 ]] || return 0
  local files
  files=$(cd "$OUT" && ls | grep -v -e '^summary\.txt$' -e '\.tar\.gz$')
  [[ -n $files ]] || return 0
  (cd "$OUT" && tar -czf "$1.tar.gz" $files && rm -rf $files)
}

# ---- check: libraries and tools, in the first seconds
cuda_dirs=()
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-*/lib64 \
         /usr/local/cuda-*/lib /usr/local/cuda-*/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu /usr/lib64; do
  [[ -d $d ]] && cuda_dirs+=("$d")
done
for sp in $(python3 -c 'import site; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null); do
  for d in "$sp"/nvidia/*/lib; do [[ -d $d ]] && cuda_dirs+=("$d"); done
done
lib_path=$here/lib
missing=()
for lib in ${SB_GPU_CUDA_LIBS:-libcudart.so.13 libcublas.so.13 libcublasLt.so.13}; do
  found=""
  for d in "${cuda_dirs[@]}"; do
    if [[ -e $d/$lib ]]; then
      found=$d
      break
    fi
  done
  [[ -z $found ]] && found=$(ldconfig -p 2>/dev/null | awk -v n="$lib" '$1 == n {print $NF; exit}' | xargs -r dirname)
  if [[ -z $found ]]; then
    missing+=("$lib")
  elif [[ ":$lib_path:" != *":$found:"* ]]; then
    lib_path=$lib_path:$found
  fi
done
# cuDNN (conv2d, Note [cuDNN conv plans]), when the binaries link it: PyTorch's wheel's
# first (nvidia/cudnn/lib: the version PyTorch's peer rows run, so both sides call the
# same library), else the system's; SB_GPU_CUDNN_DIR names another. Its directory goes
# first on the path, so its engine libraries load from beside it.
cudnn_dir=""
if ldd "$here"/bin/* 2>/dev/null | grep 'libcudnn\.so' > /dev/null; then  # (not -q: under pipefail its early exit fails ldd)
  for d in ${SB_GPU_CUDNN_DIR:-} $(printf '%s\n' "${cuda_dirs[@]}" | grep '/nvidia/cudnn/lib$') "${cuda_dirs[@]}"; do
    if [[ -e $d/libcudnn.so.9 ]]; then
      cudnn_dir=$d
      break
    fi
  done
  [[ -z $cudnn_dir ]] && cudnn_dir=$(ldconfig -p 2>/dev/null | awk '$1 == "libcudnn.so.9" {print $NF; exit}' | xargs -r dirname)
  if [[ -z $cudnn_dir ]]; then
    missing+=(libcudnn.so.9)
  else
    rest=${lib_path#"$here/lib"}
    rest=${rest//":$cudnn_dir"/}
    lib_path=$here/lib:$cudnn_dir$rest
  fi
fi
export LD_LIBRARY_PATH="$lib_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do [[ -d $d ]] && PATH=$PATH:$d; done
export PATH
say "gpu_run: budget ${budget}s, steps: $steps$([[ $rehearsal == 1 ]] && echo ' (rehearsal: no GPU needed)')"
say "libraries: $LD_LIBRARY_PATH"
[[ -n $cudnn_dir ]] && say "cudnn: $cudnn_dir/$(cd "$cudnn_dir" && readlink -f libcudnn.so.9 | xargs basename)"
[[ ${#missing[@]} -eq 0 ]] || { say "gpu_run: not found on this machine: ${missing[*]} (searched ${cuda_dirs[*]} and ldconfig)"; exit 2; }
for b in "$bin"/*; do
  if ldd "$b" | grep -q "not found"; then
    say "gpu_run: $(basename "$b") lacks: $(ldd "$b" | awk '/not found/ {print $1}' | tr '\n' ' ')"
    status=2
  fi
done
[[ $status -eq 0 ]] || exit $status
if want sanitize && ! command -v compute-sanitizer >/dev/null; then
  if [[ $rehearsal == 1 ]]; then
    say "sanitize: compute-sanitizer not found (rehearsal: the step will be skipped)"
  else
    say "gpu_run: compute-sanitizer not found on PATH or under /usr/local/cuda*/bin"
    exit 2
  fi
fi
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || say "nvidia-smi: failed$([[ $rehearsal == 1 ]] && echo ' (rehearsal)')"

# ---- tests
# the PASSED / FAILED / SKIPPED counts of a gtest log, on one line
gtest_counts() { grep -E '^\[  (PASSED|FAILED|SKIPPED) *\] [0-9]+ tests?[,.]' "$1" | tr '\n' ' '; }
tests=${SB_GPU_TESTS:-cuda_allocator_test cuda_stream_test copy_test elementwise_test normalize_test reduce_test matmul_test conv_test quant_test differential_test}
gpu_cases='*Cuda*:*/cuda0'
if want tests; then
  for t in $tests; do
    # the first cuDNN plan that builds for each conv (SB_CUDNN_AUTOTUNE=0): the tests check
    # results, and each new shape would time 8 plans; CudaConv.CudnnRecords* autotunes
    SB_CUDNN_AUTOTUNE=0 bounded "$(step_time 240)" "$bin/$t" --gtest_filter="$gpu_cases" --gtest_output="xml:$OUT/$t.xml" > "$OUT/$t.log" 2>&1
    rc=$?
    say "test $t: rc=$rc$([[ $rc == 124 ]] && echo ' (timed out)') $(gtest_counts "$OUT/$t.log")"
    [[ $rc -eq 0 ]] || status=1
  done
fi
# ---- the CPU cases on the device machine's own CPU
if want cputests; then
  lscpu > "$OUT/cpu-lscpu.txt" 2>&1
  cbudget=${SB_GPU_CPU_BUDGET:-90}
  cstart=$SECONDS
  for t in ${SB_GPU_CPU_TESTS:-matmul_test normalize_test elementwise_test differential_test copy_test quant_test conv_test reduce_test}; do
    if [[ ! -x $bin/$t ]]; then
      say "cpu test $t: not in .devcarry/bin"
      status=1
      continue
    fi
    left=$((cbudget - (SECONDS - cstart)))
    if ((left <= 0)); then
      say "cpu test $t: not run (SB_GPU_CPU_BUDGET spent)"
      status=1
      continue
    fi
    bounded "$(step_time $left)" "$bin/$t" --gtest_filter="-$gpu_cases" --gtest_output="xml:$OUT/cpu-$t.xml" \
      > "$OUT/cpu-$t.log" 2>&1
    rc=$?
    say "cpu test $t: rc=$rc$([[ $rc == 124 ]] && echo ' (timed out)') $(gtest_counts "$OUT/cpu-$t.log")"
    [[ $rc -eq 0 ]] || status=1
  done
fi
# ---- Note [PyTorch parity] against the image's PyTorch (a newer one than Debian's)
if want parity; then
  if [[ ! -x $bin/torch_parity_dump || ! -f $root/tests/torch_parity.py ]]; then
    say "parity: torch_parity_dump not in .devcarry/bin or tests/torch_parity.py not in the tree"
    status=1
  else
    quick=()
    [[ $rehearsal == 1 ]] && quick=(--quick)
    bounded "$(step_time "${SB_GPU_PARITY_BUDGET:-60}")" python3 "$root/tests/torch_parity.py" --cuda ${quick[@]+"${quick[@]}"} \
      "$bin/torch_parity_dump" > "$OUT/torch_parity.log" 2>&1
    rc=$?
    if [[ $rc == 77 ]]; then
      say "parity: skipped ($(tail -n 1 "$OUT/torch_parity.log"))"
    else
      say "parity: rc=$rc$([[ $rc == 124 ]] && echo ' (timed out)') $(grep -c '^DIFFER' "$OUT/torch_parity.log") cases differ; $(grep -m 1 '^torch_parity \[default\]' "$OUT/torch_parity.log" | cut -c1-160)"
      [[ $rc -eq 0 ]] || status=1
    fi
  fi
fi
if want tests || want cputests || want parity; then pack tests; fi

# ---- sanitizers
if want sanitize && command -v compute-sanitizer >/dev/null; then
  san="compute-sanitizer --error-exitcode=86 --print-limit=20"
  skip='*BinaryEveryOpDtypeLayout*:*EveryOpDtypeDimsLayout*:CudaConv.WorkspaceChunksOfImages:CudaAllocator.ImpossibleRequestThrowsAndLeavesAllocatorUsable'
  rc=0
  for t in $tests; do
    echo "== $t" >> "$OUT/memcheck.log"
    # the differential test with a tenth of its random cases (SB_DIFFERENTIAL_CUDA_CASES)
    SB_CUDNN_AUTOTUNE=0 SB_CUDA_ALLOCATOR=direct SB_DIFFERENTIAL_CUDA_CASES=200 bounded "$(step_time 300)" $san --tool memcheck --leak-check no "$bin/$t" \
      --gtest_filter="$gpu_cases-$skip" >> "$OUT/memcheck.log" 2>&1
    r=$?
    ((r == 0)) || rc=$r
  done
  say "memcheck: rc=$rc (86: errors found; 124: timed out) $(grep 'ERROR SUMMARY' "$OUT/memcheck.log" | sort | uniq -c | tr '\n' ' ')"
  [[ $rc -eq 0 ]] || status=1
  rc=0
  # binary:filter, each filter naming the tests of that binary whose kernels use shared
  # memory; a filter that runs no test is an error (a renamed or moved test)
  for tf in copy_test:'*NchwNhwcAndLastTwoDimsTransposed/cuda0:CudaCopy.TwoByteTransposesMoveAlignedPairs' \
            reduce_test:'*LargeInnerOuterAndErrors/cuda0:CudaReduce.TwoByteOuterColumnsTakePairs:CudaReduce.SplitsFinishInTheirLastBlock' \
            normalize_test:'*NormalizeOnDevice.*/cuda0' \
            elementwise_test:'CudaElementwise.MismatchedLayoutsTakeTheTiledPath:CudaElementwise.AlignedTilesMovePairs'; do
    t=${tf%%:*}
    echo "== $t" >> "$OUT/racecheck.log"
    bounded "$(step_time 200)" $san --tool racecheck "$bin/$t" --gtest_filter="${tf#*:}" > "$OUT/racecheck.one" 2>&1
    r=$?
    cat "$OUT/racecheck.one" >> "$OUT/racecheck.log"
    if grep -q '^\[==========\] Running 0 tests' "$OUT/racecheck.one"; then
      say "racecheck: $t ran no test for its filter ${tf#*:}"
      r=1
    fi
    rm -f "$OUT/racecheck.one"
    ((r == 0)) || rc=$r
  done
  say "racecheck: rc=$rc $(grep 'RACECHECK SUMMARY\|ERROR SUMMARY' "$OUT/racecheck.log" | sort | uniq -c | tr '\n' ' ')"
  [[ $rc -eq 0 ]] || status=1
  pack sanitize
fi

# ---- benchmarks: the baseline first, always
if want bench; then
  others=${SB_GPU_BENCH:-$(cd "$bin" && ls bench_* 2>/dev/null | tr '\n' ' ')}
  others=$(echo " $others " | sed 's/ bench_baseline_cuda / /g')
  for b in bench_baseline_cuda $others; do
    [[ -x $bin/$b ]] || { say "bench $b: not in .devcarry/bin"; status=1; continue; }
    if [[ $rehearsal == 1 ]]; then
      bounded "$(step_time 60)" "$bin/$b" --benchmark_list_tests > "$OUT/$b.list" 2>&1
      rc=$?
      say "bench $b: rc=$rc (listed $(grep -c / "$OUT/$b.list") runs)"
    else
      bounded "$(step_time 420)" "$bin/$b" --benchmark_out="$OUT/$b.json" --benchmark_out_format=json > "$OUT/$b.log" 2>&1
      rc=$?
      say "bench $b: rc=$rc$([[ $rc == 124 ]] && echo ' (timed out: the JSON is partial)')"
    fi
    [[ $rc -eq 0 ]] || status=1
  done
  if want recheck; then mkdir -p "$here/json" && cp "$OUT"/*.json "$here/json/" 2>/dev/null; fi
  pack bench
fi

# ---- PyTorch's CUDA rows
if want peers; then
  if [[ $rehearsal == 1 ]]; then
    bounded "$(step_time 60)" python3 "$root/scripts/peers.py" --help > "$OUT/peers.log" 2>&1
    rc=$?
    say "peers: rc=$rc (rehearsal: --help only)"
  else
    mkdir -p "$OUT/peers"
    bounded "$(step_time 300)" python3 "$root/scripts/peers.py" --libs torch --filter "${SB_GPU_PEERS_FILTER:-device:cuda}" \
      --bench-dir "$bin" --context-from "$OUT" --out-dir "$OUT/peers" > "$OUT/peers.log" 2>&1
    rc=$?
    say "peers: rc=$rc$([[ $rc == 124 ]] && echo ' (timed out)')"
    if want recheck; then mkdir -p "$here/json" && cp "$OUT"/peers/*.json "$here/json/" 2>/dev/null; fi
  fi
  [[ $rc -eq 0 ]] || status=1
  pack peers
fi
# ---- the peer rows the Summary would quote, re-measured alternating
if want recheck; then
  if [[ $rehearsal == 1 ]]; then
    bounded "$(step_time 60)" python3 "$root/scripts/recheck" --help > "$OUT/recheck.log" 2>&1
    rc=$?
    say "recheck: rc=$rc (rehearsal: --help only)"
  elif [[ ! -d $here/json ]] || ! ls "$here/json"/peers_*.json > /dev/null 2>&1; then
    say "recheck: needs the bench and peers steps of this call"
    rc=1
  else
    rbudget=${SB_GPU_RECHECK_BUDGET:-60}
    # the budget stops new rounds; a started round (a few seconds) may run past it
    bounded "$(step_time $((rbudget + 60)))" python3 "$root/scripts/recheck" --json-dir "$here/json" \
      --bench-dir "$bin" --peers-script "$root/scripts/peers.py" --budget "$rbudget" --band 1.05 \
      --max-cases "${SB_GPU_RECHECK_CASES:-20}" $([[ ${SB_GPU_RECHECK_PRECISION:-0} == 1 ]] || echo --no-precision) \
      $([[ ${SB_GPU_RECHECK_PEAK:-0} == 1 ]] || echo --no-peak) \
      --out "$OUT/recheck.json" > "$OUT/recheck.log" 2>&1
    rc=$?
    say "recheck: rc=$rc$([[ $rc == 124 ]] && echo ' (timed out)') $(tail -1 "$OUT/recheck.log")"
  fi
  [[ $rc -eq 0 ]] || status=1
  pack recheck
fi
# ---- Nsight Compute on named rows
if want profile; then
  IFS=';' read -ra entries <<< "${SB_GPU_PROFILE:-}"
  if [[ ${#entries[@]} -eq 0 ]]; then
    say "profile: SB_GPU_PROFILE names no row (binary|benchmark filter|kernel regex;...)"
    status=1
  elif [[ $rehearsal != 1 ]] && ! command -v ncu >/dev/null; then
    say "profile: ncu not found on PATH or under /usr/local/cuda*/bin"
    status=1
  else
    mkdir -p "$OUT/profile"
    n=0
    for e in "${entries[@]}"; do
      IFS='|' read -r b filt kre <<< "$e"
      n=$((n + 1))
      if [[ ! -x $bin/$b || -z $filt || -z $kre ]]; then
        say "profile $n: '$e' is not binary|benchmark filter|kernel regex of a binary in .devcarry/bin"
        status=1
        continue
      fi
      if [[ $rehearsal == 1 ]]; then
        say "profile $n ($b, $kre): rehearsal, not run"
        continue
      fi
      rep=$OUT/profile/$b.$n.txt
      echo "# $b --benchmark_filter='$filt', kernel regex '$kre'" > "$rep"
      bounded "$(step_time 120)" ncu --clock-control none --set full --launch-skip "${SB_GPU_PROFILE_SKIP:-3}" \
        --launch-count 1 -k "regex:$kre" "$bin/$b" --benchmark_filter="$filt" --sb_repetitions=1 >> "$rep" 2>&1
      rc=$?
      say "profile $n ($b, $kre): rc=$rc$([[ $rc == 124 ]] && echo ' (timed out)') $(grep -c 'Section: ' "$rep") sections"
      [[ $rc -eq 0 ]] || status=1
    done
  fi
  pack profile
fi
# ---- variant builds against this one, alternating
# alternate NAME OLD_EXE NEW_EXE OUTDIR: SB_GPU_AB_ROUNDS rounds, the order swapped
# every round, JSON as OUTDIR/NAME.<old|new>.<round>.json (the ab step's form)
alternate() {
  local name=$1 old=$2 new=$3 dir=$4 r side exe rc
  for ((r = 1; r <= ${SB_GPU_AB_ROUNDS:-3}; ++r)); do
    for side in $( ((r % 2)) && echo "old new" || echo "new old"); do
      exe=$old
      [[ $side == new ]] && exe=$new
      if [[ $rehearsal == 1 ]]; then
        bounded "$(step_time 60)" "$exe" --benchmark_list_tests > "$dir/$name.$side.$r.list" 2>&1
      else
        bounded "$(step_time 300)" "$exe" --benchmark_out="$dir/$name.$side.$r.json" \
          --benchmark_out_format=json --benchmark_filter="${SB_GPU_AB_FILTER:-.}" > /dev/null 2>> "$dir/$name.log"
      fi
      rc=$?
      [[ $rc -eq 0 ]] || { say "alternate $dir/$name $side round $r: rc=$rc"; status=1; }
    done
  done
}
if want variants; then
  if [[ ! -d $here/var ]]; then
    say "variants: no .devcarry/var (gpu_prepare.sh with SB_GPU_VARIANTS=\"<name>=<dir> ...\")"
    status=1
  else
    for vdir in "$here"/var/*/; do
      v=$(basename "$vdir")
      mkdir -p "$OUT/variants/$v"
      for t in "$vdir"*_test; do
        [[ -x $t ]] || continue
        tn=$(basename "$t")
        SB_CUDNN_AUTOTUNE=0 bounded "$(step_time 120)" "$t" --gtest_filter="$gpu_cases" > "$OUT/variants/$v/$tn.log" 2>&1
        rc=$?
        say "variant $v test $tn: rc=$rc $(gtest_counts "$OUT/variants/$v/$tn.log")"
        [[ $rc -eq 0 ]] || status=1
      done
      for b in "$vdir"bench_*; do
        [[ -x $b ]] || continue
        bn=$(basename "$b")
        [[ -x $bin/$bn ]] || { say "variant $v: $bn has no namesake in bin/"; status=1; continue; }
        alternate "$bn" "$bin/$bn" "$b" "$OUT/variants/$v"
        say "variant $v $bn: ${SB_GPU_AB_ROUNDS:-3} rounds"
      done
    done
  fi
  pack variants
fi
# ---- old against new, alternating
if want ab; then
  if [[ ! -d $here/old ]]; then
    say "ab: no .devcarry/old (gpu_prepare.sh with SB_GPU_OLD=<dir>)"
    status=1
  else
    mkdir -p "$OUT/ab"
    for b in $(cd "$here/old" && ls); do
      alternate "$b" "$here/old/$b" "$bin/$b" "$OUT/ab"
      say "ab $b: ${SB_GPU_AB_ROUNDS:-3} rounds"
    done
  fi
  pack ab
fi
pack rest
say "gpu_run: done in $((SECONDS - start))s, status $status"
exit $status
