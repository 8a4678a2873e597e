#!/usr/bin/env bash
# gpu_prepare.sh — run HERE (the build machine, no GPU): copies the CUDA test and
# benchmark binaries of a CUDA build, plus the shared libraries they need that a
# device machine's CUDA image lacks, into .devcarry/ (git-ignored), for the device
# tool's `carry`. See docs/GPU.md.
#
#   scripts/gpu_prepare.sh [build-dir [carry-dir]]     (default: build .devcarry)
#
# Libraries: everything `ldd` lists except the C runtime (libc, libm, libstdc++, …,
# newer on the device image) and CUDA's own (libcudart, libcublas, libcublasLt, libcudnn:
# the device image has CUDA 13 and cuDNN 9, and libcublasLt alone is ~540 MB, cuDNN's
# engine libraries more, over the 64 MiB carry).
#
# The carry is gpu_run.sh and payload.tar.xz (bin/ and lib/), which gpu_run.sh unpacks
# beside itself: every binary links the kernels statically, so each holds the whole
# fatbin.
set -euo pipefail
build=${1:-build}
out=${2:-.devcarry}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
rm -rf "$out"
mkdir -p "$out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
bins=()
for b in tests/cuda_allocator_test tests/cuda_stream_test tests/copy_test tests/elementwise_test tests/normalize_test tests/reduce_test tests/matmul_test \
         tests/conv_test tests/quant_test tests/differential_test tests/torch_parity_dump benchmarks/bench_transfer \
         benchmarks/bench_baseline_cuda \
         benchmarks/bench_alloc_cuda benchmarks/bench_elementwise_cuda benchmarks/bench_copy_cuda \
         benchmarks/bench_reduce_cuda benchmarks/bench_matmul_cuda benchmarks/bench_conv_cuda benchmarks/bench_quant_cuda; do
  if [[ -x "$build/$b" ]]; then
    cp "$build/$b" "$stage/bin/"
    bins+=("$build/$b")
  else
    echo "gpu_prepare: $build/$b missing (is $build a CUDA build? meson setup $build; ninja -C $build)" >&2
  fi
done
[[ ${#bins[@]} -gt 0 ]] || { echo "gpu_prepare: no binaries found" >&2; exit 1; }
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libgcc_s\.so|libstdc\+\+\.so|libcudart\.so|libcublas\.so|libcublasLt\.so|libcuda\.so|libcudnn)'
ldd "${bins[@]}" | awk '/=>/ {print $1, $3}' | sort -u | while read -r name path; do
  if [[ "$name" =~ $skip ]]; then continue; fi
  if [[ "$path" == "not" || ! -e "$path" ]]; then
    echo "gpu_prepare: $name not found here" >&2
    exit 1
  fi
  cp -L "$path" "$stage/lib/$name"
  echo "carry lib: $name ($path)"
done
parts=(bin lib)
if [[ -n ${SB_GPU_OLD:-} ]]; then  # an earlier build's bench binaries, for gpu_run.sh's ab step
  mkdir -p "$stage/old"
  for b in "${bins[@]}"; do
    name=$(basename "$b")
    [[ $name == bench_* && -x $SB_GPU_OLD/$name ]] && cp "$SB_GPU_OLD/$name" "$stage/old/"
  done
  [[ -n $(ls "$stage/old") ]] || { echo "gpu_prepare: no bench_* binary of this build in $SB_GPU_OLD" >&2; exit 1; }
  echo "carry old: $(ls "$stage/old" | tr '\n' ' ')"
  parts+=(old)
fi
if [[ -n ${SB_GPU_VARIANTS:-} ]]; then  # "A=dir B=dir": variant builds for gpu_run.sh's variants step
  for v in $SB_GPU_VARIANTS; do
    name=${v%%=*}
    dir=${v#*=}
    [[ $name =~ ^[A-Za-z0-9_-]+$ && $name != "$v" && -d $dir ]] ||
      { echo "gpu_prepare: SB_GPU_VARIANTS entry '$v' is not NAME=<dir of binaries>" >&2; exit 1; }
    mkdir -p "$stage/var/$name"
    for b in "${bins[@]}"; do
      n=$(basename "$b")
      [[ -x $dir/$n ]] && cp "$dir/$n" "$stage/var/$name/"
    done
    [[ -n $(ls "$stage/var/$name") ]] || { echo "gpu_prepare: no binary of this build in $dir" >&2; exit 1; }
    echo "carry variant $name: $(ls "$stage/var/$name" | tr '\n' ' ')"
  done
  parts+=(var)
fi
# xz with a dictionary larger than the whole tar: every binary links lib/cuda statically
# and holds the same fatbin, which a dictionary spanning all of them stores once (gzip's
# 32 KiB window stores it once per binary; docs/GPU.md gives the sizes)
command -v xz >/dev/null || { echo "gpu_prepare: xz not found (Debian: xz-utils)" >&2; exit 1; }
tar -cf - -C "$stage" "${parts[@]}" | xz --lzma2=preset=0,dict=256MiB > "$out/payload.tar.xz"
cp scripts/gpu_run.sh "$out/"
# The carry travels with the working tree (tracked and untracked-not-ignored files):
# 64 MiB a call together. Keep the sum under 62 MiB.
size_kib=$(du -sk "$out" | cut -f1)
tree_kib=0
if git rev-parse --show-toplevel >/dev/null 2>&1; then
  # a tracked file deleted in the working tree has no size: counted as 0, not an error
  tree_kib=$(( $(git ls-files -z --cached --others --exclude-standard | { xargs -0 -r stat -c %s -- 2>/dev/null || true; } |
                 awk '{s += $1} END {print s + 0}') / 1024 ))
fi
if ((size_kib + tree_kib > 62 * 1024)); then
  echo "gpu_prepare: $out is $((size_kib / 1024)) MiB and the working tree $((tree_kib / 1024)) MiB," \
       "over the 62 MiB a device call carries" >&2
  exit 1
fi
echo "carry: $((size_kib / 1024)) MiB + working tree $((tree_kib / 1024)) MiB"
echo "now: device run with carry [\"$out\"] and command: bash $out/gpu_run.sh"
